/**
 * The event log on better-sqlite3, the EventStore port's embedded implementation (store.ts). The
 * pieces, by concept, are in sqlite/: opening the file (database.ts), an append's preparation and
 * seal (prepare.ts), the group commit (group-commit.ts) and its writer thread (writer.ts), reads
 * and subscriptions (reader.ts), checkpoints (checkpoints.ts). This class puts them together.
 */
import type Database from 'better-sqlite3';
import type { Observable } from 'rxjs';
import type { NewEvent, RecordedEvent } from './envelope.js';
import type { StoredRecord } from './fold-read.js';
import type { PartitionableLog } from './fold-partition.js';
import type { AppendOptions, AppendResult, Checkpoint, CommitListener, EventStore, StoreStats } from './store.js';
import { SqliteCheckpoints } from './sqlite/checkpoints.js';
import { openLogDatabase } from './sqlite/database.js';
import { SqliteGroupCommit } from './sqlite/group-commit.js';
import { SqliteReader } from './sqlite/reader.js';

export { eventsFile } from './storage-path.js';
export type { Checkpoint, CommitListener, StoreStats } from './store.js';

export interface SqliteEventStoreOptions {
  /** Most events written in one group-commit transaction; the rest wait for the next one. */
  maxBatchEvents?: number;
  /** How long to wait for another connection's write lock (ms). */
  busyTimeoutMs?: number;
  /** Clock for event times (tests pin it). */
  now?: () => Date;
  /** Called when an onCommit listener throws; the store carries on regardless. */
  onListenerError?: (error: unknown) => void;
  /**
   * Write group commits from a worker thread (default true for a file): the fsync then no longer
   * blocks the event loop, and appends arriving meanwhile form the next batch. Same durability
   * (synchronous=FULL) and the same order: listeners run and appends resolve once it is on disk.
   */
  writerThread?: boolean;
}

/**
 * Opens (creating if needed, mode 700 for the directory) and migrates an event log.
 * Journal is WAL with `synchronous=FULL`: each commit is fsynced before any caller hears of it.
 */
export function openSqliteEventStore(filePath: string, opts: SqliteEventStoreOptions = {}): SqliteEventStore {
  const db = openLogDatabase(filePath, opts.busyTimeoutMs ?? 5_000);
  return new SqliteEventStore(db, filePath, { ...opts, writerThread: filePath !== ':memory:' && opts.writerThread !== false, busyTimeoutMs: opts.busyTimeoutMs ?? 5_000 });
}

/**
 * The event log on better-sqlite3. One writer process per file: positions and the hash chain are
 * assigned here. (A foreign commit is noticed at the next batch and caches are reloaded, so the
 * chain stays consistent, but live subscriptions only hear about this process's commits.)
 *
 * Beyond the port: synchronous `appendNow` and `saveCheckpointSoon` for tools and tests, the fold
 * read path (`readAllForFold`, `foldPartitions`), and the writer thread's id for benchmarks.
 */
export class SqliteEventStore implements EventStore {
  readonly file: string;
  private readonly db: Database.Database;
  private readonly writes: SqliteGroupCommit;
  private readonly reader: SqliteReader;
  private readonly checkpoints: SqliteCheckpoints;

  /** Use openSqliteEventStore; this assumes a migrated connection. */
  constructor(db: Database.Database, file: string, opts: SqliteEventStoreOptions = {}) {
    this.db = db;
    this.file = file;
    this.writes = new SqliteGroupCommit(db, file, {
      maxBatchEvents: Math.max(1, opts.maxBatchEvents ?? 10_000),
      busyTimeoutMs: opts.busyTimeoutMs ?? 5_000,
      now: opts.now ?? (() => new Date()),
      onListenerError:
        opts.onListenerError ?? ((error) => process.emitWarning(`event store commit listener threw: ${String(error)}`, 'EventStoreWarning')),
      writerThread: opts.writerThread === true,
    });
    this.reader = new SqliteReader(db, file, this.writes);
    this.checkpoints = new SqliteCheckpoints(db, this.writes);
  }

  append(streamId: string, events: NewEvent[], options: AppendOptions): Promise<AppendResult> {
    return this.writes.append(streamId, events, options);
  }

  stageForNextBatch(take: () => void, opts: { withinMs?: number } = {}): void {
    this.writes.stageForNextBatch(take, opts);
  }

  /**
   * Synchronous append in its own transaction (after committing anything already queued, to keep
   * call order). For tools and benchmarks; the server should use `append` to get group commit.
   */
  appendNow(streamId: string, events: NewEvent[], options: AppendOptions): AppendResult {
    return this.writes.appendNow(streamId, events, options);
  }

  readStream(streamId: string, fromVersion = 0, limit?: number): RecordedEvent[] {
    return this.reader.readStream(streamId, fromVersion, limit);
  }

  readAll(afterPosition = 0, limit = Number.POSITIVE_INFINITY): Generator<RecordedEvent> {
    return this.reader.readAll(afterPosition, limit);
  }

  /**
   * Every event after `afterPosition`, in order, for folding (projection rebuild and catch-up):
   * the same events as `readAll`, as StoredRecords — `metadata` parsed on first read, `prevHash`
   * and `hash` loaded on first read (while the store is open). Read in pages through a read-only,
   * memory-mapped connection of its own. See fold-read.ts for why and what it saves.
   *
   * `thread`: read SQLite on a worker thread, pipelined with the caller's fold
   * (fold-reader-thread.ts). Default: when the store is a file, the machine has more than one
   * core and more than 50,000 events are to be read (starting a thread costs tens of ms). It takes
   * more CPU in all (~220k vs ~280k rebuilt events per CPU-second) for less wall time when a
   * second core is free (~350–400k vs ~280k events/s over the soak-shaped log, bounded by the
   * reader thread). Long rebuilds and catch-ups are split by stream instead (`foldPartitions`,
   * projections/partitioned-rebuild.ts).
   */
  readAllForFold(afterPosition = 0, options: { thread?: boolean } = {}): Generator<StoredRecord> {
    return this.reader.readAllForFold(afterPosition, options);
  }

  /**
   * The log as of now, for a fold split by stream over threads (projections/partitioned-rebuild.ts):
   * its tail and streams, and this thread's partition read on the fold connection. Undefined for
   * `:memory:` (other threads cannot open it).
   */
  foldPartitions(): PartitionableLog | undefined {
    return this.reader.foldPartitions();
  }

  lastPosition(): number {
    return this.writes.lastPosition();
  }

  streamVersion(streamId: string): number {
    return this.writes.committedVersion(streamId);
  }

  subscribe(afterPosition = 0): Observable<RecordedEvent> {
    return this.reader.subscribe(afterPosition);
  }

  /**
   * `listener` runs synchronously right after each transaction commits, with that transaction's
   * events in position order, before any caller's promise resolves. Keep it cheap: it sits on
   * the write path. Returns an unsubscribe function.
   */
  onCommit(listener: CommitListener): () => void {
    return this.writes.onCommit(listener);
  }

  stats(): StoreStats {
    return this.writes.stats();
  }

  /** The writer thread's Linux thread id, when commits run on one (CPU accounting per thread). */
  get writerThreadId(): number | undefined {
    return this.writes.writerThreadId;
  }

  /**
   * Stores a projection checkpoint (overwrites the previous one of that name). Not an event.
   * Written in place at once; with `soon`, as saveCheckpointSoon. Rejects with RangeError if
   * `position` is beyond the log.
   */
  saveCheckpoint(name: string, position: number, state: unknown, options: { soon?: boolean } = {}): Promise<void> {
    try {
      if (options.soon) return this.checkpoints.saveSoon(name, position, state);
      this.checkpoints.saveNow(name, position, state);
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Like saveCheckpoint, for a running server, without waiting: written by the writer thread with
   * the next batch (sqlite/checkpoints.ts says why). Throws if `position` is beyond the log; a
   * write that fails later is a process warning (the next start then catches up further).
   */
  saveCheckpointSoon(name: string, position: number, state: unknown): void {
    void this.checkpoints.saveSoon(name, position, state).catch((error: unknown) => {
      process.emitWarning(`projection checkpoint ${name} not written: ${(error as Error).message}`, 'EventStoreWarning');
    });
  }

  /**
   * The checkpoint of that name, or undefined when absent or when it does not belong to this
   * log (the event at its position has another hash): the projection then rebuilds from 0.
   */
  loadCheckpoint<S = unknown>(name: string): Checkpoint<S> | undefined {
    return this.checkpoints.get<S>(name);
  }

  /** Waits for pending commits, then closes the database. */
  async close(): Promise<void> {
    if (this.writes.closed) return;
    this.writes.close();
    this.reader.close();
    this.db.close();
  }
}
