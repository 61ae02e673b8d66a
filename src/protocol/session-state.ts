/**
 * The mutable state of one devshard session (gonka 8a35022 devshard/types `EscrowState` plus the
 * state machine's `sealedNonces`), with rollback for a refused diff. Instead of deep-copying the
 * state per diff (`snapshotMutable`), records are immutable objects and the first change of each
 * live id within a diff is journalled, so a snapshot costs O(slots + warm keys), not O(records).
 */
import type { InferenceRecord } from './inference-record.js';
import { Phase, type HostStats } from './hashes.js';
import type { SessionConfig } from './session-config.js';
import { NO_HEIGHT_SYNC_FLAGS, type HeightSyncFlags } from './height-sync-flags.js';

export const ZERO_ACC = new Uint8Array(32);

export interface Snapshot {
  balance: bigint;
  fees: bigint;
  phase: Phase;
  finalizeNonce: bigint;
  latestNonce: bigint;
  hostStats: HostStats[];
  warmKeys: Map<number, string>;
  sealedAcc: Uint8Array;
  sealedAny: boolean;
  heightSync: HeightSyncFlags;
}

export class SessionState {
  balance: bigint;
  fees: bigint;
  phase = Phase.Active;
  finalizeNonce = 0n;
  latestNonce = 0n;
  /** Index = slot id; one entry per slot from the start. */
  hostStats: HostStats[];
  /** Slot → warm address bound by a signature (hashed into the root). */
  warmKeys = new Map<number, string>();
  /** The v2 sealed accumulator (32 zero bytes before the first seal). */
  sealedAcc: Uint8Array = ZERO_ACC;
  /** Whether anything was ever sealed (the accumulator is then "set"). */
  sealedAny = false;
  /** v5: the forced-turn and cadence flags (replaced, never changed in place); always zero under v2. */
  heightSync: HeightSyncFlags = NO_HEIGHT_SYNC_FLAGS;
  /** Live records, kept in ascending id order. */
  private live = new Map<bigint, InferenceRecord>();
  /** Sealed id → the nonce it was sealed at (`sealedNonces`). */
  private sealed = new Map<bigint, bigint>();

  /** Per-diff journals (null outside a diff). */
  private liveJournal: Map<bigint, InferenceRecord | undefined> | null = null;
  private sealedJournal: bigint[] = [];
  /** Bumped on every host-stats change, so the hash can be cached. */
  statsVersion = 0;
  /** The lowest live id added, replaced or removed since `takeDirty` (undefined: none), for the live-hash cache. */
  private dirtyFrom: bigint | undefined;
  /** The highest id ever put live (ids are start nonces, so new ones come last). */
  private maxId = 0n;

  constructor(
    readonly escrowId: string,
    readonly version: string,
    readonly config: SessionConfig,
    /** Slot id → cold address (index = slot id; an address may hold several slots). */
    readonly slots: readonly string[],
    balance: bigint,
    fees: bigint,
  ) {
    this.balance = balance;
    this.fees = fees;
    this.hostStats = slots.map(() => ({ missed: 0, invalid: 0, cost: 0n, requiredValidations: 0, completedValidations: 0 }));
  }

  getLive(id: bigint): InferenceRecord | undefined {
    return this.live.get(id);
  }

  liveRecords(): IterableIterator<InferenceRecord> {
    return this.live.values();
  }

  /** Live records with id > `after`, ascending. */
  *liveAfter(after: bigint): Generator<InferenceRecord> {
    if (this.maxId - after <= BigInt(this.live.size)) {
      // The tail: look the ids up instead of walking the whole map.
      for (let id = after + 1n; id <= this.maxId; id++) {
        const r = this.live.get(id);
        if (r !== undefined) yield r;
      }
      return;
    }
    for (const r of this.live.values()) if (r.id > after) yield r;
  }

  /** The lowest live id changed since the last call (undefined: none), and resets it. */
  takeDirty(): bigint | undefined {
    const d = this.dirtyFrom;
    this.dirtyFrom = undefined;
    return d;
  }

  private markDirty(id: bigint): void {
    if (this.dirtyFrom === undefined || id < this.dirtyFrom) this.dirtyFrom = id;
  }

  get liveCount(): number {
    return this.live.size;
  }

  isSealed(id: bigint): boolean {
    return this.sealed.has(id);
  }

  sealNonceOf(id: bigint): bigint | undefined {
    return this.sealed.get(id);
  }

  get sealedCount(): number {
    return this.sealed.size;
  }

  private touch(id: bigint): void {
    if (this.liveJournal && !this.liveJournal.has(id)) this.liveJournal.set(id, this.live.get(id));
  }

  /** Adds or replaces a live record. A new id must be above every live id (ids are start nonces). */
  putLive(rec: InferenceRecord): void {
    this.touch(rec.id);
    this.markDirty(rec.id);
    if (rec.id > this.maxId) this.maxId = rec.id;
    this.live.set(rec.id, rec);
  }

  /** Removes a live record into the sealed set at `sealNonce`. */
  markSealed(id: bigint, sealNonce: bigint): void {
    this.touch(id);
    this.markDirty(id);
    this.live.delete(id);
    if (!this.sealed.has(id)) this.sealedJournal.push(id);
    this.sealed.set(id, sealNonce);
  }

  setStats(slot: number, next: HostStats): void {
    this.hostStats[slot] = next;
    this.statsVersion++;
  }

  begin(): Snapshot {
    this.liveJournal = new Map();
    this.sealedJournal = [];
    return {
      balance: this.balance,
      fees: this.fees,
      phase: this.phase,
      finalizeNonce: this.finalizeNonce,
      latestNonce: this.latestNonce,
      hostStats: [...this.hostStats],
      warmKeys: new Map(this.warmKeys),
      sealedAcc: this.sealedAcc,
      sealedAny: this.sealedAny,
      heightSync: this.heightSync,
    };
  }

  commit(): void {
    this.liveJournal = null;
    this.sealedJournal = [];
  }

  rollback(s: Snapshot): void {
    this.balance = s.balance;
    this.fees = s.fees;
    this.phase = s.phase;
    this.finalizeNonce = s.finalizeNonce;
    this.latestNonce = s.latestNonce;
    this.hostStats = s.hostStats;
    this.statsVersion++;
    this.warmKeys = s.warmKeys;
    this.sealedAcc = s.sealedAcc;
    this.sealedAny = s.sealedAny;
    this.heightSync = s.heightSync;
    for (const id of this.sealedJournal) this.sealed.delete(id);
    let reinserted = false;
    for (const [id, prev] of this.liveJournal ?? []) {
      this.markDirty(id);
      if (prev === undefined) this.live.delete(id);
      else {
        if (!this.live.has(id)) reinserted = true;
        this.live.set(id, prev);
      }
    }
    // A record sealed in the refused diff came back at the end of the map: restore id order.
    if (reinserted) this.live = new Map([...this.live].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)));
    this.commit();
  }
}
