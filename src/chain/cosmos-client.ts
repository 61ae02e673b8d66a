/**
 * ChainPort over a CometBFT/Cosmos node: @cosmjs/stargate for accounts, signing and broadcast,
 * CometBFT JSON-RPC `tx_search` for outcomes (it carries the codespace), REST for the inference
 * module's params, escrows, epoch, balances and the node's model list.
 *
 * Keys: a 64-hex key becomes a DirectSecp256k1Wallet once and is cached by its address; keys are
 * never logged nor put into errors. Sequences: prepares for one address run one at a time and take
 * max(chain sequence, last prepared + 1), so concurrent prepares never reuse a sequence. A stale
 * prepared tx (its sequence was used by another) is reported as ChainError 'bad_sequence' and the
 * caller prepares again: re-signing inside broadcast would change the hash the caller recorded.
 */
import { sha256 } from '@cosmjs/crypto';
import { fromBase64, toBase64, toHex } from '@cosmjs/encoding';
import { DirectSecp256k1Wallet, type EncodeObject } from '@cosmjs/proto-signing';
import { BroadcastTxError, SigningStargateClient, StargateClient, type StdFee } from '@cosmjs/stargate';
import { TxRaw } from 'cosmjs-types/cosmos/tx/v1beta1/tx';
import { kindOfFailure } from './devshard-errors.js';
import { addressOfPrivateKey, BECH32_PREFIX, DENOM, privateKeyBytes } from './keys.js';
import { devshardRegistry, MsgCreateDevshardEscrowType, MsgSettleDevshardEscrowType } from './messages.js';
import {
  ChainError,
  type ChainEscrow,
  type ChainPort,
  type CreateEscrowResult,
  type EpochInfo,
  type EscrowParams,
  type PreparedTx,
  type Settlement,
  type SettleEscrowResult,
  type TxOutcome,
} from './port.js';
import { fetchBalance, fetchEpoch, fetchEscrow, fetchModels, fetchParams, fetchTx, type RestOptions } from './rest-queries.js';
import { settleMessage } from './settlement-message.js';

export interface CosmosChainClientOptions {
  /** CometBFT RPC (NODE_RPC), e.g. `http://127.0.0.1:26657/`. */
  rpcUrl: string;
  /** Chain REST (NODE_CHAIN_API). */
  restUrl: string;
  /** Node base (NODE_BASE), for /v1/governance/models; defaults to restUrl. */
  nodeBaseUrl?: string;
  /**
   * DEVSHARD_TX_QUERY_REST: transactions are looked up by hash at this chain REST address
   * (`/cosmos/tx/v1beta1/txs/{hash}`). Unset: by the RPC's `tx_search`.
   */
  txQueryRestUrl?: string;
  /** Expected chain id (CHAIN_ID); checked against the node's on first use when given. */
  chainId?: string;
  /** DEVSHARD_TX_GAS_LIMIT, default 700000. */
  gasLimit?: number;
  /** ngonka per gas unit (DEVSHARD_TX_GAS_PRICE), default 1: fee = gasLimit * gasPrice. */
  gasPrice?: bigint;
  /** Sleep before each inclusion check, default 150 ms (CosmJS' default is 3000). */
  broadcastPollIntervalMs?: number;
  /** How long broadcast waits for inclusion before ChainError 'timeout', default 60000. */
  broadcastTimeoutMs?: number;
  /** REST / RPC request timeout, default 10000. */
  requestTimeoutMs?: number;
}

interface Signer {
  address: string;
  client: SigningStargateClient;
  /** Sequence the next prepare may use at the earliest (after txs prepared but not yet included). */
  nextSequence?: number;
  accountNumber?: number;
  /** Tail of the per-address prepare queue. */
  queue: Promise<unknown>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const SEQUENCE_MISMATCH = /expected (\d+), got (\d+)/;

export class CosmosChainClient implements ChainPort {
  private readonly registry = devshardRegistry();
  private readonly signers = new Map<string, Promise<Signer>>();
  private query: Promise<StargateClient> | undefined;
  private cachedChainId: string | undefined;
  private readonly rest: RestOptions;
  private readonly gasLimit: number;
  private readonly fee: StdFee;
  private readonly pollMs: number;
  private readonly timeoutMs: number;

  constructor(private readonly options: CosmosChainClientOptions) {
    this.gasLimit = options.gasLimit ?? 700_000;
    const gasPrice = options.gasPrice ?? 1n;
    this.fee = { amount: [{ denom: DENOM, amount: (BigInt(this.gasLimit) * gasPrice).toString() }], gas: String(this.gasLimit) };
    this.pollMs = options.broadcastPollIntervalMs ?? 150;
    this.timeoutMs = options.broadcastTimeoutMs ?? 60_000;
    this.rest = {
      restUrl: options.restUrl,
      nodeBaseUrl: options.nodeBaseUrl ?? options.restUrl,
      timeoutMs: options.requestTimeoutMs ?? 10_000,
    };
  }

  /** The fixed fee every tx pays (ngonka). */
  get feeAmount(): bigint {
    return BigInt(this.fee.amount[0]!.amount);
  }

  // --- reads ---

  async chainId(): Promise<string> {
    if (this.cachedChainId) return this.cachedChainId;
    const id = await this.rpc((q) => q.getChainId());
    if (this.options.chainId && this.options.chainId !== id) {
      throw new ChainError('rejected', `node serves chain ${id}, configured CHAIN_ID is ${this.options.chainId}`);
    }
    this.cachedChainId = id;
    return id;
  }

  height(): Promise<number> {
    return this.rpc((q) => q.getHeight());
  }

  epoch(): Promise<EpochInfo> {
    return fetchEpoch(this.rest);
  }

  params(): Promise<EscrowParams> {
    return fetchParams(this.rest);
  }

  escrow(id: string): Promise<ChainEscrow | null> {
    return fetchEscrow(this.rest, id);
  }

  balance(address: string, denom = DENOM): Promise<bigint> {
    return fetchBalance(this.rest, address, denom);
  }

  models(): Promise<string[]> {
    return fetchModels(this.rest);
  }

  async addressOf(privateKeyHex: string): Promise<string> {
    return addressOfPrivateKey(privateKeyHex);
  }

  // --- transactions ---

  async prepareCreateEscrow(privateKeyHex: string, amount: bigint, modelId: string): Promise<PreparedTx> {
    return this.prepare(privateKeyHex, (creator) => [
      { typeUrl: MsgCreateDevshardEscrowType.typeUrl, value: MsgCreateDevshardEscrowType.create({ creator, amount, modelId }) },
    ]);
  }

  async prepareSettleEscrow(privateKeyHex: string, settlement: Settlement): Promise<PreparedTx> {
    return this.prepare(privateKeyHex, (settler) => [
      { typeUrl: MsgSettleDevshardEscrowType.typeUrl, value: settleMessage(settler, settlement) },
    ]);
  }

  async broadcast(tx: PreparedTx): Promise<TxOutcome> {
    const bytes = fromBase64(tx.txBytes);
    const query = await this.queryClient();
    // A tx whose sequence is ahead of the chain's (an earlier prepared tx is not in yet) is retried
    // for a while: the earlier one usually arrives within a block or two.
    const aheadDeadline = Date.now() + Math.max(2_000, this.pollMs * 10);
    for (;;) {
      try {
        // A node that takes the tx but never answers must not hold the caller forever: after the
        // request timeout the outcome is unknown (the caller looks the hash up later).
        await withTimeout(query.broadcastTxSync(bytes), this.rest.timeoutMs, `no answer from the node within ${this.rest.timeoutMs} ms`);
        break;
      } catch (e) {
        if (e instanceof BroadcastTxError) {
          const mismatch = e.code === 32 ? SEQUENCE_MISMATCH.exec(e.log ?? '') : null;
          if (mismatch && Number(mismatch[2]) > Number(mismatch[1]) && Date.now() < aheadDeadline) {
            await sleep(this.pollMs);
            continue;
          }
          // Rejected before inclusion: the sequence it carried is free again.
          this.forgetSequence(tx.creator);
          if (mismatch) {
            const known = await this.findTx(tx.txHash).catch(() => null);
            if (known) return known;
          }
          const kind = kindOfFailure(e.code, e.codespace ?? '', e.log ?? '');
          throw new ChainError(kind, `transaction rejected by the node: ${e.log ?? `code ${e.code}`}`, {
            code: e.code,
            codespace: e.codespace,
            rawLog: e.log,
            txHash: tx.txHash,
          });
        }
        // CometBFT answers a tx it already holds (mempool or committed) with this RPC error.
        if (/tx already exists in cache/i.test(String((e as Error).message))) break;
        throw new ChainError('unreachable', `broadcast failed, outcome unknown: ${(e as Error).message}`, { txHash: tx.txHash });
      }
    }
    return this.waitForTx(tx.txHash);
  }

  async findTx(txHash: string): Promise<TxOutcome | null> {
    const txQueryRestUrl = this.options.txQueryRestUrl;
    if (txQueryRestUrl) return fetchTx({ txQueryRestUrl, timeoutMs: this.rest.timeoutMs }, txHash);
    const hash = txHash.toUpperCase();
    const result = (await this.jsonRpc('tx_search', { query: `tx.hash='${hash}'`, page: '1' })) as {
      txs?: { hash: string; height: string; tx_result: { code: number; codespace?: string; log?: string; events?: TxOutcome['events'] } }[];
    };
    const found = result.txs?.find((t) => t.hash.toUpperCase() === hash);
    if (!found) return null;
    const r = found.tx_result;
    return {
      txHash: hash,
      height: Number(found.height),
      code: Number(r.code),
      codespace: r.codespace ?? '',
      rawLog: r.log ?? '',
      events: (r.events ?? []).map((e) => ({ type: e.type, attributes: e.attributes.map((a) => ({ key: a.key, value: a.value ?? '' })) })),
    };
  }

  errorOf(outcome: TxOutcome): ChainError {
    const kind = kindOfFailure(outcome.code, outcome.codespace, outcome.rawLog);
    return new ChainError(kind, `transaction failed on chain (code ${outcome.code}): ${outcome.rawLog}`, {
      code: outcome.code,
      codespace: outcome.codespace,
      rawLog: outcome.rawLog,
      txHash: outcome.txHash,
    });
  }

  createdEscrowId(outcome: TxOutcome): string {
    const id = eventAttr(outcome, 'devshard_escrow_created', 'escrow_id');
    if (id === undefined) throw new ChainError('rejected', 'create transaction reports no escrow id', { txHash: outcome.txHash });
    return id;
  }

  /** The refund reported by the settle event; 0 when the chain does not report one. */
  settledRefund(outcome: TxOutcome): bigint {
    const refund = eventAttr(outcome, 'devshard_escrow_settled', 'refund');
    return refund === undefined ? 0n : BigInt(refund);
  }

  // --- conveniences (prepare + broadcast + typed error) for callers without a write-ahead log ---

  async createEscrow(privateKeyHex: string, amount: bigint, modelId: string): Promise<CreateEscrowResult> {
    const outcome = await this.broadcast(await this.prepareCreateEscrow(privateKeyHex, amount, modelId));
    if (outcome.code !== 0) throw this.errorOf(outcome);
    const escrowId = this.createdEscrowId(outcome);
    const escrow = await this.escrow(escrowId);
    if (!escrow) throw new ChainError('not_found', `escrow ${escrowId} is not readable after creation`, { txHash: outcome.txHash });
    return { escrowId, txHash: outcome.txHash, height: outcome.height, escrow };
  }

  async settleEscrow(privateKeyHex: string, settlement: Settlement): Promise<SettleEscrowResult> {
    const outcome = await this.broadcast(await this.prepareSettleEscrow(privateKeyHex, settlement));
    if (outcome.code !== 0) throw this.errorOf(outcome);
    return { txHash: outcome.txHash, height: outcome.height, refund: this.settledRefund(outcome) };
  }

  close(): void {
    void this.query?.then((q) => q.disconnect()).catch(() => undefined);
    for (const s of this.signers.values()) void s.then((x) => x.client.disconnect()).catch(() => undefined);
    this.signers.clear();
    this.query = undefined;
  }

  // --- internals ---

  private async prepare(privateKeyHex: string, messages: (address: string) => EncodeObject[]): Promise<PreparedTx> {
    const signer = await this.signerFor(privateKeyHex);
    const run = signer.queue.then(async () => {
      const chainId = await this.chainId();
      const account = await this.rpc((q) => q.getAccount(signer.address));
      if (!account) {
        throw new ChainError('insufficient_funds', `account ${signer.address} does not exist on chain (never funded)`);
      }
      const sequence = Math.max(account.sequence, signer.nextSequence ?? 0);
      let raw: TxRaw;
      try {
        raw = await signer.client.sign(signer.address, messages(signer.address), this.fee, '', {
          accountNumber: BigInt(account.accountNumber),
          sequence,
          chainId,
        });
      } catch (e) {
        if (e instanceof ChainError) throw e;
        throw new ChainError('rejected', `signing failed: ${(e as Error).message}`);
      }
      signer.nextSequence = sequence + 1;
      const bytes = TxRaw.encode(raw).finish();
      return { txHash: toHex(sha256(bytes)).toUpperCase(), txBytes: toBase64(bytes), creator: signer.address };
    });
    signer.queue = run.catch(() => undefined);
    return run;
  }

  private forgetSequence(address: string): void {
    const s = this.signers.get(address);
    if (s) void s.then((x) => (x.nextSequence = undefined));
  }

  private signerFor(privateKeyHex: string): Promise<Signer> {
    const address = addressOfPrivateKey(privateKeyHex);
    let signer = this.signers.get(address);
    if (!signer) {
      signer = (async () => {
        const wallet = await DirectSecp256k1Wallet.fromKey(privateKeyBytes(privateKeyHex), BECH32_PREFIX);
        const client = await this.connect(() =>
          SigningStargateClient.connectWithSigner(this.options.rpcUrl, wallet, {
            registry: this.registry,
            broadcastPollIntervalMs: this.pollMs,
            broadcastTimeoutMs: this.timeoutMs,
          }),
        );
        return { address, client, queue: Promise.resolve() };
      })();
      signer.catch(() => this.signers.delete(address));
      this.signers.set(address, signer);
    }
    return signer;
  }

  private queryClient(): Promise<StargateClient> {
    if (!this.query) {
      const q = this.connect(() => StargateClient.connect(this.options.rpcUrl));
      q.catch(() => (this.query = undefined));
      this.query = q;
    }
    return this.query;
  }

  private async connect<T>(open: () => Promise<T>): Promise<T> {
    try {
      return await open();
    } catch (e) {
      throw new ChainError('unreachable', `chain RPC unreachable at ${this.options.rpcUrl}: ${(e as Error).message}`);
    }
  }

  private async rpc<T>(call: (q: StargateClient) => Promise<T>): Promise<T> {
    const q = await this.queryClient();
    try {
      return await call(q);
    } catch (e) {
      if (e instanceof ChainError) throw e;
      throw new ChainError('unreachable', `chain RPC call failed: ${(e as Error).message}`);
    }
  }

  private async waitForTx(txHash: string): Promise<TxOutcome> {
    const deadline = Date.now() + this.timeoutMs;
    let lastError: unknown;
    while (Date.now() < deadline) {
      await sleep(this.pollMs);
      try {
        const found = await this.findTx(txHash);
        if (found) return found;
      } catch (e) {
        lastError = e; // transient: keep polling until the deadline
      }
    }
    const why = lastError ? `; last error: ${(lastError as Error).message}` : '';
    throw new ChainError('timeout', `transaction ${txHash} not included within ${this.timeoutMs} ms${why}`, { txHash });
  }

  /** A raw CometBFT JSON-RPC call (used where CosmJS drops fields we need, e.g. codespace). */
  private async jsonRpc(method: string, params: Record<string, unknown>): Promise<unknown> {
    let res: Response;
    try {
      res = await fetch(this.options.rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: Math.floor(Math.random() * 1e12), method, params }),
        signal: AbortSignal.timeout(this.rest.timeoutMs),
      });
    } catch (e) {
      throw new ChainError('unreachable', `chain RPC ${method} failed: ${(e as Error).message}`);
    }
    if (!res.ok) throw new ChainError('unreachable', `chain RPC ${method} answered HTTP ${res.status}`);
    const body = (await res.json()) as { result?: unknown; error?: { message?: string; data?: string } };
    if (body.error) throw new ChainError('rejected', `chain RPC ${method}: ${body.error.data ?? body.error.message ?? 'error'}`);
    return body.result;
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

function eventAttr(outcome: TxOutcome, type: string, key: string): string | undefined {
  for (const e of outcome.events) {
    if (e.type !== type) continue;
    const a = e.attributes.find((x) => x.key === key);
    if (a) return a.value;
  }
  return undefined;
}

export function createCosmosChainClient(options: CosmosChainClientOptions): CosmosChainClient {
  return new CosmosChainClient(options);
}

/** Reads NODE_RPC, NODE_CHAIN_API (or DEVSHARD_CHAIN_REST), NODE_BASE, DEVSHARD_TX_QUERY_REST, CHAIN_ID, DEVSHARD_TX_GAS_LIMIT, DEVSHARD_TX_GAS_PRICE. */
export function cosmosChainClientFromEnv(env: NodeJS.ProcessEnv = process.env, overrides: Partial<CosmosChainClientOptions> = {}): CosmosChainClient {
  const rpcUrl = overrides.rpcUrl ?? env.NODE_RPC;
  const restUrl = overrides.restUrl ?? env.NODE_CHAIN_API ?? env.DEVSHARD_CHAIN_REST;
  if (!rpcUrl || !restUrl) throw new Error('NODE_RPC and NODE_CHAIN_API must be set');
  const gasLimit = env.DEVSHARD_TX_GAS_LIMIT ? Number(env.DEVSHARD_TX_GAS_LIMIT) : undefined;
  if (gasLimit !== undefined && (!Number.isInteger(gasLimit) || gasLimit <= 0)) throw new Error('DEVSHARD_TX_GAS_LIMIT must be a positive integer');
  const gasPrice = env.DEVSHARD_TX_GAS_PRICE ? BigInt(env.DEVSHARD_TX_GAS_PRICE) : undefined;
  return new CosmosChainClient({
    rpcUrl,
    restUrl,
    nodeBaseUrl: env.NODE_BASE || undefined,
    txQueryRestUrl: env.DEVSHARD_TX_QUERY_REST || undefined,
    chainId: env.CHAIN_ID || undefined,
    gasLimit,
    gasPrice,
    ...overrides,
  });
}
