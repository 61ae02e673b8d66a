/**
 * The write side: commands decide against the current escrow state, append, and only then act.
 *
 * Decisions happen synchronously on the event loop, so two chat requests can never take the same
 * nonce: the decided (not yet committed) snapshot of a stream is kept in `pending` until its last
 * append commits, and the next decision starts from it. Committed state lives in the projections
 * (updated by the store's commit hook), which stay the only source for reads and routing.
 */
import type { EventMetadata, NewEvent, RecordedEvent } from '../../events/envelope.js';
import { escrowStream, createIntentStream, newEvent, upcast, CREATE_INTENT_STREAM_PREFIX, ESCROW_STREAM_PREFIX, type CatalogEvent, type InferenceEntry } from '../../events/catalog.js';
import type { AppendOptions, AppendResult, EventStore, ExpectedVersion, Fence } from '../../events/store.js';
import { LeaseLostError, WrongExpectedVersionError } from '../../events/errors.js';
import { stepEscrowFast } from '../../machines/escrow-fast.js';
import { escrowMachine, initialSnapshot, stateName, type EscrowInput, type EscrowSnapshot } from '../../machines/index.js';
import type { Projections } from '../../projections/index.js';
import { GatewayError } from '../errors.js';

/**
 * A command the statechart refuses in the escrow's current state: a refusal (409 conflict) wherever
 * it surfaces, never a 500, whether or not the use case that decided it catches it.
 */
export class TransitionRefused extends GatewayError {
  constructor(
    readonly escrowId: string,
    readonly eventType: string,
    readonly state: string,
  ) {
    super('conflict', 'transition_refused', `Escrow ${escrowId} is ${state}; ${eventType} is not allowed there.`, {
      remedy: 'Read its state with GET /v1/admin/escrows/{id} and act on what it allows.',
    });
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

/** Entries per InferencesRecorded at most (~200 bytes each), so one event stays a few KB. */
export const MAX_GROUP_ENTRIES = 128;

/**
 * How long the records no request waits on may wait for a commit of their own (store `withinMs`):
 * a chat's start and end (recordRequest) and the host txs taken from an answer (recordHostTxs).
 * Any other append (a nonce block, a diff, an admin event) takes them sooner. Waiting lets many
 * requests share one commit: upstream, one commit per ~5 ms instead of one per writer round trip;
 * over the protocol, the next request's diff carries the last one's end. The price: a crash loses
 * the records of the last few ms, which restart recovery handles as for requests in flight
 * (reconcile.ts; over the protocol the host's Finish bills them).
 */
export const REQUEST_RECORD_WITHIN_MS = 5;

/** Who records InferencesRecorded: each entry names its request (and a start its client key). */
const CHAT_METADATA: EventMetadata = Object.freeze({ actor: Object.freeze({ kind: 'chat' as const }) });

/** An InferencesRecorded being gathered: decided, its stream version taken, not yet appended. */
interface OpenGroup {
  entries: InferenceEntry[];
  event: NewEvent;
  expectedVersion: number;
  /** Its step for the pool to adopt (undefined when the stream's steps are out of step). */
  step: { snapshot: EscrowSnapshot } | undefined;
  done: Promise<RecordedEvent[]>;
  settle: { resolve(r: RecordedEvent[]): void; reject(e: unknown): void };
}

export class Engine {
  private readonly pending = new Map<string, Pending>();
  /** Escrow streams' open InferencesRecorded (recordRequest). */
  private readonly groups = new Map<string, OpenGroup>();
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

  /**
   * Instances sharing a log (gateway/scale): the fence each append to a stream carries, and the
   * claim an escrow's commands make before they run (`serial`). A sole owner sets neither.
   */
  ownership: { fenceOf(streamId: string): Fence | undefined; claim(escrowId: string): Promise<void> } | undefined;

  constructor(
    readonly store: EventStore,
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
    } else if (p.head >= 1024 && p.head * 2 >= steps.length) {
      // A stream that is never idle never drains its steps: drop the adopted ones now and then.
      steps.splice(0, p.head);
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

  /**
   * Decides one chat request's start or end on the escrow, like decideEscrow with that one event,
   * but records it as an entry of the stream's open InferencesRecorded: the starts and ends an
   * escrow gets before the store forms its next batch share one event (one row, one hash, one
   * commit notification) instead of one each. Resolves once that event is durable.
   *
   * The open event keeps its place in the stream: any other decision on the stream closes it first
   * (appends it as it stands), so the log's order is the order of the decisions; the store closes
   * every open one right before it forms a batch (stageForNextBatch).
   */
  recordRequest(escrowId: string, entry: InferenceEntry, opts: { urgent?: boolean } = {}): Promise<RecordedEvent[]> {
    const done = this.recordRequestGrouped(escrowId, entry);
    // Someone waits on it (an answer's last byte): commit at the next turn of the event loop, not
    // within the group's window. Entries decided in the same turn still share the commit.
    if (opts.urgent) {
      try {
        this.store.stageForNextBatch(this.closeGroups);
      } catch {
        /* the store is closed: the append rejects by itself */
      }
    }
    return done;
  }

  private recordRequestGrouped(escrowId: string, entry: InferenceEntry): Promise<RecordedEvent[]> {
    const streamId = escrowStream(escrowId);
    const broken = this.unwritable.get(streamId);
    if (broken !== undefined) throw new TransitionRefused(escrowId, entry.type, `unwritable since an append failed (${broken}); restart the gateway`);
    const snapshot = this.escrow(escrowId) ?? initialSnapshot(escrowMachine, this.escrowInput);
    const next = stepEscrowFast(snapshot, entry);
    if (!next.accepted) throw new TransitionRefused(escrowId, entry.type, stateName(snapshot.value));
    const open = this.groups.get(streamId);
    if (open && open.entries.length < MAX_GROUP_ENTRIES) {
      open.entries.push(entry);
      this.pending.get(streamId)!.snapshot = next.snapshot;
      if (open.step) open.step.snapshot = next.snapshot;
      return open.done;
    }
    if (open) this.closeGroup(streamId, open);
    const entries = [entry];
    const data = { entries };
    const step = { type: 'InferencesRecorded', data, base: snapshot, snapshot: next.snapshot };
    const expectedVersion = this.reserve(streamId, 1, next.snapshot, [step]);
    let settle!: { resolve(r: RecordedEvent[]): void; reject(e: unknown): void };
    const done = new Promise<RecordedEvent[]>((resolve, reject) => (settle = { resolve, reject }));
    const group: OpenGroup = { entries, event: newEvent('InferencesRecorded', data, CHAT_METADATA), expectedVersion, step: this.pending.get(streamId)!.steps ? step : undefined, done, settle };
    this.groups.set(streamId, group);
    try {
      this.store.stageForNextBatch(this.closeGroups, { withinMs: REQUEST_RECORD_WITHIN_MS });
    } catch {
      this.closeGroup(streamId, group); // the store is closed: the append rejects at once
    }
    return done;
  }

  /** Appends every open InferencesRecorded (the store is forming a batch). */
  private readonly closeGroups = (): void => {
    for (const [streamId, group] of this.groups) this.closeGroup(streamId, group);
  };

  /** Appends the stream's open InferencesRecorded as it stands; later entries open a new one. */
  private closeGroup(streamId: string, group: OpenGroup): void {
    this.groups.delete(streamId);
    this.committed(streamId, this.store.append(streamId, [group.event], this.options(streamId, group.expectedVersion))).then(group.settle.resolve, group.settle.reject);
  }

  /** Nothing decided on the escrow is still committing (the lease keeper hands it over only then). */
  settledOn(escrowId: string): boolean {
    const streamId = escrowStream(escrowId);
    return !this.pending.has(streamId) && !this.groups.has(streamId);
  }

  /** Would the escrow accept this event now? */
  canEscrow(id: string, event: CatalogEvent): boolean {
    if (this.unwritable.has(escrowStream(id))) return false;
    const s = this.escrow(id);
    return !!s && stepEscrowFast(s, event as never).accepted;
  }

  private appendDecided(streamId: string, events: NewEvent[], snapshot: EscrowSnapshot, steps?: Pending['steps']): Promise<RecordedEvent[]> {
    // An open InferencesRecorded was decided first: it goes first.
    const open = this.groups.get(streamId);
    if (open) this.closeGroup(streamId, open);
    const expectedVersion = this.reserve(streamId, events.length, snapshot, steps);
    return this.committed(streamId, this.store.append(streamId, events, this.options(streamId, expectedVersion)));
  }

  /** The append's options: its expected version, and its lease's fence when instances share the log. */
  private options(streamId: string, expectedVersion: ExpectedVersion, withinMs?: number): AppendOptions {
    const fence = this.ownership?.fenceOf(streamId);
    return { expectedVersion, ...(withinMs !== undefined ? { withinMs } : {}), ...(fence ? { fence } : {}) };
  }

  /** Takes the stream's next `count` versions for decided events; returns the expected version. */
  private reserve(streamId: string, count: number, snapshot: EscrowSnapshot, steps: Pending['steps']): number {
    const expectedVersion = this.version(streamId);
    const entry = this.pending.get(streamId);
    // One entry per stream while appends are uncommitted, updated in place.
    if (entry) {
      entry.snapshot = snapshot;
      entry.version = expectedVersion + count;
      entry.uncommitted++;
      if (entry.steps && steps) for (const s of steps) entry.steps.push(s);
      else entry.steps = undefined;
    } else this.pending.set(streamId, { snapshot, version: expectedVersion + count, uncommitted: 1, steps, head: 0 });
    this.appending++;
    return expectedVersion;
  }

  /** Settles the bookkeeping of `reserve` once the append commits or fails. */
  private committed(streamId: string, append: Promise<AppendResult>): Promise<RecordedEvent[]> {
    // Plain reactions instead of an async function and a tracking set: this runs per escrow and batch.
    return append.then(
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
    // Entries gathered after the failed append were decided on top of it: their event is appended
    // now and fails the same way (its expected version is beyond the log).
    const open = this.groups.get(streamId);
    if (open) this.closeGroup(streamId, open);
    this.pending.delete(streamId);
    // Another instance took the escrow over: it reconciles what this one decided; nothing to set aside here.
    if (err instanceof LeaseLostError) return;
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
      return (await this.store.append(streamId, events, this.options(streamId, expectedVersion))).records;
    } finally {
      this.appendEnded();
    }
  }

  /**
   * Appends to a stream no statechart decides and only one writer fills in order (an escrow's
   * devshard session diffs): no version check, the group commit keeps the order of the calls.
   * `withinMs`: the store may hold it that long for a shared commit (AppendOptions).
   */
  async appendOrdered(streamId: string, events: NewEvent[], opts: { withinMs?: number } = {}): Promise<RecordedEvent[]> {
    this.appending++;
    try {
      return (await this.store.append(streamId, events, this.options(streamId, 'any', opts.withinMs))).records;
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

  /**
   * Runs `f` after every earlier `serial` call with the same key has finished (admin commands). On
   * an escrow's stream it claims the escrow first when instances share the log (unless `claim` is
   * false: the lease keeper's own take-over and hand-over).
   */
  serial<T>(key: string, f: () => Promise<T>, opts: { claim?: boolean } = {}): Promise<T> {
    const prev = this.queues.get(key) ?? Promise.resolve();
    const escrowId = this.ownership && opts.claim !== false && key.startsWith(ESCROW_STREAM_PREFIX) && !key.startsWith(CREATE_INTENT_STREAM_PREFIX) ? key.slice(ESCROW_STREAM_PREFIX.length) : undefined;
    const claimed = escrowId === undefined ? f : async () => {
      await this.ownership!.claim(escrowId);
      return f();
    };
    const run = prev.then(claimed, claimed);
    const tail = run.catch(() => undefined);
    this.queues.set(key, tail);
    void tail.then(() => {
      if (this.queues.get(key) === tail) this.queues.delete(key);
    });
    return run;
  }

  /** Recorded events of one stream, upcast (off the hot path: this reads the log). */
  async readStream(streamId: string) {
    return upcastAll(await this.store.readStream(streamId));
  }
}

const upcastAll = (records: RecordedEvent[]) => records.map((r) => upcast(r)).filter((r) => r !== null);
