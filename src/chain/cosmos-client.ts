/**
 * ChainPort over a Cosmos node's REST API only, as the network's own gateway does it (devshardctl,
 * ctl/chain_tx_rest.go): chain id from `/cosmos/base/tendermint/v1beta1/node_info`, account number
 * from `/cosmos/auth/v1beta1/accounts/{addr}`, txs signed offline (tx.ts: unordered, fixed fee and
 * gas), sent with `POST /cosmos/tx/v1beta1/txs` (BROADCAST_MODE_SYNC) and looked up by hash with
 * `GET /cosmos/tx/v1beta1/txs/{hash}`; the inference module's params, approved devshard versions,
 * escrows, epoch, participants, authz warm-key grants, balances and the node's model list over REST too. No CometBFT RPC is needed.
 *
 * Unordered txs carry no account sequence: two creates back to back, a pending one, or a tx another
 * tool sent from the same account in between never make the next one fail. The chain's replay
 * protection is (signer, timeout_timestamp), so every tx of one address gets a distinct timeout.
 * Keys: parsed per call, never logged nor put into errors.
 */
import { toBase64 } from '@cosmjs/encoding';
import { kindOfFailure } from './devshard-errors.js';
import { addressOfPrivateKey, DENOM, privateKeyBytes } from './keys.js';
import { MsgCreateDevshardEscrowType, MsgSettleDevshardEscrowType } from './messages.js';
import {
  ChainError,
  type ChainEscrow,
  type ChainPort,
  type CreateEscrowResult,
  type EffectiveTxFee,
  type EpochInfo,
  type EscrowParams,
  type PreparedTx,
  type Settlement,
  type SettleEscrowResult,
  type TxFeeOverride,
  type TxOutcome,
} from './port.js';
import {
  fetchBalance,
  fetchEpoch,
  fetchEscrow,
  fetchModels,
  fetchParams,
  fetchParticipantUrl,
  fetchTx,
  getJson,
  num,
  obj,
  trimSlash,
  type RestOptions,
} from './rest-queries.js';
import { settleMessage } from './settlement-message.js';
import { signTx, UNORDERED_TX_TTL_MS, type TxMessage } from './tx.js';
import { fetchWarmKeyGranted } from './warm-keys.js';
import { DEFAULT_TX_FEE, eventAttr, PARTICIPANT_TTL_MS, type CosmosChainClientOptions } from './cosmos-client-options.js';

export { DEFAULT_TX_FEE, PARTICIPANT_TTL_MS, type CosmosChainClientOptions } from './cosmos-client-options.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class CosmosChainClient implements ChainPort {
  private cachedChainId: string | undefined;
  private readonly participants = new Map<string, { url: string; until: number }>();
  /** Last timeout timestamp (ms) given to a tx of each address: the chain refuses a reused one. */
  private readonly lastTimeout = new Map<string, number>();
  private readonly rest: RestOptions;
  private readonly fee: { denom: string; amount: bigint; gasLimit: bigint };
  private readonly pollMs: number;
  private readonly timeoutMs: number;
  private readonly now: () => number;

  constructor(private readonly options: CosmosChainClientOptions) {
    this.fee = {
      denom: options.feeDenom ?? DEFAULT_TX_FEE.denom,
      amount: options.feeAmount ?? DEFAULT_TX_FEE.amount,
      gasLimit: options.gasLimit !== undefined ? BigInt(options.gasLimit) : DEFAULT_TX_FEE.gasLimit,
    };
    this.pollMs = options.broadcastPollIntervalMs ?? 150;
    this.timeoutMs = options.broadcastTimeoutMs ?? 60_000;
    this.now = options.now ?? Date.now;
    const nodeBaseUrl = options.nodeBaseUrl ?? options.restUrl;
    this.rest = {
      restUrl: options.restUrl,
      nodeBaseUrl,
      publicApiUrl: options.publicApiUrl ?? nodeBaseUrl,
      timeoutMs: options.requestTimeoutMs ?? 10_000,
    };
  }

  /** The fixed fee every tx pays (in `feeDenom`). */
  get feeAmount(): bigint {
    return this.fee.amount;
  }

  get feeDenom(): string {
    return this.fee.denom;
  }

  /** The configured fee and gas, with `override`'s members in their place (one tx's fee). */
  txFee(override: TxFeeOverride = {}): EffectiveTxFee {
    return { denom: override.denom ?? this.fee.denom, amount: override.amount ?? this.fee.amount, gasLimit: override.gasLimit ?? this.fee.gasLimit };
  }

  // --- reads ---

  async chainId(): Promise<string> {
    if (this.cachedChainId) return this.cachedChainId;
    const info = obj(await getJson(`${trimSlash(this.rest.restUrl)}/cosmos/base/tendermint/v1beta1/node_info`, this.rest.timeoutMs));
    const id = String(obj(info.default_node_info).network ?? '');
    if (id === '') throw new ChainError('rejected', 'node_info names no chain id (default_node_info.network)');
    if (this.options.chainId && this.options.chainId !== id) {
      throw new ChainError('rejected', `node serves chain ${id}, configured CHAIN_ID is ${this.options.chainId}`);
    }
    this.cachedChainId = id;
    return id;
  }

  async height(): Promise<number> {
    const b = obj(await getJson(`${trimSlash(this.rest.restUrl)}/cosmos/base/tendermint/v1beta1/blocks/latest`, this.rest.timeoutMs));
    return num(obj(obj(b.block).header).height, 'height');
  }

  epoch(): Promise<EpochInfo> {
    return fetchEpoch(this.rest);
  }

  params(): Promise<EscrowParams> {
    return fetchParams(this.rest);
  }

  /** The escrow with each slot's host URL from its participant (cached PARTICIPANT_TTL_MS). */
  escrow(id: string): Promise<ChainEscrow | null> {
    return fetchEscrow(this.rest, id, (address) => this.participantUrl(address));
  }

  /** Forgets cached participant URLs (all, or one address), e.g. after a call to a host failed. */
  forgetParticipants(address?: string): void {
    if (address === undefined) this.participants.clear();
    else this.participants.delete(address);
  }

  private async participantUrl(address: string): Promise<string> {
    const cached = this.participants.get(address);
    if (cached && cached.until > Date.now()) return cached.url;
    const url = await fetchParticipantUrl(this.rest, address);
    this.participants.set(address, { url, until: Date.now() + PARTICIPANT_TTL_MS });
    return url;
  }

  balance(address: string, denom = DENOM): Promise<bigint> {
    return fetchBalance(this.rest, address, denom);
  }

  models(): Promise<string[]> {
    return fetchModels(this.rest);
  }

  /** Cosmos authz: `cold` granted `warm` the warm-key marker (v0.2.15+), or the legacy one (warm-keys.ts). */
  warmKeyGranted(cold: string, warm: string): Promise<boolean> {
    return fetchWarmKeyGranted(this.rest, cold, warm);
  }

  async addressOf(privateKeyHex: string): Promise<string> {
    return addressOfPrivateKey(privateKeyHex);
  }

  // --- transactions ---

  async prepareCreateEscrow(privateKeyHex: string, amount: bigint, modelId: string, fee?: TxFeeOverride): Promise<PreparedTx> {
    return this.prepare(privateKeyHex, this.txFee(fee), (creator) => ({
      typeUrl: MsgCreateDevshardEscrowType.typeUrl,
      value: MsgCreateDevshardEscrowType.encode({ creator, amount, modelId }),
    }));
  }

  async prepareSettleEscrow(privateKeyHex: string, settlement: Settlement, fee?: TxFeeOverride): Promise<PreparedTx> {
    return this.prepare(privateKeyHex, this.txFee(fee), (settler) => ({
      typeUrl: MsgSettleDevshardEscrowType.typeUrl,
      value: MsgSettleDevshardEscrowType.encode(settleMessage(settler, settlement)),
    }));
  }

  /**
   * Sync broadcast over REST. A refusal is first checked against the chain by hash: a tx already
   * in the mempool or already included (a retry after a lost answer) is not an error, and its
   * outcome is what the caller gets.
   */
  async broadcast(tx: PreparedTx): Promise<TxOutcome> {
    const url = `${trimSlash(this.rest.restUrl)}/cosmos/tx/v1beta1/txs`;
    let res: Response;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ tx_bytes: tx.txBytes, mode: 'BROADCAST_MODE_SYNC' }),
        signal: AbortSignal.timeout(this.rest.timeoutMs),
      });
    } catch (e) {
      throw new ChainError('unreachable', `broadcast failed, outcome unknown: ${(e as Error).message}`, { txHash: tx.txHash });
    }
    let body: unknown;
    try {
      body = await res.json();
    } catch {
      body = undefined;
    }
    if (!res.ok || body === undefined) {
      // The node may have taken the tx before failing to answer: the caller asks by hash later.
      throw new ChainError('unreachable', `broadcast answered HTTP ${res.status}, outcome unknown`, { txHash: tx.txHash });
    }
    const r = obj(obj(body).tx_response);
    const code = num(r.code, 'code');
    if (code !== 0) {
      const codespace = String(r.codespace ?? '');
      const rawLog = String(r.raw_log ?? '');
      // SDK ErrTxInMempoolCache (19): this very tx is already pending.
      if (!(code === 19 && (codespace === 'sdk' || codespace === ''))) {
        const known = await this.findTx(tx.txHash).catch(() => null);
        if (known) return known;
        const kind = kindOfFailure(code, codespace, rawLog);
        throw new ChainError(kind, `transaction rejected by the node: ${rawLog || `code ${code}`}`, { code, codespace, rawLog, txHash: tx.txHash });
      }
    }
    return this.waitForTx(tx.txHash);
  }

  /**
   * Looks the hash up at DEVSHARD_TX_QUERY_REST (a node that indexes txs) when set, then at the
   * chain REST: devshardctl also asks both addresses.
   */
  async findTx(txHash: string): Promise<TxOutcome | null> {
    const bases = [this.rest.restUrl];
    const extra = this.options.txQueryRestUrl;
    if (extra && trimSlash(extra) !== trimSlash(this.rest.restUrl)) bases.unshift(extra);
    let lastError: unknown;
    for (const base of bases) {
      try {
        const found = await fetchTx({ txQueryRestUrl: base, timeoutMs: this.rest.timeoutMs }, txHash);
        if (found) return found;
      } catch (e) {
        lastError = e;
      }
    }
    if (lastError) throw lastError;
    return null;
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

  /** The settle event's `remainder` (what went back to the creator); 0 when the chain does not report one. */
  settledRefund(outcome: TxOutcome): bigint {
    const remainder = eventAttr(outcome, 'devshard_escrow_settled', 'remainder');
    return remainder === undefined || !/^\d+$/.test(remainder) ? 0n : BigInt(remainder);
  }

  settledAmounts(outcome: TxOutcome): { totalPayout: bigint; fees: bigint; remainder: bigint } | undefined {
    const get = (key: string) => eventAttr(outcome, 'devshard_escrow_settled', key);
    const [totalPayout, fees, remainder] = [get('total_payout'), get('fees'), get('remainder')];
    if (![totalPayout, fees, remainder].every((v) => v !== undefined && /^\d+$/.test(v))) return undefined;
    return { totalPayout: BigInt(totalPayout!), fees: BigInt(fees!), remainder: BigInt(remainder!) };
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
    // Stateless over HTTP: nothing to disconnect.
  }

  // --- internals ---

  private async prepare(privateKeyHex: string, fee: EffectiveTxFee, message: (address: string) => TxMessage): Promise<PreparedTx> {
    let key: Uint8Array;
    try {
      key = privateKeyBytes(privateKeyHex);
    } catch (e) {
      throw new ChainError('rejected', (e as Error).message);
    }
    const address = addressOfPrivateKey(privateKeyHex);
    const chainId = await this.chainId();
    const accountNumber = await this.accountNumber(address);
    // A distinct, increasing timeout per address: the chain keys its replay protection on it.
    const timeoutMs = Math.max(this.now() + UNORDERED_TX_TTL_MS, (this.lastTimeout.get(address) ?? 0) + 1);
    this.lastTimeout.set(address, timeoutMs);
    let signed: { bytes: Uint8Array; hash: string };
    try {
      signed = signTx({ privateKey: key, chainId, accountNumber, messages: [message(address)], fee, ordering: { unordered: true, timeoutMs } });
    } catch (e) {
      if (e instanceof ChainError) throw e;
      throw new ChainError('rejected', `signing failed: ${(e as Error).message}`);
    }
    return { txHash: signed.hash, txBytes: toBase64(signed.bytes), creator: address };
  }

  /**
   * The account number, read for every tx as devshardctl does: it also proves the node answers
   * before an intent is recorded, and that the account exists (an account never funded does not).
   */
  private async accountNumber(address: string): Promise<bigint> {
    const body = await getJson(`${trimSlash(this.rest.restUrl)}/cosmos/auth/v1beta1/accounts/${encodeURIComponent(address)}`, this.rest.timeoutMs, true);
    if (body === undefined) throw new ChainError('insufficient_funds', `account ${address} does not exist on chain (never funded)`);
    const n = String(obj(obj(body).account).account_number ?? '');
    if (!/^\d+$/.test(n)) throw new ChainError('rejected', `account ${address}: no account_number in the auth answer`);
    return BigInt(n);
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
}

export function createCosmosChainClient(options: CosmosChainClientOptions): CosmosChainClient {
  return new CosmosChainClient(options);
}

/**
 * Reads the chain settings: DEVSHARD_CHAIN_REST or NODE_CHAIN_API (required), NODE_BASE,
 * DEVSHARD_PUBLIC_API, DEVSHARD_TX_QUERY_REST, CHAIN_ID, DEVSHARD_TX_FEE_AMOUNT, DEVSHARD_TX_FEE_DENOM,
 * DEVSHARD_TX_GAS_LIMIT. NODE_RPC is accepted and unused.
 */
export function cosmosChainClientFromEnv(env: NodeJS.ProcessEnv = process.env, overrides: Partial<CosmosChainClientOptions> = {}): CosmosChainClient {
  const restUrl = overrides.restUrl ?? (env.DEVSHARD_CHAIN_REST || env.NODE_CHAIN_API);
  if (!restUrl) throw new Error('DEVSHARD_CHAIN_REST or NODE_CHAIN_API must be set');
  const gasLimit = env.DEVSHARD_TX_GAS_LIMIT ? Number(env.DEVSHARD_TX_GAS_LIMIT) : undefined;
  if (gasLimit !== undefined && (!Number.isInteger(gasLimit) || gasLimit <= 0)) throw new Error('DEVSHARD_TX_GAS_LIMIT must be a positive integer');
  const fee = env.DEVSHARD_TX_FEE_AMOUNT?.trim();
  if (fee && !/^\d+$/.test(fee)) throw new Error('DEVSHARD_TX_FEE_AMOUNT must be a non-negative integer');
  return new CosmosChainClient({
    restUrl,
    nodeBaseUrl: env.NODE_BASE || undefined,
    publicApiUrl: env.DEVSHARD_PUBLIC_API || undefined,
    txQueryRestUrl: env.DEVSHARD_TX_QUERY_REST || undefined,
    chainId: env.CHAIN_ID || undefined,
    gasLimit,
    feeAmount: fee ? BigInt(fee) : undefined,
    feeDenom: env.DEVSHARD_TX_FEE_DENOM?.trim() || undefined,
    ...overrides,
  });
}
