/**
 * The devnet chain: application state, mempool, block production and the queries the RPC and REST
 * routes answer. Also the in-process handle tests drive (advance / jump to a height, fault hooks)
 * and the DevnetChainView the simulated hosts read.
 */
import { sha256 } from '@cosmjs/crypto';
import { toBase64, toHex, toUtf8 } from '@cosmjs/encoding';
import { TxMsgData } from 'cosmjs-types/cosmos/base/abci/v1beta1/abci';
import type { BlockHeader, DevnetChainView, DevnetEscrowView, HostIdentity } from '../hosts/chain-view.js';
import { SDK_CODES } from '../../chain/devshard-errors.js';
import { MsgCreateDevshardEscrowResponseType, MsgCreateDevshardEscrowType } from '../../chain/messages.js';
import type { EscrowSlot } from '../../chain/port.js';
import { checkTx, isFailure } from './ante.js';
import type { BroadcastAnswer, DevnetFaults, StateStore } from './chain-types.js';
import type { DevnetConfig } from './config.js';
import { epochAt, type EpochPosition } from './epochs.js';
import { createEscrow, MsgFailure, settleEscrow, type MsgResult } from './escrow-handlers.js';
import { escrowView } from './escrow-view.js';
import { ensureAccount, type ChainState, type TxEvent, type TxRecord, type TxResult } from './state.js';
import { failed, gasOf, standardEvents } from './tx-results.js';

// Importers keep taking these from chain.js.
export type { BroadcastAnswer, DevnetFaults, StateStore } from './chain-types.js';

export class DevnetChain implements DevnetChainView {
  /** Origin of the devnet server (`http://127.0.0.1:PORT`), known once it listens. */
  baseUrl = '';
  readonly faults: DevnetFaults = { rpcDown: false, holdMempool: false, dropBroadcastResponse: false, lateArrivalMs: 0 };
  /** A participant's inference_url when it differs from its mount (a host that moved; tests set it). */
  readonly participantUrls: Record<string, string> = {};
  private mempool: { hash: string; bytes: Uint8Array }[] = [];
  /** Mempool cache (CometBFT keeps accepted tx hashes to refuse duplicates). */
  private readonly cache = new Set<string>();
  /** Sequences as the mempool sees them: committed + txs already accepted this block. */
  private readonly checkSequences = new Map<string, number>();
  /** Unordered replay keys of txs in the mempool (committed ones are in the state). */
  private readonly pendingUnordered = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private waiters: { height: number; resolve: () => void }[] = [];
  private blocksSinceSave = 0;
  /** A snapshot write failed (disk full, I/O): the next block writes one again, changed or not. */
  private saveDue = false;
  private readonly reportedKinds = new Set<string>();
  /**
   * Where a failure of the block timer or of a snapshot write goes (once per kind, see reportError);
   * the composition root points it at its logger. Such a failure never ends the process: the
   * chain keeps producing blocks in memory and writes the snapshot again at the next block.
   */
  onError: (message: string, kind: string, error: unknown) => void = (message, kind, error) =>
    process.emitWarning(`${message} [${kind}]: ${(error as Error)?.message ?? String(error)}`, 'DevnetWarning');

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

  /**
   * The slots every escrow is given: the simulated hosts first (slot i = host i, mounted under
   * /hosts/i), then the external hosts (DEVNET_EXTERNAL_HOSTS) in the order given.
   */
  slots(): EscrowSlot[] {
    const n = this.hosts.length;
    return [
      ...this.hosts.map((h) => ({ slotId: h.index, host: h.address, url: `${this.baseUrl}${h.prefix}` })),
      ...this.config.externalHosts.map((h, i) => ({ slotId: n + i, host: h.address, url: h.url })),
    ];
  }

  /**
   * The participants (every host, simulated or external) with their inference_url: a simulated
   * host's mount, an external host's given URL, or what a test moved it to (`participantUrls`).
   */
  participants(): { address: string; url: string }[] {
    return [
      ...this.hosts.map((h) => ({ address: h.address, url: this.participantUrls[h.address] ?? `${this.baseUrl}${h.prefix}` })),
      ...this.config.externalHosts.map((h) => ({ address: h.address, url: this.participantUrls[h.address] ?? h.url })),
    ];
  }

  // --- DevnetChainView (read by the simulated hosts) ---

  escrow(id: string): DevnetEscrowView | undefined {
    const e = this.state.escrows[id];
    return e ? escrowView(e) : undefined;
  }

  /** The chain params a host freezes into a session at bind (vote factor, timeouts, validation rate). */
  sessionBindParams() {
    const p = this.state.params;
    return { refusalTimeout: p.refusalTimeout, executionTimeout: p.executionTimeout, validationRate: p.validationRate, voteThresholdFactor: p.voteThresholdFactor };
  }

  tokenPrice(): bigint {
    return this.state.params.tokenPrice;
  }

  /** The latest block as the hosts' block oracle sees it (its hash is `blockHash`, 32 bytes). */
  latestBlock(): BlockHeader {
    return this.blockAt(BigInt(this.state.height))!;
  }

  blockAt(height: bigint): BlockHeader | undefined {
    if (height < 1n || height > BigInt(this.state.height)) return undefined;
    return { chainId: this.state.chainId, height, hash: new Uint8Array(Buffer.from(this.blockHash(Number(height)), 'hex')) };
  }

  balanceOf(address: string): bigint {
    return this.state.accounts[address]?.balance ?? 0n;
  }

  // --- mempool (CheckTx) ---

  broadcast(txBytes: Uint8Array): BroadcastAnswer {
    const hash = toHex(sha256(txBytes)).toUpperCase();
    if (this.cache.has(hash) || this.state.txs[hash]) return { inCache: true, hash };
    // CheckTx runs against the last block; the devnet's blocks are timed by the wall clock.
    const late = this.faults.lateArrivalMs;
    this.faults.lateArrivalMs = 0;
    const checked = checkTx(this.state, txBytes, {
      expectedSequence: (acc) => this.checkSequences.get(acc.address) ?? acc.sequence,
      blockTimeMs: Date.now() + late,
      usedUnordered: (key) => this.pendingUnordered.has(key) || this.state.unorderedNonces?.[key] !== undefined,
    });
    if (isFailure(checked)) return { inCache: false, hash, failure: checked };
    if (checked.unordered) this.pendingUnordered.add(checked.unordered.key);
    else this.checkSequences.set(checked.signer, checked.sequence + 1);
    this.cache.add(hash);
    this.mempool.push({ hash, bytes: txBytes });
    return { inCache: false, hash };
  }

  /** Txs accepted and waiting for the next block (a test advances once its tx is in). */
  get mempoolSize(): number {
    return this.mempool.length;
  }

  findTx(hash: string): TxRecord | undefined {
    return this.state.txs[hash.toUpperCase()];
  }

  // --- blocks ---

  start(): void {
    if (this.timer || !this.config.autoBlocks) return;
    this.timer = setInterval(() => {
      try {
        this.produceBlock();
      } catch (error) {
        this.reportError('devnet_block_failed', error);
      }
    }, this.config.blockTimeMs);
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
    const now = new Date();
    const time = now.toISOString();
    const included = this.faults.holdMempool ? [] : this.mempool;
    if (!this.faults.holdMempool) this.mempool = [];
    const epochIndex = this.epoch(height).epochIndex;
    if (this.config.pruneUnsettled) this.pruneUnsettled(epochIndex);
    // PreBlock (x/auth): unordered replay keys whose timeout passed are forgotten.
    const nonces = (this.state.unorderedNonces ??= {});
    for (const [key, timeoutMs] of Object.entries(nonces)) if (timeoutMs < now.getTime()) delete nonces[key];
    // BeginBlock (x/authz): grants whose expiration has passed are deleted.
    const grants = this.state.authzGrants ?? [];
    if (grants.some((g) => g.expiration !== undefined && Date.parse(g.expiration) <= now.getTime())) {
      this.state.authzGrants = grants.filter((g) => g.expiration === undefined || Date.parse(g.expiration) > now.getTime());
    }
    const hashes: string[] = [];
    for (const [index, { hash, bytes }] of included.entries()) {
      const result = this.deliverTx(bytes, height, epochIndex, now.getTime());
      this.state.txs[hash] = { hash, height, index, tx: toBase64(bytes), result };
      hashes.push(hash);
    }
    // Once the mempool is drained, the committed sequences are the mempool's view again.
    if (!this.faults.holdMempool) {
      this.checkSequences.clear();
      this.pendingUnordered.clear();
    }
    this.state.height = height;
    this.state.latestBlockTime = time;
    if (hashes.length > 0) this.state.blocks[height] = { time, txs: hashes };
    this.persist(hashes.length > 0);
    const ready = this.waiters.filter((w) => w.height <= height);
    this.waiters = this.waiters.filter((w) => w.height > height);
    for (const w of ready) w.resolve();
  }

  /**
   * k/devshard_pruning.go: once the epoch is ≥ an unsettled escrow's epoch + 2 (the settle window,
   * its epoch and the next, has closed), the escrow is deleted and its deposit split equally per
   * unique slot address, in slot order (the integer remainder stays with the module); at most 100
   * per block. What not settling costs the creator: the whole deposit.
   */
  private pruneUnsettled(epochIndex: number): void {
    let pruned = 0;
    for (const [id, e] of Object.entries(this.state.escrows)) {
      if (pruned >= 100) break;
      if (e.settled || epochIndex < e.epochIndex + 2) continue;
      const unique = [...new Set(e.slots.map((s) => s.host))];
      const share = unique.length > 0 ? e.amount / BigInt(unique.length) : 0n;
      if (share > 0n) for (const address of unique) ensureAccount(this.state, address).balance += share;
      delete this.state.escrows[id];
      pruned++;
    }
  }

  private persist(changed: boolean): void {
    if (!this.store) return;
    this.blocksSinceSave++;
    // A snapshot per block that changed state; empty blocks only move the height, so save them less often.
    if (changed || this.saveDue || this.blocksSinceSave >= 10) this.save();
  }

  /** Writes the snapshot; a failure is reported (once per kind) and retried at the next block. */
  private save(): void {
    try {
      this.store!.save(this.state);
      this.blocksSinceSave = 0;
      this.saveDue = false;
    } catch (error) {
      this.saveDue = true;
      this.reportError('devnet_state_save_failed', error);
    }
  }

  /** Reports a failure once per message and kind (an error's `code`, e.g. SQLITE_FULL, or its name). */
  private reportError(message: string, error: unknown): void {
    const e = error as { code?: unknown; name?: unknown } | undefined;
    const kind = typeof e?.code === 'string' ? e.code : typeof e?.name === 'string' ? e.name : 'unknown';
    if (this.reportedKinds.has(`${message}/${kind}`)) return;
    this.reportedKinds.add(`${message}/${kind}`);
    try {
      this.onError(message, kind, error);
    } catch {
      // a reporter that throws must not end the block timer either
    }
  }

  close(): void {
    this.stop();
    if (this.store) {
      this.save();
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

  private deliverTx(bytes: Uint8Array, height: number, epochIndex: number, blockTimeMs: number): TxResult {
    const nonces = (this.state.unorderedNonces ??= {});
    const checked = checkTx(this.state, bytes, { blockTimeMs, usedUnordered: (key) => nonces[key] !== undefined });
    if (isFailure(checked)) return failed(checked, 0n, 0n);
    const account = this.state.accounts[checked.signer]!;
    account.balance -= checked.fee;
    // An unordered tx leaves the sequence alone (x/auth IncrementSequenceDecorator skips it).
    if (checked.unordered) nonces[checked.unordered.key] = checked.unordered.timeoutMs;
    else account.sequence += 1;
    account.pubKey ??= toBase64(checked.pubKey);
    this.state.feesCollected += checked.fee;
    const base = standardEvents(checked, account.sequence - (checked.unordered ? 0 : 1));

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
    const ctx = { state: work, height, epochIndex, slots: this.slots(), appHash: this.appHash().toLowerCase() };
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
        return failed({ code: e.code, codespace: e.codespace, log }, checked.gasLimit, gasUsed, base);
      }
    }
    this.state = { ...work, txs: this.state.txs, blocks: this.state.blocks };
    const data = TxMsgData.encode({ data: [], msgResponses: responses }).finish();
    return { code: 0, codespace: '', log: '', data: toBase64(data), gasWanted: String(checked.gasLimit), gasUsed: String(gasUsed), events };
  }
}
