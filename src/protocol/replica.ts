/**
 * A pure replica of the devshard host state machine (gonka 8a35022 devshard/state/machine.go
 * `NewStateMachine`, `ApplyDiff`, `applyCore`, `ApplyLocal`, `ApplyLocalBestEffort`): the same
 * diffs give the same state and, byte for byte, the same roots the hosts compute. No I/O, no
 * clock, no storage; warm-key authorisations come in through a resolver given to each apply.
 *
 * Under the v5 rule set (zpoken/gonka@86cff503 state/machine.go, state/heightsync.go) a diff also
 * passes the log plane before its txs apply (log-plane.ts), and each applied diff is folded into
 * the height floor and the heartbeat turns (floor.ts, height-turns.ts).
 */
import { DevshardError, refuse } from './errors.js';
import type { DevshardTx } from './gen/devshard/v1/diff_pb.js';
import { HeightFloor, type FloorPoint } from './floor.js';
import { heightSyncHash } from './height-sync-flags.js';
import { HeightTurns } from './height-turns.js';
import { hostStatsHash, Phase, restHashV2, restHashV5, stateRoot, warmKeysHash, type HostStats } from './hashes.js';
import type { InferenceRecord } from './inference-record.js';
import { logPlaneRefusal, type LogPlaneView } from './log-plane.js';
import { diffSignedBytes } from './preimages.js';
import { normalizeSessionConfig, type SessionConfig } from './session-config.js';
import { SessionState } from './session-state.js';
import { recoverAddress, RecoverError } from './signatures.js';
import { logResidentHeight, type Stamp } from './stamps.js';
import { applyTx } from './tx-rules.js';
import type { RuleSet } from './versions.js';
import { bytesEqual, toHex } from './bytes.js';
import { floorClaims, newBindings, safe } from './replica-helpers.js';
import { finishNonce, precheckDiff, ruleContext } from './replica-steps.js';
import { LiveHash } from './live-hash.js';
import type { ApplyOptions, ApplyResult, BestEffortResult, Diff, HeightSyncView, ReplicaParams, WarmKeyResolver } from './replica-types.js';

export type * from './replica-types.js';

/** The state-root tag of devshard v2 (`types.EffectiveStateRootAndProtocolVersion`). */
export const STATE_ROOT_VERSION = 'v2';

export class Replica {
  private readonly state: SessionState;
  private readonly addressSlots = new Map<string, number[]>();
  readonly rules: RuleSet;
  /** v5: the heartbeat turns and the height floor folded from the applied diffs (undefined under v2). */
  private readonly turns: HeightTurns | undefined;
  private floorIndex: HeightFloor | undefined;
  private statsHashCache: { version: number; hash: Uint8Array } | undefined;
  /** The live hash's cache: ids hashed in order, sha256 states after marks[i].n of them, the last digest. */
  private readonly live = new LiveHash();

  private constructor(
    readonly params: Readonly<ReplicaParams>,
    readonly config: SessionConfig,
  ) {
    const fee = config.createDevshardFee;
    if (params.amount < fee) throw refuse('InsufficientBalance', `create devshard fee ${fee} exceeds escrow amount ${params.amount}`);
    this.rules = params.rules ?? 'v2';
    const tag = params.version ?? (this.rules === 'v2' ? STATE_ROOT_VERSION : this.rules);
    this.state = new SessionState(params.escrowId, tag, config, [...params.slots], params.amount - fee, fee);
    if (this.rules === 'v5') {
      this.turns = new HeightTurns(params.slots.length);
      this.floorIndex = new HeightFloor();
    }
    params.slots.forEach((addr, slot) => this.addressSlots.set(addr, [...(this.addressSlots.get(addr) ?? []), slot]));
  }

  /** `NewStateMachine`: normalises the config, charges the create fee (refused when the amount is short). */
  static create(params: ReplicaParams): Replica {
    if (params.slots.length === 0) throw new RangeError('a session needs at least one slot');
    return new Replica(params, normalizeSessionConfig(params.config, params.slots.length));
  }

  // ---- reading -------------------------------------------------------------------------------

  get escrowId(): string {
    return this.state.escrowId;
  }
  get version(): string {
    return this.state.version;
  }
  get slots(): readonly string[] {
    return this.state.slots;
  }
  get latestNonce(): bigint {
    return this.state.latestNonce;
  }
  get finalizeNonce(): bigint {
    return this.state.finalizeNonce;
  }
  get phase(): Phase {
    return this.state.phase;
  }
  get balance(): bigint {
    return this.state.balance;
  }
  get fees(): bigint {
    return this.state.fees;
  }
  /** The sealed accumulator, or undefined before the first seal. */
  get sealedAcc(): Uint8Array | undefined {
    return this.state.sealedAny ? this.state.sealedAcc : undefined;
  }
  get warmKeys(): ReadonlyMap<number, string> {
    return this.state.warmKeys;
  }
  hostStats(): Array<{ slotId: number } & HostStats> {
    return this.state.hostStats.map((s, slotId) => ({ slotId, ...s }));
  }
  /** Live records in ascending id order. */
  liveRecords(): InferenceRecord[] {
    return [...this.state.liveRecords()];
  }
  inference(id: bigint): InferenceRecord | undefined {
    return this.state.getLive(id);
  }
  isSealed(id: bigint): boolean {
    return this.state.isSealed(id);
  }
  /** Slots per address: the weight of an address in votes and quorum. */
  slotsOf(address: string): readonly number[] {
    return this.addressSlots.get(address) ?? [];
  }

  hostStatsHash(): Uint8Array {
    const c = this.statsHashCache;
    if (c && c.version === this.state.statsVersion) return c.hash;
    const hash = hostStatsHash(this.hostStats());
    this.statsHashCache = { version: this.state.statsVersion, hash };
    return hash;
  }

  /** `ComputeRestHashV2` of the current state (v5: with the height-sync flags' hash). */
  restHash(): Uint8Array {
    const st = this.state;
    if (this.rules === 'v2') return restHashV2(st.balance, st.sealedAcc, this.liveHash(), warmKeysHash(st.warmKeys));
    return restHashV5(st.balance, st.sealedAcc, this.liveHash(), warmKeysHash(st.warmKeys), heightSyncHash(st.heightSync));
  }

  // ---- v5 height sync ------------------------------------------------------------------------

  /** The height-sync flags and the log-derived heights (all zero under v2). */
  heightSync(): HeightSyncView {
    return { ...this.state.heightSync, lastCompletedHeight: this.turns?.lastCompletedHeight ?? 0n, latestTurnStart: this.turns?.latestTurnStart ?? 0n };
  }

  /** The heartbeat turns folded from the log (v5; undefined under v2). */
  get heightTurns(): Readonly<HeightTurns> | undefined {
    return this.turns;
  }

  /** F(m): the floor a stamp produced at nonce m must reach (v5; height 0 under v2 and before any host stamp). */
  floorAt(m: bigint): FloorPoint {
    return this.floorIndex?.asOf(m) ?? { height: 0n, hash: new Uint8Array(0), author: 0, nonce: 0n, known: true };
  }

  /** F(next nonce): the floor the next diff's own stamps are judged at. */
  floor(): FloorPoint {
    return this.floorAt(this.state.latestNonce + 1n);
  }

  /**
   * The stamp the user may put on its own Start or Heartbeat at `nonce` (default the next): exactly
   * F(nonce) with its hash, or none while there is no floor. Anything above F is unbacked (Z5 marks
   * it), anything below is refused by L0; leaving it absent is always allowed.
   */
  referenceStamp(nonce: bigint = this.state.latestNonce + 1n): Stamp | undefined {
    const f = this.floorAt(nonce);
    return f.known && f.height > 0n && f.hash.length > 0 ? { height: f.height, hash: f.hash } : undefined;
  }

  /** Whether `nonce` falls inside the forced turn the state records (`HeightSyncForcedTurnActive`). */
  forcedTurnActive(nonce: bigint): boolean {
    const f = this.state.heightSync;
    return f.forcedEnd !== 0n && nonce >= f.forcedStart && nonce <= f.forcedEnd;
  }

  /**
   * Whether hosts would refuse a diff carrying `txs` at `nonce` (default the next) on the log plane
   * (L1, L2, L3, L0, L0b): the refusal, or undefined. Under v2 there is no log plane. The gateway
   * runs a host's tx through this before compose and drops it when refused: a host stamp below
   * F(m) can never enter a diff, and would otherwise cost the whole diff.
   */
  logPlaneRefusal(txs: readonly DevshardTx[], opts: { nonce?: bigint; warmKeys?: WarmKeyResolver } = {}): DevshardError | undefined {
    if (this.rules === 'v2') return undefined;
    return logPlaneRefusal(opts.nonce ?? this.state.latestNonce + 1n, txs, this.logPlaneView(opts.warmKeys));
  }

  /** `logPlaneRefusal` of one tx alone: would its stamp (or, for an ack, its framing, signature or cause) be refused? */
  stampRefusal(tx: DevshardTx, opts: { nonce?: bigint; warmKeys?: WarmKeyResolver } = {}): DevshardError | undefined {
    return this.logPlaneRefusal([tx], opts);
  }

  private logPlaneView(resolver: WarmKeyResolver | undefined): LogPlaneView {
    return {
      slots: this.state.slots,
      warmKeys: this.state.warmKeys,
      acceptWarm: (recovered, cold) => resolver !== undefined && safe(() => resolver(recovered, cold)),
      turns: this.turns!,
      floor: this.floorIndex!,
    };
  }

  /** `liveHash` over the live entries, incrementally (live-hash.ts). */
  private liveHash(): Uint8Array {
    return this.live.of(this.state);
  }

  /** The root with the current phase byte: a diff's post_state_root, a receipt's state_hash. */
  stateRoot(): Uint8Array {
    return stateRoot(this.hostStatsHash(), this.state.fees, this.restHash(), this.state.version, this.state.phase);
  }

  /** The root the chain recomputes at settlement (phase byte 0x02). */
  settlementRoot(): Uint8Array {
    return stateRoot(this.hostStatsHash(), this.state.fees, this.restHash(), this.state.version, Phase.Settlement);
  }

  // ---- applying ------------------------------------------------------------------------------

  /**
   * `ApplyDiff` (host side): the user's signature over DiffContent{nonce, txs, escrow_id,
   * post_state_root} is checked first (before the nonce), then the diff is applied atomically and,
   * when post_state_root is not empty, compared with the computed root. Throws DevshardError and
   * leaves the state unchanged on any refusal.
   */
  applyDiff(diff: Diff, opts: ApplyOptions = {}): ApplyResult {
    if (opts.checkUserSig !== false) this.checkUserSig(diff);
    return this.applyCore(diff.nonce, diff.txs, diff.postStateRoot, opts);
  }

  private checkUserSig(diff: Diff): void {
    const signed = diffSignedBytes(this.state.escrowId, diff.nonce, diff.txs, diff.postStateRoot);
    let recovered: string;
    try {
      recovered = recoverAddress(signed, diff.userSig);
    } catch (e) {
      if (e instanceof RecoverError) throw refuse('InvalidUserSig', e.message);
      throw e;
    }
    if (recovered !== this.params.userAddress) throw refuse('InvalidUserSig', `expected ${this.params.userAddress}, got ${recovered}`);
  }

  /** `ApplyLocal` (user side): no signature, no root comparison; the root to sign. */
  applyLocal(nonce: bigint, txs: readonly DevshardTx[], opts: ApplyOptions = {}): ApplyResult {
    return this.applyCore(nonce, txs, new Uint8Array(0), opts);
  }

  /** `applyCore`, after the user signature. */
  private applyCore(nonce: bigint, txs: readonly DevshardTx[], postStateRoot: Uint8Array, opts: ApplyOptions): ApplyResult {
    precheckDiff(this.state, this.rules, nonce, txs);
    if (this.rules === 'v5') {
      const refusal = logPlaneRefusal(nonce, txs, this.logPlaneView(opts.warmKeys));
      if (refusal) throw refusal;
    }
    const st = this.state;
    const snap = st.begin();
    const heights = this.markHeights();
    const ctx = ruleContext(this.state, this.rules, this.addressSlots, nonce, opts);
    try {
      for (const tx of txs) applyTx(ctx, tx);
      this.observeHeights(nonce, txs);
      const sealedRecords = finishNonce(this.state, this.rules, nonce);
      const sealed = sealedRecords.map((r) => r.id);
      const root = this.stateRoot();
      if (postStateRoot.length > 0 && !bytesEqual(root, postStateRoot)) {
        throw refuse('PostStateRootMismatch', `diff ${toHex(postStateRoot)}, computed ${toHex(root)}`);
      }
      const warmKeyBindings = newBindings(snap.warmKeys, st.warmKeys);
      st.commit();
      return { root, warmKeyBindings, sealed, sealedRecords };
    } catch (e) {
      st.rollback(snap);
      this.restoreHeights(heights);
      throw e;
    }
  }

  /**
   * `ApplyLocalBestEffort` (user side, composing a diff): txs that are refused are skipped; a
   * refused MsgStartInference aborts the whole nonce (`mandatory start inference: …`). A warm key
   * bound while checking a tx that was then refused stays bound, as in Go (MACHINE.md rule 10).
   *
   * v5 (`localBestEffortLocked`): once Finalizing, heartbeats and acks are skipped; every other tx
   * must keep the log plane clean together with the txs already taken, else it is skipped (a Start
   * refused there aborts the nonce with the log plane's own text); when the log plane refused
   * something and nothing was taken, the nonce is not used and that refusal is thrown.
   */
  applyLocalBestEffort(nonce: bigint, txs: readonly DevshardTx[], opts: ApplyOptions = {}): BestEffortResult {
    precheckDiff(this.state, this.rules, nonce, txs);
    const st = this.state;
    const snap = st.begin();
    const heights = this.markHeights();
    const ctx = ruleContext(this.state, this.rules, this.addressSlots, nonce, opts);
    const applied: DevshardTx[] = [];
    const skipped: BestEffortResult['skipped'] = [];
    let logPlaneError: DevshardError | undefined;
    try {
      for (const tx of txs) {
        if (this.rules === 'v5') {
          if (st.phase === Phase.Finalizing && (tx.tx.case === 'heartbeat' || tx.tx.case === 'heightAck')) {
            skipped.push({ tx, error: refuse('SessionFinalizing') });
            continue;
          }
          const refusal = logPlaneRefusal(nonce, [...applied, tx], this.logPlaneView(opts.warmKeys));
          if (refusal) {
            if (tx.tx.case === 'startInference') throw refusal;
            logPlaneError = refusal;
            skipped.push({ tx, error: refusal });
            continue;
          }
        }
        try {
          applyTx(ctx, tx);
          applied.push(tx);
        } catch (e) {
          if (!(e instanceof DevshardError)) throw e;
          if (tx.tx.case === 'startInference') throw e.wrap('mandatory start inference');
          skipped.push({ tx, error: e });
        }
      }
      if (applied.length === 0 && logPlaneError) throw logPlaneError;
      this.observeHeights(nonce, applied);
      const sealedRecords = finishNonce(this.state, this.rules, nonce);
      const root = this.stateRoot();
      const warmKeyBindings = newBindings(snap.warmKeys, st.warmKeys);
      st.commit();
      return { root, warmKeyBindings, sealed: sealedRecords.map((r) => r.id), sealedRecords, applied, skipped };
    } catch (e) {
      st.rollback(snap);
      this.restoreHeights(heights);
      throw e;
    }
  }

  /** v5: what a refused diff must put back (the turns' mark and the floor, which is replaced, never changed). */
  private markHeights(): { turns: ReturnType<HeightTurns['mark']>; floor: HeightFloor } | undefined {
    return this.turns && this.floorIndex ? { turns: this.turns.mark(), floor: this.floorIndex } : undefined;
  }

  private restoreHeights(m: ReturnType<Replica['markHeights']>): void {
    if (!m) return;
    this.turns!.restore(m.turns);
    this.floorIndex = m.floor;
  }

  /**
   * `observeHeightSyncLocked`: the applied txs feed the turns at the log's own height, and their
   * host-signed stamps may raise the floor. Each stamp is attributed to its signer: an ack's slot,
   * a finish's executor slot, a confirm's executor of record, the user (which never raises F) for
   * a Start or a heartbeat.
   */
  private observeHeights(nonce: bigint, txs: readonly DevshardTx[]): void {
    if (!this.turns || !this.floorIndex) return;
    this.turns.observe(nonce, txs, logResidentHeight(txs, this.turns.lastCompletedHeight));
    this.floorIndex = this.floorIndex.observed(nonce, floorClaims(txs, (id) => this.state.getLive(id)?.executorSlot));
  }
}
