/**
 * The write side: commands decide against the current escrow state, append, and only then act.
 *
 * Decisions happen synchronously on the event loop, so two chat requests can never take the same
 * nonce: the decided (not yet committed) snapshot of a stream is kept in `pending` until its last
 * append commits, and the next decision starts from it. Committed state lives in the projections
 * (updated by the store's commit hook), which stay the only source for reads and routing.
 */
import type { NewEvent, RecordedEvent } from '../events/envelope.js';
import { escrowStream, createIntentStream, upcast, type CatalogEvent } from '../events/catalog.js';
import type { SqliteEventStore } from '../events/sqlite-store.js';
import { WrongExpectedVersionError } from '../events/errors.js';
import { stepEscrowFast } from '../machines/escrow-fast.js';
import { escrowMachine, initialSnapshot, stateName, type EscrowInput, type EscrowSnapshot } from '../machines/index.js';
import type { Projections } from '../projections/index.js';

/** A command the statechart refuses in the escrow's current state. */
export class TransitionRefused extends Error {
  constructor(
    readonly escrowId: string,
    readonly eventType: string,
    readonly state: string,
  ) {
    super(`escrow ${escrowId} is ${state}; ${eventType} is not allowed there`);
    this.name = 'TransitionRefused';
  }
}

interface Pending {
  snapshot: EscrowSnapshot;
  version: number;
  /** Appends decided but not yet committed. */
  uncommitted: number;
  /**
   * Escrow streams: each decided event's step, in append order, until its record is folded by the
   * pool (which adopts the snapshot instead of stepping again: EscrowPoolProjection.adoptDecidedSteps).
   * `head` is the next one due. Undefined once out of step with the commits (then nothing is adopted).
   */
  steps?: ({ type: string; data: unknown; base: EscrowSnapshot; snapshot: EscrowSnapshot } | undefined)[] | undefined;
  head: number;
}

export class Engine {
  private readonly pending = new Map<string, Pending>();
  private readonly versions = new Map<string, number>();
  /** Appends not yet committed or failed (chat records its start and end without waiting for them). */
  private appending = 0;
  /** `idle()` callers waiting for `appending` to reach 0. */
  private readonly idleWaiters: (() => void)[] = [];
  /**
   * Escrow streams whose append failed while a decided nonce was ahead of the log (the disk, the
   * store closed, another writer). Requests leave before their start commits, so that nonce may
   * already be out without a record: deciding again from committed state could hand it out twice.
   * Such an escrow takes no further event until a restart, whose reconciler skips its reserved
   * nonces.
   */
  private readonly unwritable = new Map<string, string>();

  constructor(
    readonly store: SqliteEventStore,
    readonly projections: Projections,
    private readonly escrowInput: EscrowInput = {},
  ) {
    // Versions follow commits so the hot path never asks SQL for a stream version.
    store.onCommit((records) => {
      for (const r of records) this.versions.set(r.streamId, r.streamVersion);
    });
    projections.pool.adoptDecidedSteps((streamId, type, data) => this.decidedStep(streamId, type, data));
  }

  /** The step decided for the next committed event of the stream, if it is this one (by its data's identity). */
  private decidedStep(streamId: string, type: string, data: unknown) {
    const p = this.pending.get(streamId);
    const steps = p?.steps;
    if (!steps) return undefined;
    const step = steps[p.head];
    if (!step || step.data !== data || step.type !== type) {
      p.steps = undefined; // a record this engine did not decide, or not in order: stop adopting
      return undefined;
    }
    steps[p.head++] = undefined;
    if (p.head === steps.length) {
      steps.length = 0;
      p.head = 0;
    }
    return step;
  }

  /** The escrow's decided state (includes appends still committing). */
  escrow(escrowId: string): EscrowSnapshot | undefined {
    return this.pending.get(escrowStream(escrowId))?.snapshot ?? this.projections.pool.escrow(escrowId);
  }

  /** The creation intent's decided state. */
  intent(intentId: string): EscrowSnapshot | undefined {
    return this.pending.get(createIntentStream(intentId))?.snapshot ?? this.projections.pool.intent(intentId);
  }

  private version(streamId: string): number {
    const p = this.pending.get(streamId);
    if (p) return p.version;
    let v = this.versions.get(streamId);
    if (v === undefined) {
      v = this.store.streamVersion(streamId);
      this.versions.set(streamId, v);
    }
    return v;
  }

  /**
   * Decides `events` against the escrow (or intent) stream's state: each must be accepted by the
   * statechart in turn, else nothing is appended and TransitionRefused is thrown synchronously.
   * Returns once the events are durable.
   */
  decideEscrow(kind: 'escrow' | 'intent', id: string, events: NewEvent[], base?: EscrowSnapshot): Promise<RecordedEvent[]> {
    const streamId = kind === 'escrow' ? escrowStream(id) : createIntentStream(id);
    const broken = this.unwritable.get(streamId);
    if (broken !== undefined) throw new TransitionRefused(id, events[0]?.type ?? 'event', `unwritable since an append failed (${broken}); restart the gateway`);
    let snapshot =
      (kind === 'escrow' ? this.escrow(id) : this.intent(id)) ?? base ?? initialSnapshot(escrowMachine, this.escrowInput);
    // Steps are kept for adoption only when the data is an object (matched by identity) and the
    // stream already has decisions in step with its commits, or none pending.
    let steps: NonNullable<Pending['steps']> | undefined = kind === 'escrow' ? [] : undefined;
    for (const e of events) {
      const next = stepEscrowFast(snapshot, { type: e.type, data: e.data } as never);
      if (!next.accepted) throw new TransitionRefused(id, e.type, stateName(snapshot.value));
      if (steps && typeof e.data === 'object' && e.data !== null) steps.push({ type: e.type, data: e.data, base: snapshot, snapshot: next.snapshot });
      else steps = undefined;
      snapshot = next.snapshot;
    }
    return this.appendDecided(streamId, events, snapshot, steps);
  }

  /** Would the escrow accept this event now? */
  canEscrow(id: string, event: CatalogEvent): boolean {
    if (this.unwritable.has(escrowStream(id))) return false;
    const s = this.escrow(id);
    return !!s && stepEscrowFast(s, event as never).accepted;
  }

  private appendDecided(streamId: string, events: NewEvent[], snapshot: EscrowSnapshot, steps?: Pending['steps']): Promise<RecordedEvent[]> {
    const expectedVersion = this.version(streamId);
    const entry = this.pending.get(streamId);
    // One entry per stream while appends are uncommitted, updated in place (a request decides twice).
    if (entry) {
      entry.snapshot = snapshot;
      entry.version = expectedVersion + events.length;
      entry.uncommitted++;
      if (entry.steps && steps) for (const s of steps) entry.steps.push(s);
      else entry.steps = undefined;
    } else this.pending.set(streamId, { snapshot, version: expectedVersion + events.length, uncommitted: 1, steps, head: 0 });
    this.appending++;
    // Plain reactions instead of an async function and a tracking set: this runs twice per request.
    return this.store.append(streamId, events, { expectedVersion }).then(
      (result) => {
        this.settled(streamId);
        return result.records;
      },
      (err: unknown) => {
        this.appendFailed(streamId, err);
        this.settled(streamId);
        throw err;
      },
    );
  }

  /**
   * A failed append leaves the decided state ahead of the log. If no decided nonce is ahead of the
   * committed one, nothing left unrecorded: the next decision starts again from committed state
   * (the projections). Otherwise the stream is set aside (see `unwritable`).
   */
  private appendFailed(streamId: string, err: unknown): void {
    const decidedNonce = this.pending.get(streamId)?.snapshot.context.nonce ?? 0;
    this.pending.delete(streamId);
    if (streamId.startsWith('escrow-') && !streamId.startsWith('escrow-create-') && !this.unwritable.has(streamId)) {
      const committedNonce = this.projections.pool.escrow(streamId.slice('escrow-'.length))?.context.nonce ?? 0;
      const reason = err instanceof WrongExpectedVersionError ? `another writer appended to ${streamId}` : err instanceof Error ? err.message : String(err);
      if (decidedNonce > committedNonce) this.unwritable.set(streamId, reason);
    }
  }

  /** An append of `streamId` committed or failed. */
  private settled(streamId: string): void {
    const cur = this.pending.get(streamId);
    if (cur && --cur.uncommitted === 0) this.pending.delete(streamId);
    this.appendEnded();
  }

  /** Appends to a non-escrow stream (settings, rotation) with an exact expected version. */
  async append(streamId: string, events: NewEvent[]): Promise<RecordedEvent[]> {
    const expectedVersion = this.version(streamId);
    this.appending++;
    try {
      return (await this.store.append(streamId, events, { expectedVersion })).records;
    } finally {
      this.appendEnded();
    }
  }

  private appendEnded(): void {
    if (--this.appending === 0) for (const wake of this.idleWaiters.splice(0)) wake();
  }

  /** Resolves once every append decided so far (and any decided meanwhile) has committed or failed. */
  async idle(): Promise<void> {
    while (this.appending > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  private readonly queues = new Map<string, Promise<unknown>>();

  /** Runs `f` after every earlier `serial` call with the same key has finished (admin commands). */
  serial<T>(key: string, f: () => Promise<T>): Promise<T> {
    const prev = this.queues.get(key) ?? Promise.resolve();
    const run = prev.then(f, f);
    const tail = run.catch(() => undefined);
    this.queues.set(key, tail);
    tail.then(() => {
      if (this.queues.get(key) === tail) this.queues.delete(key);
    });
    return run;
  }

  /** Recorded events of one stream, upcast (admin paths only: this reads SQL). */
  readStream(streamId: string) {
    return this.store.readStream(streamId).map((r) => upcast(r)).filter((r) => r !== null);
  }
}
