import type { Observable } from 'rxjs';
import type { NewEvent, RecordedEvent } from './envelope.js';
import type { LeaseTable } from './leases.js';

/** A value now (a local store) or once a server answered (a network store): callers `await` it. */
export type Awaitable<T> = T | Promise<T>;

/** Runs synchronously right after each commit, with its events in position order. */
export type CommitListener = (records: RecordedEvent[]) => void;

export interface Checkpoint<S = unknown> {
  name: string;
  /** Last global position folded into `state`. */
  position: number;
  state: S;
  /** Hash of the event at `position` ("" at 0): ties the checkpoint to this exact log. */
  hash: string;
}

/**
 * `expectedVersion`:
 *  - a number: the stream's current last version must equal it (-1 = the stream must not exist);
 *  - 'no-stream': same as -1;
 *  - 'any': no check.
 */
export type ExpectedVersion = number | 'no-stream' | 'any';

export interface AppendOptions {
  expectedVersion: ExpectedVersion;
  /**
   * Milliseconds this append may wait for a commit of its own (> 0): any other append's commit
   * takes it sooner. For records no caller waits on, so that several share one commit. A store
   * without group commit ignores it.
   */
  withinMs?: number;
  /**
   * The lease this append is written under (several instances on one log, issue 42): the store
   * writes it only while `token` is the lease's fencing token in force, checked inside the commit
   * that writes it, else refuses it with LeaseLostError and writes nothing of it. A store that one
   * process owns whole (SQLite: one gateway per file) has no leases and ignores it.
   */
  fence?: Fence;
}

/** A lease's name and the fencing token its holder got when it took it. */
export interface Fence {
  lease: string;
  token: number;
}

export interface AppendResult {
  /** Stream version of the last appended event. */
  nextExpectedVersion: number;
  /** Global positions of the appended events, in order. */
  positions: number[];
  records: RecordedEvent[];
}

/** Counters of the write path (benchmarks report commits per request from them). */
export interface StoreStats {
  /** Write transactions committed (one fsync each). */
  commits: number;
  /** append/appendNow calls that committed. */
  appends: number;
  events: number;
  /** Appends rejected with WrongExpectedVersionError. */
  conflicts: number;
}

/**
 * The event log port: what the engine, the projections and the composition root use, so a server
 * database (PostgreSQL, issue 42) can implement it beside SQLite (`openSqliteEventStore`).
 * `test/events/store-contract.ts` is the behaviour every implementation must pass.
 *
 * **Asynchronous: what must reach the database.** `append` (and the group commit behind it),
 * `saveCheckpoint` and `close` return promises that settle only once durable: a network store
 * pays a round trip there, and callers already wait for it off the request path.
 *
 * **Group commit.** Appends issued while a commit is pending are written together in the next
 * single transaction (one fsync); every caller's promise resolves only after its own commit.
 * `stageForNextBatch` lets a caller add to the next batch as late as possible.
 *
 * **In memory: the hot path.** `lastPosition` and `streamVersion` answer from what the store keeps
 * as it commits and follows the log (its tail, each stream's head), never from a query: the engine
 * decides every chat request's nonce against them synchronously on the event loop
 * (docs/architecture.md, principle 4), so a backend's latency may not sit there.
 *
 * **Following the log.** `onCommit` listeners and `subscribe` hear every committed event, in
 * position order, once; the projections (router pool, status, settings) are folded from them, so
 * every other hot-path read comes from memory too.
 *
 * **Log reads (not the hot path): asynchronous where the store must ask a server.** `readStream`,
 * `readAll` and `loadCheckpoint` may answer at once (SQLite reads its own file: plain values) or
 * with a promise (a network store pays a round trip): callers `await` them and iterate `readAll`
 * with `for await`, which takes both. The gateway reads a stream when an escrow's devshard session
 * opens (its diffs, its protocol), for admin views and for background work, never per chat request.
 * The projections' start-up catch-up reads through `followProjections`, which attaches to
 * `onCommit` before an asynchronous catch-up so that no commit slips between them.
 */
export interface EventStore {
  // ---- write (async) ----
  /**
   * Queues the append for the next group commit. Resolves after commit; a version conflict
   * rejects this call only, with WrongExpectedVersionError; after close, EventStoreClosedError.
   */
  append(streamId: string, events: NewEvent[], options: AppendOptions): Promise<AppendResult>;
  /**
   * Runs `take` right before the next batch is formed (once, however often it is staged before
   * that), so appends it makes join that batch. `withinMs` (> 0): no batch is formed for this
   * alone before that many milliseconds have passed; any other append's batch takes it sooner.
   */
  stageForNextBatch(take: () => void, opts?: { withinMs?: number }): void;
  /** Waits for pending commits (staged work included), then closes. */
  close(): Promise<void>;

  // ---- checkpoints ----
  /**
   * Stores a projection checkpoint (overwrites the previous one of that name); not an event.
   * Rejects with RangeError if `position` is beyond the log. `soon`: the store may write it with
   * its next commit, off the event loop (a serving gateway's periodic checkpoint); the promise
   * settles once it is written either way.
   */
  saveCheckpoint(name: string, position: number, state: unknown, options?: { soon?: boolean }): Promise<void>;
  /** The checkpoint of that name; undefined when absent or when it does not belong to this log. */
  loadCheckpoint<S = unknown>(name: string): Awaitable<Checkpoint<S> | undefined>;

  // ---- follow ----
  /**
   * `listener` runs synchronously right after each commit, with that commit's events in position
   * order, before any appender's promise resolves. Returns an unsubscribe function.
   */
  onCommit(listener: CommitListener): () => void;
  /** Catch up from `afterPosition` (exclusive) then go live: every committed event, in order, once. */
  subscribe(afterPosition?: number): Observable<RecordedEvent>;

  // ---- in-memory reads (hot path) ----
  /** Last committed global position (0 when empty). */
  lastPosition(): number;
  /** Current last committed version of a stream, -1 when absent. */
  streamVersion(streamId: string): number;

  // ---- log reads (off the hot path; see above) ----
  /** A stream's events from `fromVersion` on, in order; at most `limit` of them (default: all). */
  readStream(streamId: string, fromVersion?: number, limit?: number): Awaitable<RecordedEvent[]>;
  /** Events with position > `afterPosition` (exclusive), in order. */
  readAll(afterPosition?: number, limit?: number): Iterable<RecordedEvent> | AsyncIterable<RecordedEvent>;

  stats(): StoreStats;

  /**
   * A log several instances share (PostgreSQL) keeps their leases; appends made under one carry
   * its fence. Absent: one process owns the whole log (SQLite) and needs none.
   */
  readonly leases?: LeaseTable;
}
