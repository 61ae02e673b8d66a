/**
 * A pure replica of the devshard host state machine (gonka 8a35022 devshard/state/machine.go
 * `NewStateMachine`, `ApplyDiff`, `applyCore`, `ApplyLocal`, `ApplyLocalBestEffort`): the same
 * diffs give the same state and, byte for byte, the same roots the hosts compute. No I/O, no
 * clock, no storage; warm-key authorisations come in through a resolver given to each apply.
 */
import { DevshardError, refuse } from './errors.js';
import type { DevshardTx } from './gen/devshard/v1/diff_pb.js';
import { createHash, type Hash } from 'node:crypto';
import { hostStatsHash, Phase, restHashV2, stateRoot, warmKeysHash, type HostStats } from './hashes.js';
import { inferenceEntry, type InferenceRecord } from './inference-record.js';
import { diffSignedBytes } from './preimages.js';
import { autoSeal, drainLive, shouldAutoSealAtNonce } from './seal.js';
import { normalizeSessionConfig, type SessionConfig } from './session-config.js';
import { SessionState } from './session-state.js';
import { recoverAddress, RecoverError } from './signatures.js';
import { applyTx, type RuleContext } from './tx-rules.js';
import { bytesEqual, toHex, varint } from './bytes.js';

/** Entries between the kept sha256 states of the live hash. */
const LIVE_HASH_MARK = 32;
const LIVE_TAG = Uint8Array.of(0x0a);

/** The state-root tag of devshard v2 (`types.EffectiveStateRootAndProtocolVersion`). */
export const STATE_ROOT_VERSION = 'v2';

/** Is `warm` authorised (authz grant for MsgStartInference) to sign for `cold`? (`WarmKeyResolver`) */
export type WarmKeyResolver = (warm: string, cold: string) => boolean;

/** A binding made while applying a diff: record it with the diff so a replay needs no chain. */
export interface WarmKeyBinding {
  slot: number;
  warm: string;
}

/** What the session is bound to: the escrow and the chain params, frozen at bind. */
export interface ReplicaParams {
  escrowId: string;
  /** Slot id → cold address (the escrow's `slots`, in order). */
  slots: readonly string[];
  /** The escrow amount; the create fee is taken from it. */
  amount: bigint;
  /** The escrow creator, who signs every diff. */
  userAddress: string;
  /** Config as given (normalised here, as at bind). */
  config: SessionConfig;
  /** The state-root tag, "v2" unless a test says otherwise. */
  version?: string;
}

/** A diff as the hosts receive it. */
export interface Diff {
  nonce: bigint;
  txs: readonly DevshardTx[];
  userSig: Uint8Array;
  /** Empty: not compared. */
  postStateRoot: Uint8Array;
}

export interface ApplyOptions {
  /** Answers warm-key questions (none: warm keys are refused unless already bound). */
  warmKeys?: WarmKeyResolver;
  /**
   * applyDiff only: check the user's signature (default true). Replaying our own recorded diffs
   * may skip it; the root comparison still runs.
   */
  checkUserSig?: boolean;
}

export interface ApplyResult {
  root: Uint8Array;
  /** Warm keys this diff bound (record them with the diff). */
  warmKeyBindings: WarmKeyBinding[];
  /** Ids this diff sealed (auto-seal or settlement drain), ascending. */
  sealed: bigint[];
  /** The records as they were sealed (they leave the live set; keep them for observability). */
  sealedRecords: InferenceRecord[];
}

export interface BestEffortResult extends ApplyResult {
  applied: DevshardTx[];
  skipped: Array<{ tx: DevshardTx; error: DevshardError }>;
}

export class Replica {
  private readonly state: SessionState;
  private readonly addressSlots = new Map<string, number[]>();
  private statsHashCache: { version: number; hash: Uint8Array } | undefined;
  /** The live hash's cache: ids hashed in order, sha256 states after marks[i].n of them, the last digest. */
  private liveCache: { ids: bigint[]; marks: { n: number; hash: Hash }[]; digest: Uint8Array } | undefined;

  private constructor(
    readonly params: Readonly<ReplicaParams>,
    readonly config: SessionConfig,
  ) {
    const fee = config.createDevshardFee;
    if (params.amount < fee) throw refuse('InsufficientBalance', `create devshard fee ${fee} exceeds escrow amount ${params.amount}`);
    this.state = new SessionState(params.escrowId, params.version ?? STATE_ROOT_VERSION, config, [...params.slots], params.amount - fee, fee);
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

  /** `ComputeRestHashV2` of the current state. */
  restHash(): Uint8Array {
    const st = this.state;
    return restHashV2(st.balance, st.sealedAcc, this.liveHash(), warmKeysHash(st.warmKeys));
  }

  /**
   * `liveHash` over the live entries, incrementally: the sha256 state is kept every
   * LIVE_HASH_MARK entries, and only the entries from the lowest id changed since the last call
   * are hashed again (in a session they are the recent ones; a seal removes the oldest, and the
   * next call hashes everything once).
   */
  private liveHash(): Uint8Array {
    const dirty = this.state.takeDirty();
    let c = this.liveCache;
    if (c !== undefined && dirty === undefined) return c.digest;
    if (c === undefined) c = this.liveCache = { ids: [], marks: [{ n: 0, hash: createHash('sha256') }], digest: new Uint8Array(0) };
    const { ids, marks } = c;
    let keep = ids.length;
    if (dirty !== undefined) {
      // The first cached id >= dirty.
      let lo = 0;
      let hi = ids.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (ids[mid]! < dirty) lo = mid + 1;
        else hi = mid;
      }
      keep = lo;
    }
    while (marks[marks.length - 1]!.n > keep) marks.pop();
    const mark = marks[marks.length - 1]!;
    ids.length = mark.n;
    const h = mark.hash.copy();
    const parts: Uint8Array[] = [];
    for (const r of this.state.liveAfter(mark.n > 0 ? ids[mark.n - 1]! : -1n)) {
      const e = inferenceEntry(r);
      parts.push(LIVE_TAG, varint(e.length), e);
      ids.push(r.id);
      if (ids.length % LIVE_HASH_MARK === 0) {
        h.update(Buffer.concat(parts));
        parts.length = 0;
        marks.push({ n: ids.length, hash: h.copy() });
      }
    }
    if (parts.length > 0) h.update(Buffer.concat(parts));
    c.digest = new Uint8Array(h.digest());
    return c.digest;
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
    this.precheck(nonce, txs);
    const st = this.state;
    const snap = st.begin();
    const ctx = this.context(opts.warmKeys);
    try {
      for (const tx of txs) applyTx(ctx, tx);
      const sealedRecords = this.finishNonce(nonce);
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
      throw e;
    }
  }

  /**
   * `ApplyLocalBestEffort` (user side, composing a diff): txs that are refused are skipped; a
   * refused MsgStartInference aborts the whole nonce (`mandatory start inference: …`). A warm key
   * bound while checking a tx that was then refused stays bound, as in Go (MACHINE.md rule 10).
   */
  applyLocalBestEffort(nonce: bigint, txs: readonly DevshardTx[], opts: ApplyOptions = {}): BestEffortResult {
    this.precheck(nonce, txs);
    const st = this.state;
    const snap = st.begin();
    const ctx = this.context(opts.warmKeys);
    const applied: DevshardTx[] = [];
    const skipped: BestEffortResult['skipped'] = [];
    try {
      for (const tx of txs) {
        try {
          applyTx(ctx, tx);
          applied.push(tx);
        } catch (e) {
          if (!(e instanceof DevshardError)) throw e;
          if (tx.tx.case === 'startInference') throw e.wrap('mandatory start inference');
          skipped.push({ tx, error: e });
        }
      }
      const sealedRecords = this.finishNonce(nonce);
      const root = this.stateRoot();
      const warmKeyBindings = newBindings(snap.warmKeys, st.warmKeys);
      st.commit();
      return { root, warmKeyBindings, sealed: sealedRecords.map((r) => r.id), sealedRecords, applied, skipped };
    } catch (e) {
      st.rollback(snap);
      throw e;
    }
  }

  /** Steps 1–2 of `applyCore`: contiguous nonce; at most one start, and its id is the nonce. */
  private precheck(nonce: bigint, txs: readonly DevshardTx[]): void {
    const expected = this.state.latestNonce + 1n;
    if (nonce !== expected) throw refuse('InvalidNonce', `expected ${expected}, got ${nonce}`);
    let starts = 0;
    for (const tx of txs) {
      if (tx.tx.case === 'startInference') {
        starts++;
        if (tx.tx.value.inferenceId !== nonce) throw refuse('InvalidInferenceID');
      }
    }
    if (starts > 1) throw refuse('MultipleStartMsgs');
  }

  /**
   * Steps 5–6b: the per-nonce fee while still Active (the finalize diff is free), the nonce, the
   * Finalizing → Settlement deadline (FinalizeNonce + N) with the drain, the auto-seal.
   */
  private finishNonce(nonce: bigint): InferenceRecord[] {
    const st = this.state;
    if (st.phase === Phase.Active) {
      if (st.balance < st.config.feePerNonce) throw refuse('InsufficientBalance');
      st.balance -= st.config.feePerNonce;
      st.fees += st.config.feePerNonce;
    }
    st.latestNonce = nonce;
    if (st.phase === Phase.Finalizing && st.finalizeNonce === 0n) st.finalizeNonce = nonce;
    if (st.phase === Phase.Finalizing && st.latestNonce >= st.finalizeNonce + BigInt(st.slots.length)) {
      st.phase = Phase.Settlement;
      return drainLive(st, st.latestNonce);
    }
    if (st.phase === Phase.Active && shouldAutoSealAtNonce(st.config.autoSealEveryNNonces, nonce)) return autoSeal(st, nonce);
    return [];
  }

  private context(resolver: WarmKeyResolver | undefined): RuleContext {
    const st = this.state;
    return {
      state: st,
      addressSlots: this.addressSlots,
      resolveWarmKey(slot, recovered, expected) {
        const bound = st.warmKeys.get(slot);
        if (bound !== undefined) return bound === recovered;
        if (!resolver || !safe(() => resolver(recovered, expected))) return false;
        st.warmKeys.set(slot, recovered);
        return true;
      },
    };
  }
}

/** A resolver that throws counts as "not authorised" (Go: `err != nil || !ok`). */
function safe(f: () => boolean): boolean {
  try {
    return f() === true;
  } catch {
    return false;
  }
}

function newBindings(before: ReadonlyMap<number, string>, after: ReadonlyMap<number, string>): WarmKeyBinding[] {
  const out: WarmKeyBinding[] = [];
  for (const [slot, warm] of after) if (!before.has(slot)) out.push({ slot, warm });
  return out.sort((a, b) => a.slot - b.slot);
}
