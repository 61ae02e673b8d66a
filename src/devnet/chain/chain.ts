/**
 * The devnet chain: application state, mempool, block production and the queries the RPC and REST
 * routes answer. Also the in-process handle tests drive (advance / jump to a height, fault hooks)
 * and the DevnetChainView the simulated hosts read.
 */
import { sha256 } from '@cosmjs/crypto';
import { fromBase64, toBase64, toHex, toUtf8 } from '@cosmjs/encoding';
import { TxMsgData } from 'cosmjs-types/cosmos/base/abci/v1beta1/abci';
import type { DevnetChainView, DevnetEscrowView, HostIdentity } from '../hosts/chain-view.js';
import { SDK_CODES } from '../../chain/devshard-errors.js';
import { DENOM } from '../../chain/keys.js';
import { MsgCreateDevshardEscrowResponseType, MsgCreateDevshardEscrowType } from '../../chain/messages.js';
import type { EscrowSlot } from '../../chain/port.js';
import { checkTx, isFailure, type CheckedTx, type TxFailure } from './ante.js';
import type { DevnetConfig } from './config.js';
import { epochAt, type EpochPosition } from './epochs.js';
import { createEscrow, MsgFailure, settleEscrow, type MsgResult } from './escrow-handlers.js';
import type { ChainState, TxEvent, TxRecord, TxResult } from './state.js';

/** Fixed gas costs: enough that the reference limit (700000) always suffices, as on the network. */
const GAS = { base: 60_000n, create: 40_000n, settle: 60_000n, perSignature: 5_000n };

export interface DevnetFaults {
  /** Answer every RPC call with HTTP 503 (node unreachable / overloaded). */
  rpcDown: boolean;
  /** Accept broadcasts but never include them (stuck mempool). */
  holdMempool: boolean;
  /**
   * Accept (and later include) broadcast txs but lose the answer: 'error' answers HTTP 503,
   * 'reset' drops the connection, 'hang' never answers. The client cannot tell whether the tx
   * reached the chain; it must look it up by hash.
   */
  dropBroadcastResponse: false | 'error' | 'reset' | 'hang';
}

export interface StateStore {
  save(state: ChainState): void;
  close(): void;
}

export type BroadcastAnswer = { inCache: true; hash: string } | { inCache: false; hash: string; failure?: TxFailure };

export class DevnetChain implements DevnetChainView {
  /** Origin of the devnet server (`http://127.0.0.1:PORT`), known once it listens. */
  baseUrl = '';
  readonly faults: DevnetFaults = { rpcDown: false, holdMempool: false, dropBroadcastResponse: false };
  private mempool: { hash: string; bytes: Uint8Array }[] = [];
  /** Mempool cache (CometBFT keeps accepted tx hashes to refuse duplicates). */
  private readonly cache = new Set<string>();
  /** Sequences as the mempool sees them: committed + txs already accepted this block. */
  private readonly checkSequences = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private waiters: { height: number; resolve: () => void }[] = [];
  private blocksSinceSave = 0;

  constructor(
    readonly config: DevnetConfig,
    readonly hosts: HostIdentity[],
    public state: ChainState,
    private readonly store?: StateStore,
  ) {}

  get height(): number {
    return this.state.height;
  }

  get chainId(): string {
    return this.state.chainId;
  }

  epoch(height = this.state.height): EpochPosition {
    return epochAt(height, this.config.epochBlocks, this.config.pocBlocks);
  }

  /** The slots every escrow is given: all hosts, slot i = host i, mounted under /hosts/i. */
  slots(): EscrowSlot[] {
    return this.hosts.map((h) => ({ slotId: h.index, host: h.address, url: `${this.baseUrl}${h.prefix}` }));
  }

  // --- DevnetChainView (read by the simulated hosts) ---

  escrow(id: string): DevnetEscrowView | undefined {
    const e = this.state.escrows[id];
    if (!e) return undefined;
    // amount: the real host protocol binds its replica to it (the session fields and bind params stay the defaults).
    return { id: String(e.id), creator: e.creator, modelId: e.modelId, settled: e.settled, epochIndex: e.epochIndex, slots: e.slots, amount: e.amount };
  }

  pubKeyOf(address: string): Uint8Array | undefined {
    const b64 = this.state.accounts[address]?.pubKey;
    return b64 === undefined ? undefined : fromBase64(b64);
  }

  tokenPrice(): bigint {
    return this.state.params.tokenPrice;
  }

  balanceOf(address: string): bigint {
    return this.state.accounts[address]?.balance ?? 0n;
  }

  // --- mempool (CheckTx) ---

  broadcast(txBytes: Uint8Array): BroadcastAnswer {
    const hash = toHex(sha256(txBytes)).toUpperCase();
    if (this.cache.has(hash) || this.state.txs[hash]) return { inCache: true, hash };
    const checked = checkTx(this.state, txBytes, (acc) => this.checkSequences.get(acc.address) ?? acc.sequence);
    if (isFailure(checked)) return { inCache: false, hash, failure: checked };
    this.checkSequences.set(checked.signer, checked.sequence + 1);
    this.cache.add(hash);
    this.mempool.push({ hash, bytes: txBytes });
    return { inCache: false, hash };
  }

  findTx(hash: string): TxRecord | undefined {
    return this.state.txs[hash.toUpperCase()];
  }

  // --- blocks ---

  start(): void {
    if (this.timer || !this.config.autoBlocks) return;
    this.timer = setInterval(() => this.produceBlock(), this.config.blockTimeMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Produces `count` blocks now (the first one includes the mempool). */
  advance(count = 1): number {
    for (let i = 0; i < count; i++) this.produceBlock();
    return this.state.height;
  }

  /** Jumps to `height` in one block (the heights in between stay empty), e.g. to cross an epoch. */
  jumpTo(height: number): number {
    if (height <= this.state.height) throw new Error(`height ${height} is not above ${this.state.height}`);
    this.produceBlock(height);
    return this.state.height;
  }

  waitForHeight(height: number): Promise<void> {
    if (this.state.height >= height) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ height, resolve }));
  }

  produceBlock(height = this.state.height + 1): void {
    const time = new Date().toISOString();
    const included = this.faults.holdMempool ? [] : this.mempool;
    if (!this.faults.holdMempool) this.mempool = [];
    const epochIndex = this.epoch(height).epochIndex;
    const hashes: string[] = [];
    for (const [index, { hash, bytes }] of included.entries()) {
      const result = this.deliverTx(bytes, height, epochIndex);
      this.state.txs[hash] = { hash, height, index, tx: toBase64(bytes), result };
      hashes.push(hash);
    }
    // Once the mempool is drained, the committed sequences are the mempool's view again.
    if (!this.faults.holdMempool) this.checkSequences.clear();
    this.state.height = height;
    this.state.latestBlockTime = time;
    if (hashes.length > 0) this.state.blocks[height] = { time, txs: hashes };
    this.persist(hashes.length > 0);
    const ready = this.waiters.filter((w) => w.height <= height);
    this.waiters = this.waiters.filter((w) => w.height > height);
    for (const w of ready) w.resolve();
  }

  private persist(changed: boolean): void {
    if (!this.store) return;
    this.blocksSinceSave++;
    // A snapshot per block that changed state; empty blocks only move the height, so save them less often.
    if (changed || this.blocksSinceSave >= 10) {
      this.store.save(this.state);
      this.blocksSinceSave = 0;
    }
  }

  close(): void {
    this.stop();
    if (this.store) {
      this.store.save(this.state);
      this.store.close();
    }
    for (const w of this.waiters) w.resolve();
    this.waiters = [];
  }

  /** Block hash and app hash are derived deterministically; no consensus is simulated. */
  blockHash(height: number): string {
    return toHex(sha256(toUtf8(`${this.state.chainId}/block/${height}`))).toUpperCase();
  }

  appHash(): string {
    return toHex(sha256(toUtf8(`${this.state.chainId}/app/${this.state.height}/${Object.keys(this.state.txs).length}`))).toUpperCase();
  }

  // --- DeliverTx ---

  private deliverTx(bytes: Uint8Array, height: number, epochIndex: number): TxResult {
    const checked = checkTx(this.state, bytes);
    if (isFailure(checked)) return failed(checked, 0n, 0n);
    const account = this.state.accounts[checked.signer]!;
    account.balance -= checked.fee;
    account.sequence += 1;
    account.pubKey ??= toBase64(checked.pubKey);
    this.state.feesCollected += checked.fee;
    const base = standardEvents(checked, account.sequence - 1);

    const gasUsed = gasOf(checked);
    if (checked.gasLimit < gasUsed) {
      return failed(
        { code: SDK_CODES.outOfGas, codespace: 'sdk', log: `out of gas in location: devshard; gasWanted: ${checked.gasLimit}, gasUsed: ${gasUsed}: out of gas` },
        checked.gasLimit,
        checked.gasLimit,
        base,
      );
    }

    // Messages run on a copy of the mutable state; a failing message discards the copy.
    const work: ChainState = {
      ...this.state,
      accounts: structuredClone(this.state.accounts),
      escrows: structuredClone(this.state.escrows),
      escrowsPerEpoch: { ...this.state.escrowsPerEpoch },
    };
    const ctx = { state: work, height, epochIndex, slots: this.slots() };
    const events: TxEvent[] = [...base];
    const responses: MsgResult['response'][] = [];
    for (const [i, msg] of checked.msgs.entries()) {
      try {
        const r =
          msg.typeUrl === MsgCreateDevshardEscrowType.typeUrl
            ? createEscrow(ctx, msg.value, (id) => MsgCreateDevshardEscrowResponseType.encode({ escrowId: id }))
            : settleEscrow(ctx, msg.value);
        events.push({ type: 'message', attributes: [{ key: 'action', value: msg.typeUrl }, { key: 'sender', value: checked.signer }, { key: 'module', value: 'inference' }, { key: 'msg_index', value: String(i) }] });
        events.push(...r.events.map((e) => ({ ...e, attributes: [...e.attributes, { key: 'msg_index', value: String(i) }] })));
        responses.push(r.response);
      } catch (e) {
        if (!(e instanceof MsgFailure)) throw e;
        const log = `failed to execute message; message index: ${i}: ${e.message}`;
        return failed({ code: e.failure.code, codespace: e.codespace, log }, checked.gasLimit, gasUsed, base);
      }
    }
    this.state = { ...work, txs: this.state.txs, blocks: this.state.blocks };
    const data = TxMsgData.encode({ data: [], msgResponses: responses }).finish();
    return { code: 0, codespace: '', log: '', data: toBase64(data), gasWanted: String(checked.gasLimit), gasUsed: String(gasUsed), events };
  }
}

function gasOf(tx: CheckedTx): bigint {
  let gas = GAS.base;
  for (const m of tx.msgs) {
    gas += m.typeUrl === MsgCreateDevshardEscrowType.typeUrl ? GAS.create : GAS.settle + GAS.perSignature * BigInt(m.value.signatures.length);
  }
  return gas;
}

function standardEvents(tx: CheckedTx, sequence: number): TxEvent[] {
  return [
    { type: 'tx', attributes: [{ key: 'fee', value: tx.fee > 0n ? `${tx.fee}${DENOM}` : '' }, { key: 'fee_payer', value: tx.signer }] },
    { type: 'tx', attributes: [{ key: 'acc_seq', value: `${tx.signer}/${sequence}` }] },
  ];
}

function failed(f: TxFailure, gasWanted: bigint, gasUsed: bigint, events: TxEvent[] = []): TxResult {
  return { code: f.code, codespace: f.codespace, log: f.log, data: '', gasWanted: String(gasWanted), gasUsed: String(gasUsed), events };
}
