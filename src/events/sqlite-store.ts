import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { Observable, Subject } from 'rxjs';
import type { EventMetadata, NewEvent, RecordedEvent } from './envelope.js';
import type { AppendOptions, AppendResult, EventStore, ExpectedVersion } from './store.js';
import type { Checkpoint, CheckpointStore, CommitListener, CommitNotifier } from './capabilities.js';
import { canonicalJson, canonicalJsonByWalk, isCanonicalPlain } from './canonical-json.js';
import { EventStoreClosedError, WrongExpectedVersionError } from './errors.js';
import { eventHash } from './hash.js';
import { ensureGuards } from './guards.js';
import { migrate } from './migrations.js';
import { EVENT_COLUMNS, decodeRow, type EventRow } from './rows.js';
import { FOLD_COLUMNS, StoredRecord, type FoldRow, type HashLoader } from './fold-read.js';
import { readAllOnThread } from './fold-reader-thread.js';
import { FOLD_MMAP_BYTES, openFoldConnection, readFoldSource, readPartition, type PartitionableLog } from './fold-partition.js';
import { SqliteWriter, type WriteReply } from './sqlite-writer.js';

export { eventsFile } from './storage-path.js';
export type { Checkpoint, CheckpointStore, CommitListener, CommitNotifier } from './capabilities.js';

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

export interface StoreStats {
  /** Write transactions committed (one fsync each). */
  commits: number;
  /** append/appendNow calls that committed. */
  appends: number;
  events: number;
  /** Appends rejected with WrongExpectedVersionError. */
  conflicts: number;
}


/** An append validated and serialized up front, so bad input rejects only its own caller. */
interface PreparedEvent {
  type: string;
  schemaVersion: number;
  dataJson: string;
  metadataJson: string;
  /**
   * The appended values themselves when their text parses back to an equal value (plain data in
   * canonical key order, as the request path builds them): the record shares them instead of
   * parsing the text again (two parses and ~1 KB of garbage per request). Appended events are not
   * changed afterwards by their callers, so sharing is safe.
   */
  data: unknown;
  metadata: EventMetadata | undefined;
}

interface PendingAppend {
  streamId: string;
  expected: ExpectedVersion;
  events: PreparedEvent[];
  resolve(result: AppendResult): void;
  reject(error: unknown): void;
}

/**
 * Seals one event at its place in the log: the hash-chained row to store, and the record callers
 * get, parsed back from the stored text so live records look exactly like replayed ones.
 */
function seal(e: PreparedEvent, streamId: string, position: number, streamVersion: number, time: string, prevHash: string): { row: EventRow; record: RecordedEvent } {
  const hash = eventHash(prevHash, { position, streamId, streamVersion, type: e.type, schemaVersion: e.schemaVersion, dataJson: e.dataJson, metadataJson: e.metadataJson, time });
  return {
    row: [position, streamId, streamVersion, e.type, e.schemaVersion, e.dataJson, e.metadataJson, time, prevHash, hash],
    record: recordOf(e, streamId, position, streamVersion, time, prevHash, hash),
  };
}

function recordOf(e: PreparedEvent, streamId: string, position: number, streamVersion: number, time: string, prevHash: string, hash: string): RecordedEvent {
  return {
    position,
    streamId,
    streamVersion,
    type: e.type,
    schemaVersion: e.schemaVersion,
    data: e.data !== undefined ? e.data : JSON.parse(e.dataJson),
    metadata: e.metadata !== undefined ? e.metadata : (JSON.parse(e.metadataJson) as EventMetadata),
    time,
    prevHash,
    hash,
  };
}

/** Rows per page when reading: big enough to amortize the query, small enough to stay lazy. */
const PAGE_SIZE = 2_000;
/** Above this many events to read, readAllForFold reads on a worker thread by default. */
const FOLD_THREAD_MIN_EVENTS = 50_000;

/**
 * Opens (creating if needed, mode 700 for the directory) and migrates an event log.
 * Journal is WAL with `synchronous=FULL`: each commit is fsynced before any caller hears of it.
 */
export function openSqliteEventStore(filePath: string, opts: SqliteEventStoreOptions = {}): SqliteEventStore {
  if (filePath !== ':memory:') {
    mkdirSync(dirname(filePath), { recursive: true, mode: 0o700 });
    ownerOnly(filePath);
  }
  const db = new Database(filePath, { timeout: opts.busyTimeoutMs ?? 5_000 });
  try {
    db.pragma('journal_mode = WAL');
    // better-sqlite3 is built with SQLITE_DEFAULT_WAL_SYNCHRONOUS=1 (NORMAL): no fsync per commit.
    db.pragma('synchronous = FULL');
    migrate(db);
    ensureGuards(db);
  } catch (error) {
    db.close();
    throw error;
  }
  return new SqliteEventStore(db, filePath, { ...opts, writerThread: filePath !== ':memory:' && opts.writerThread !== false, busyTimeoutMs: opts.busyTimeoutMs ?? 5_000 });
}

/**
 * Mode 600 for the log and its -wal/-shm files (issue 39): created so before SQLite opens it (SQLite
 * gives -wal and -shm the database file's mode), and a log created 644 by an older version is
 * narrowed. Best effort: a file we may not chmod is left as it is.
 */
function ownerOnly(filePath: string): void {
  try {
    closeSync(openSync(filePath, 'a', 0o600));
  } catch {
    // SQLite's own open reports an unusable path.
  }
  for (const f of [filePath, `${filePath}-wal`, `${filePath}-shm`]) {
    try {
      chmodSync(f, 0o600);
    } catch {
      // absent (-wal/-shm before the first write) or not ours
    }
  }
}

/** A batch prepared on the main thread and being written by the writer thread. */
/** A batch sealed after the log's tail: the appends' outcomes, their records, stream heads, new tail. */
interface SealedBatch {
  outcomes: (AppendResult | Error)[];
  committed: RecordedEvent[];
  heads: Map<string, number>;
  pos: number;
  hash: string;
}

interface InFlightBatch extends SealedBatch {
  id: number;
  batch: PendingAppend[];
  checkpoint?: [string, number, string, string];
}

/**
 * The event log on better-sqlite3. One writer process per file: positions and the hash chain are
 * assigned here. (A foreign commit is noticed at the next batch and caches are reloaded, so the
 * chain stays consistent, but live subscriptions only hear about this process's commits.)
 */
export class SqliteEventStore implements EventStore, CommitNotifier, CheckpointStore {
  readonly file: string;
  private readonly db: Database.Database;
  private readonly maxBatchEvents: number;
  private readonly now: () => Date;
  private readonly onListenerError: (error: unknown) => void;

  private queue: PendingAppend[] = [];
  /** Callbacks to run right before the next batch is formed (stageForNextBatch). */
  private readonly stagers = new Set<() => void>();
  private flushHandle: NodeJS.Immediate | undefined;
  /** The deadline of deferred work (appends and staged callbacks given `withinMs`) while no flush is scheduled. */
  private deferTimer: NodeJS.Timeout | undefined;
  /** The queue holds an append that was not deferred (or a leftover of a flushed batch): commit it next. */
  private urgent = false;
  private readonly writer: SqliteWriter | undefined;
  private inFlight: InFlightBatch | undefined;
  /** A checkpoint waiting for the writer thread (saveCheckpointSoon). */
  private checkpointDue: [string, number, string, string] | undefined;
  private batchIds = 0;
  private closed = false;
  /** True while commit listeners and subscribers run; see appendNow. */
  private notifying = false;
  private lastPos: number;
  private lastHash: string;
  /** Committed stream heads; filled lazily from the streams table. */
  private readonly versions = new Map<string, number>();
  private readonly listeners = new Set<CommitListener>();
  private readonly committed$ = new Subject<RecordedEvent[]>();
  private readonly counters: StoreStats = { commits: 0, appends: 0, events: 0, conflicts: 0 };
  /** readAllForFold's own read-only connection (opened on first use; the main one for `:memory:`). */
  private foldReader: { db: Database.Database; page: Database.Statement; hashes: HashLoader } | undefined;

  private readonly stmt: {
    begin: Database.Statement;
    commit: Database.Statement;
    rollback: Database.Statement;
    tail: Database.Statement;
    streamHead: Database.Statement;
    upsertStream: Database.Statement;
    insert: Database.Statement;
    page: Database.Statement;
    stream: Database.Statement;
    hashAt: Database.Statement;
    saveCheckpoint: Database.Statement;
    loadCheckpoint: Database.Statement;
  };

  /** Use openSqliteEventStore; this assumes a migrated connection. */
  constructor(db: Database.Database, file: string, opts: SqliteEventStoreOptions = {}) {
    this.db = db;
    this.file = file;
    this.maxBatchEvents = Math.max(1, opts.maxBatchEvents ?? 10_000);
    this.now = opts.now ?? (() => new Date());
    this.onListenerError =
      opts.onListenerError ??
      ((error) => process.emitWarning(`event store commit listener threw: ${String(error)}`, 'EventStoreWarning'));
    this.stmt = {
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      tail: db.prepare('SELECT position, hash FROM events ORDER BY position DESC LIMIT 1').raw(),
      streamHead: db.prepare('SELECT version FROM streams WHERE stream_id = ?').pluck(),
      upsertStream: db.prepare(
        'INSERT INTO streams (stream_id, version) VALUES (?, ?) ON CONFLICT (stream_id) DO UPDATE SET version = excluded.version',
      ),
      insert: db.prepare(`INSERT INTO events (${EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
      page: db.prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT ?`).raw(),
      stream: db
        .prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE stream_id = ? AND stream_version >= ? ORDER BY stream_version LIMIT ?`)
        .raw(),
      hashAt: db.prepare('SELECT hash FROM events WHERE position = ?').pluck(),
      saveCheckpoint: db.prepare(
        'INSERT INTO checkpoints (name, position, state, hash) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET position = excluded.position, state = excluded.state, hash = excluded.hash',
      ),
      loadCheckpoint: db.prepare('SELECT name, position, state, hash FROM checkpoints WHERE name = ?').raw(),
    };
    const tail = this.stmt.tail.get() as [number, string] | undefined;
    this.lastPos = tail?.[0] ?? 0;
    this.lastHash = tail?.[1] ?? '';
    this.writer = opts.writerThread ? new SqliteWriter(file, opts.busyTimeoutMs ?? 5_000, (reply) => this.written(reply)) : undefined;
  }

  /**
   * Queues the append for the next group commit (scheduled with setImmediate, so every append
   * issued in this event-loop turn shares one transaction and one fsync). Resolves after commit;
   * a version conflict rejects this call only, with WrongExpectedVersionError.
   */
  append(streamId: string, events: NewEvent[], options: AppendOptions): Promise<AppendResult> {
    if (this.closed) return Promise.reject(new EventStoreClosedError());
    let pending: PendingAppend;
    const promise = new Promise<AppendResult>((resolve, reject) => {
      pending = { streamId, expected: options.expectedVersion, events: [], resolve, reject };
    });
    try {
      checkExpected(options.expectedVersion);
      pending!.events = prepareEvents(streamId, events);
    } catch (error) {
      return Promise.reject(error);
    }
    this.queue.push(pending!);
    if ((options.withinMs ?? 0) > 0) this.defer(options.withinMs!);
    else {
      this.urgent = true;
      this.flushHandle ??= setImmediate(() => this.flush());
    }
    return promise;
  }

  /**
   * Runs `take` right before the next batch is formed (once, however often it is staged before
   * that), so appends it makes join that batch. Lets a caller gather what it would append for as
   * long as the writer is busy and append it as late as possible: the engine records one escrow's
   * chat starts and ends of a batch as one event (engine.ts, InferencesRecorded).
   *
   * `withinMs` (> 0): no batch is formed for this alone before that many milliseconds have passed;
   * any other append's batch takes it sooner. For records no caller waits on, so that many of
   * them share one commit (fewer fsyncs and writer round trips per request).
   */
  stageForNextBatch(take: () => void, opts: { withinMs?: number } = {}): void {
    if (this.closed) throw new EventStoreClosedError();
    this.stagers.add(take);
    const within = opts.withinMs ?? 0;
    if (within > 0) this.defer(within);
    else this.flushHandle ??= setImmediate(() => this.flush());
  }

  /** Deferred work waits at most `ms` for a batch, unless one is already scheduled. */
  private defer(ms: number): void {
    if (!this.flushHandle) this.deferTimer ??= setTimeout(() => this.deferDue(), ms);
  }

  /** The deferred work's deadline passed: form a batch (or, while one is being written, right after it). */
  private deferDue(): void {
    this.deferTimer = undefined;
    if (!this.closed) this.flushHandle ??= setImmediate(() => this.flush());
  }

  /** Runs the staged callbacks (their appends queue up). */
  private takeStaged(): void {
    if (this.deferTimer) {
      clearTimeout(this.deferTimer);
      this.deferTimer = undefined;
    }
    if (this.stagers.size === 0) return;
    const takes = [...this.stagers];
    this.stagers.clear();
    for (const take of takes) take();
  }

  /**
   * Synchronous append in its own transaction (after committing anything already queued, to keep
   * call order). For tools and benchmarks; the server should use `append` to get group commit.
   */
  appendNow(streamId: string, events: NewEvent[], options: AppendOptions): AppendResult {
    if (this.closed) throw new EventStoreClosedError();
    // Committing from inside a commit notification would hand later listeners batches out of
    // position order; listeners that need to write use `append`, which queues.
    if (this.notifying) throw new Error('appendNow cannot be called from a commit listener; use append');
    checkExpected(options.expectedVersion);
    const prepared = prepareEvents(streamId, events);
    this.drain();
    let outcome: { ok: true; result: AppendResult } | { ok: false; error: unknown } | undefined;
    this.commitBatch([
      {
        streamId,
        expected: options.expectedVersion,
        events: prepared,
        resolve: (result) => (outcome = { ok: true, result }),
        reject: (error) => (outcome = { ok: false, error }),
      },
    ]);
    if (!outcome) throw new Error('appendNow: append was not settled'); // unreachable: batch of one
    if (!outcome.ok) throw outcome.error;
    return outcome.result;
  }

  readStream(streamId: string, fromVersion = 0, limit?: number): RecordedEvent[] {
    return (this.stmt.stream.all(streamId, fromVersion, limit ?? -1) as EventRow[]).map(decodeRow);
  }

  /**
   * Lazily yields events after `afterPosition`. Reads in pages rather than holding one
   * `.iterate()` cursor open: an open cursor makes the connection "busy", and a group commit
   * firing while a consumer is still iterating would then fail.
   */
  *readAll(afterPosition = 0, limit = Number.POSITIVE_INFINITY): Generator<RecordedEvent> {
    let after = afterPosition;
    let left = limit;
    while (left > 0 && !this.closed) {
      const n = Math.min(PAGE_SIZE, left);
      const rows = this.stmt.page.all(after, n) as EventRow[];
      for (const row of rows) yield decodeRow(row);
      if (rows.length < n) return;
      after = rows[rows.length - 1]![0];
      left -= rows.length;
    }
  }

  /**
   * Every event after `afterPosition`, in order, for folding (projection rebuild and catch-up):
   * the same events as `readAll`, as StoredRecords — `metadata` parsed on first read, `prevHash`
   * and `hash` loaded on first read (while the store is open). Read in pages through a read-only,
   * memory-mapped connection of its own. See fold-read.ts for why and what it saves.
   *
   * `thread`: read SQLite on a worker thread, pipelined with the caller's fold
   * (fold-reader-thread.ts). Default: when the store is a file, the machine has more than one
   * core and more than FOLD_THREAD_MIN_EVENTS events are to be read (starting a thread costs tens
   * of ms). It takes more CPU in all (~220k vs ~280k rebuilt events per CPU-second) for less wall
   * time when a second core is free (~350–400k vs ~280k events/s over the soak-shaped log, bounded by
   * the reader thread). Long rebuilds and catch-ups are split by stream instead
   * (`foldPartitions`, projections/partitioned-rebuild.ts).
   */
  *readAllForFold(afterPosition = 0, options: { thread?: boolean } = {}): Generator<StoredRecord> {
    const { page, hashes } = (this.foldReader ??= this.openFoldReader());
    const thread = this.file !== ':memory:' && (options.thread ?? (availableParallelism() > 1 && this.lastPos - afterPosition > FOLD_THREAD_MIN_EVENTS));
    if (thread) {
      yield* readAllOnThread(this.file, afterPosition, PAGE_SIZE, FOLD_MMAP_BYTES, hashes);
      return;
    }
    let after = afterPosition;
    while (!this.closed) {
      const rows = page.all(after, PAGE_SIZE) as FoldRow[];
      for (let i = 0; i < rows.length; i++) yield StoredRecord.fromRow(rows[i]!, hashes);
      if (rows.length < PAGE_SIZE) return;
      after = rows[rows.length - 1]![0];
    }
  }

  /**
   * The log as of now, for a fold split by stream over threads (projections/partitioned-rebuild.ts):
   * its tail and streams, and this thread's partition read on the fold connection. Undefined for
   * `:memory:` (other threads cannot open it).
   */
  foldPartitions(): PartitionableLog | undefined {
    if (this.file === ':memory:') return undefined;
    const { db } = (this.foldReader ??= this.openFoldReader());
    return { file: this.file, ...readFoldSource(db), read: (read) => readPartition(db, read) };
  }

  private openFoldReader(): NonNullable<SqliteEventStore['foldReader']> {
    const hashAt = this.db.prepare('SELECT prev_hash, hash FROM events WHERE position = ?').raw();
    const hashes: HashLoader = (position) => {
      const row = hashAt.get(position) as [string, string] | undefined;
      if (!row) throw new Error(`no event at position ${position}`);
      return { prevHash: row[0], hash: row[1] };
    };
    const db = this.file === ':memory:' ? this.db : openFoldConnection(this.file);
    const page = db.prepare(`SELECT ${FOLD_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT ?`).raw();
    return { db, page, hashes };
  }

  lastPosition(): number {
    return this.lastPos;
  }

  streamVersion(streamId: string): number {
    return this.committedVersion(streamId);
  }

  /**
   * Catch-up then live: pages of the table (one page per event-loop turn, so a long catch-up does
   * not starve the server), then every later commit. Commits that land during catch-up are read
   * from the table; once caught up, live batches are emitted, skipping anything already emitted
   * and filling any hole from the table, so each event arrives once and in order.
   */
  subscribe(afterPosition = 0): Observable<RecordedEvent> {
    return new Observable<RecordedEvent>((subscriber) => {
      let last = afterPosition;
      let live = false;
      let timer: NodeJS.Immediate | undefined;
      const emitFromTable = (upTo: number): void => {
        while (last < upTo && !subscriber.closed) {
          const rows = this.stmt.page.all(last, Math.min(PAGE_SIZE, upTo - last)) as EventRow[];
          if (rows.length === 0) return;
          for (const row of rows) {
            subscriber.next(decodeRow(row));
            last = row[0];
            if (subscriber.closed) return;
          }
        }
      };
      const liveSub = this.committed$.subscribe({
        next: (batch) => {
          if (!live) return; // the catch-up loop will read these rows
          for (const record of batch) {
            if (subscriber.closed) return;
            if (record.position <= last) continue;
            if (record.position > last + 1) emitFromTable(record.position - 1);
            subscriber.next(record);
            last = record.position;
          }
        },
        complete: () => subscriber.complete(),
      });
      const catchUp = (): void => {
        timer = undefined;
        if (subscriber.closed) return;
        if (this.closed) return subscriber.complete();
        const rows = this.stmt.page.all(last, PAGE_SIZE) as EventRow[];
        for (const row of rows) {
          subscriber.next(decodeRow(row));
          last = row[0];
          if (subscriber.closed) return;
        }
        // A short page means we hold everything committed so far (commits are synchronous, so
        // none can slip in between that read and this flag).
        if (rows.length < PAGE_SIZE) live = true;
        else timer = setImmediate(catchUp);
      };
      catchUp();
      return () => {
        liveSub.unsubscribe();
        if (timer) clearImmediate(timer);
      };
    });
  }

  /**
   * `listener` runs synchronously right after each transaction commits, with that transaction's
   * events in position order, before any caller's promise resolves. Keep it cheap: it sits on
   * the write path. Returns an unsubscribe function.
   */
  onCommit(listener: CommitListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  stats(): StoreStats {
    return { ...this.counters };
  }

  /** The writer thread's Linux thread id, when commits run on one (CPU accounting per thread). */
  get writerThreadId(): number | undefined {
    return this.writer?.threadId;
  }

  /**
   * Stores a projection checkpoint (overwrites the previous one of that name). Not an event.
   * Throws if `position` is beyond the log.
   */
  saveCheckpoint(name: string, position: number, state: unknown): void {
    if (this.closed) throw new EventStoreClosedError();
    const hash = this.hashAt(position);
    if (hash === undefined) throw new RangeError(`checkpoint ${name}: no event at position ${position}`);
    this.stmt.saveCheckpoint.run(name, position, canonicalJson(state, `checkpoint ${name}`), hash);
  }

  /**
   * Like saveCheckpoint, for a running server: the state is serialized here (JSON.stringify, a
   * few times faster than canonical JSON on megabytes; readers parse it either way) and written by
   * the writer thread with the next batch, so neither the canonical walk nor the fsync blocks the
   * event loop (measured 20–30 ms per checkpoint in place, ~3 ms this way). Without a writer
   * thread it is saveCheckpoint. A later call before the write replaces the earlier state.
   */
  saveCheckpointSoon(name: string, position: number, state: unknown): void {
    if (!this.writer) return this.saveCheckpoint(name, position, state);
    if (this.closed) throw new EventStoreClosedError();
    const hash = this.hashAt(position);
    if (hash === undefined) throw new RangeError(`checkpoint ${name}: no event at position ${position}`);
    this.checkpointDue = [name, position, JSON.stringify(state), hash];
    this.flushHandle ??= setImmediate(() => this.flush());
  }

  /**
   * The checkpoint of that name, or undefined when absent or when it does not belong to this
   * log (the event at its position has another hash): the projection then rebuilds from 0.
   */
  loadCheckpoint<S = unknown>(name: string): Checkpoint<S> | undefined {
    const row = this.stmt.loadCheckpoint.get(name) as [string, number, string, string] | undefined;
    if (!row) return undefined;
    if (this.hashAt(row[1]) !== row[3]) return undefined;
    return { name: row[0], position: row[1], state: JSON.parse(row[2]) as S, hash: row[3] };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.drain();
    this.writer?.close();
    this.closed = true;
    this.committed$.complete();
    if (this.foldReader && this.foldReader.db !== this.db) this.foldReader.db.close();
    this.db.close();
  }

  // ---- write path -------------------------------------------------------------------------

  private flush(): void {
    this.flushHandle = undefined;
    if (this.closed) return;
    // One batch on the writer thread at a time; what queues (and stays staged) meanwhile is the next batch.
    if (this.writer && this.inFlight) return;
    this.takeStaged();
    if (this.flushHandle) {
      // The staged appends scheduled a flush of their own: this one takes them.
      clearImmediate(this.flushHandle);
      this.flushHandle = undefined;
    }
    if (this.queue.length === 0 && !this.checkpointDue) return;
    if (this.writer) {
      this.sendBatch(this.takeBatch());
      return;
    }
    this.commitBatch(this.takeBatch());
    // Leftovers (over maxBatchEvents) go next turn, letting this batch's callers run first.
    if (this.queue.length > 0) this.flushHandle ??= setImmediate(() => this.flush());
  }

  /** Commits everything queued, now. */
  private drain(): void {
    this.writer?.waitSync();
    this.takeStaged();
    if (this.flushHandle) clearImmediate(this.flushHandle);
    this.flushHandle = undefined;
    while (this.queue.length > 0) this.commitBatch(this.takeBatch());
    this.writeDueCheckpoint();
  }

  /** A checkpoint the writer thread did not get to write (closing, or its batch was redone here). */
  private writeDueCheckpoint(checkpoint = this.checkpointDue): void {
    if (checkpoint === this.checkpointDue) this.checkpointDue = undefined;
    // Runs from the writer thread's answer too, where a throw would end the process: a checkpoint
    // that cannot be written (disk full) only means a longer catch-up at the next start.
    try {
      if (checkpoint) this.stmt.saveCheckpoint.run(...checkpoint);
    } catch (error) {
      process.emitWarning(`projection checkpoint ${checkpoint![0]} not written: ${(error as Error).message}`, 'EventStoreWarning');
    }
  }

  private takeBatch(): PendingAppend[] {
    let events = 0;
    let n = 0;
    while (n < this.queue.length) {
      events += this.queue[n]!.events.length;
      n++;
      if (events >= this.maxBatchEvents) break;
    }
    const batch = this.queue.splice(0, n);
    // What a full batch left behind was due with it: it goes next, deferred or not.
    this.urgent = this.queue.length > 0;
    return batch;
  }

  /**
   * Decides versions and seals every append of the batch after (lastPos, lastHash): positions,
   * versions, hash chain, records. `row` gets each sealed row with the index of its append, in order.
   * The in-thread commit path; the writer-thread path leaves the chain to the writer (sendBatch).
   */
  private sealBatch(batch: PendingAppend[], row: (row: EventRow, appendIndex: number) => void): SealedBatch {
    return this.decideBatch(batch, (e, streamId, pos, version, time, prevHash, i) => {
      const sealed = seal(e, streamId, pos, version, time, prevHash);
      row(sealed.row, i);
      return sealed.record;
    });
  }

  /**
   * Decides versions and positions of every append of the batch after lastPos; `make` turns each
   * event into its record (given the previous record's hash, "" when the chain is left to the
   * writer thread) and emits its row.
   */
  private decideBatch(
    batch: PendingAppend[],
    make: (e: PreparedEvent, streamId: string, pos: number, version: number, time: string, prevHash: string, appendIndex: number) => RecordedEvent,
  ): SealedBatch {
    const time = this.now().toISOString();
    const outcomes: (AppendResult | Error)[] = [];
    const committed: RecordedEvent[] = [];
    const heads = new Map<string, number>();
    let pos = this.lastPos;
    let hash = this.lastHash;
    for (let i = 0; i < batch.length; i++) {
      const item = batch[i]!;
      const actual = heads.get(item.streamId) ?? this.committedVersion(item.streamId);
      if (!versionMatches(item.expected, actual)) {
        outcomes.push(new WrongExpectedVersionError(item.streamId, item.expected, actual));
        continue;
      }
      const records: RecordedEvent[] = [];
      let version = actual;
      for (const e of item.events) {
        version++;
        pos++;
        const record = make(e, item.streamId, pos, version, time, hash, i);
        hash = record.hash;
        records.push(record);
      }
      if (version !== actual) heads.set(item.streamId, version);
      committed.push(...records);
      outcomes.push({ nextExpectedVersion: version, positions: records.map((r) => r.position), records });
    }
    return { outcomes, committed, heads, pos, hash };
  }

  private commitBatch(batch: PendingAppend[]): void {
    let sealed: SealedBatch;
    let failing = -1;
    try {
      this.stmt.begin.run();
      this.syncTail();
      sealed = this.sealBatch(batch, (row, i) => {
        failing = i;
        this.stmt.insert.run(...row);
      });
      failing = -1;
      for (const [streamId, version] of sealed.heads) this.stmt.upsertStream.run(streamId, version);
      this.stmt.commit.run();
    } catch (error) {
      if (this.db.inTransaction) this.stmt.rollback.run();
      if (failing >= 0) {
        // Only that append is at fault: reject it and retry the others in a fresh transaction.
        batch[failing]!.reject(error);
        this.queue.unshift(...batch.filter((_, i) => i !== failing));
        this.urgent = true;
        this.flushHandle ??= setImmediate(() => this.flush());
      } else {
        for (const item of batch) item.reject(error); // BEGIN/COMMIT failed (disk full, I/O...)
      }
      return;
    }

    this.finishCommit(batch, sealed.outcomes, sealed.committed, sealed.heads, sealed.pos, sealed.hash);
  }

  /** After the commit is on disk: caches, counters, listeners (in position order), then callers. */
  private finishCommit(batch: PendingAppend[], outcomes: (AppendResult | Error)[], committed: RecordedEvent[], heads: Map<string, number>, pos: number, hash: string): void {
    this.lastPos = pos;
    this.lastHash = hash;
    for (const [streamId, version] of heads) this.versions.set(streamId, version);
    this.counters.commits++;
    this.counters.events += committed.length;
    if (committed.length > 0) {
      this.notifying = true;
      try {
        for (const listener of this.listeners) {
          try {
            listener(committed);
          } catch (error) {
            this.onListenerError(error);
          }
        }
        this.committed$.next(committed);
      } finally {
        this.notifying = false;
      }
    }
    for (let i = 0; i < batch.length; i++) {
      const outcome = outcomes[i]!;
      if (outcome instanceof Error) {
        this.counters.conflicts++;
        batch[i]!.reject(outcome);
      } else {
        this.counters.appends++;
        batch[i]!.resolve(outcome);
      }
    }
  }

  /**
   * Writer-thread path: decides versions, positions and hashes here (this process is the only
   * writer; a foreign commit makes the writer refuse the batch, which is then redone in-thread),
   * and hands the rows to the writer thread.
   */
  private sendBatch(batch: PendingAppend[]): void {
    const rows: unknown[][] = [];
    // Records leave here without their hashes: the writer thread chains them and answers them.
    const sealed = this.decideBatch(batch, (e, streamId, pos, version, time) => {
      rows.push([pos, streamId, version, e.type, e.schemaVersion, e.dataJson, e.metadataJson, time]);
      return recordOf(e, streamId, pos, version, time, '', '');
    });
    const id = ++this.batchIds;
    const checkpoint = this.checkpointDue;
    this.checkpointDue = undefined;
    this.inFlight = { id, batch, ...sealed, ...(checkpoint ? { checkpoint } : {}) };
    this.writer!.write({ id, lastPos: this.lastPos, lastHash: this.lastHash, rows, heads: [...sealed.heads], ...(checkpoint ? { checkpoint } : {}) });
  }

  /** The writer thread answered the batch under way. */
  private written(reply: WriteReply): void {
    const f = this.inFlight;
    if (!f || f.id !== reply.id) return;
    this.inFlight = undefined;
    if (reply.ok) {
      // The hash chain as the writer computed and stored it, in position order.
      let prev = this.lastHash;
      for (let i = 0; i < f.committed.length; i++) {
        const r = f.committed[i]!;
        r.prevHash = prev;
        prev = r.hash = reply.hashes[i]!;
      }
      this.finishCommit(f.batch, f.outcomes, f.committed, f.heads, f.pos, prev);
    }
    // Another connection wrote first, or a row failed: redo the batch in-thread, which reloads the
    // tail and isolates a failing append exactly as before (and the checkpoint is written here).
    else {
      if (f.batch.length > 0) this.commitBatch(f.batch);
      if (f.checkpoint && !this.checkpointDue) this.writeDueCheckpoint(f.checkpoint);
    }
    // Deferred work still inside its withinMs waits for its timer; anything else goes now.
    const deferredDue = (this.queue.length > 0 || this.stagers.size > 0) && !this.deferTimer;
    if (((this.urgent && this.queue.length > 0) || deferredDue || this.checkpointDue) && !this.closed) this.flushHandle ??= setImmediate(() => this.flush());
  }

  /** Inside the write transaction: if another connection appended, reload what we cached. */
  private syncTail(): void {
    const tail = this.stmt.tail.get() as [number, string] | undefined;
    const pos = tail?.[0] ?? 0;
    const hash = tail?.[1] ?? '';
    if (pos === this.lastPos && hash === this.lastHash) return;
    this.lastPos = pos;
    this.lastHash = hash;
    this.versions.clear();
  }

  private committedVersion(streamId: string): number {
    let v = this.versions.get(streamId);
    if (v === undefined) {
      v = (this.stmt.streamHead.get(streamId) as number | undefined) ?? -1;
      this.versions.set(streamId, v);
    }
    return v;
  }

  private hashAt(position: number): string | undefined {
    if (position === 0) return '';
    return this.stmt.hashAt.get(position) as string | undefined;
  }
}

function checkExpected(expected: ExpectedVersion): void {
  if (expected === 'any' || expected === 'no-stream') return;
  if (!Number.isInteger(expected) || expected < -1) {
    throw new TypeError(`expectedVersion must be an integer >= -1, 'no-stream' or 'any' (got ${String(expected)})`);
  }
}

function versionMatches(expected: ExpectedVersion, actual: number): boolean {
  if (expected === 'any') return true;
  if (expected === 'no-stream') return actual === -1;
  return expected === actual;
}

function prepareEvents(streamId: string, events: NewEvent[]): PreparedEvent[] {
  if (typeof streamId !== 'string' || streamId.length === 0) throw new TypeError('streamId must be a non-empty string');
  if (!Array.isArray(events)) throw new TypeError('events must be an array');
  return events.map((e, i) => {
    if (typeof e.type !== 'string' || e.type.length === 0) throw new TypeError(`event[${i}].type must be a non-empty string`);
    const schemaVersion = e.schemaVersion ?? 1;
    if (!Number.isInteger(schemaVersion) || schemaVersion < 1) {
      throw new TypeError(`event[${i}].schemaVersion must be an integer >= 1`);
    }
    if (e.metadata === null || typeof e.metadata !== 'object') throw new TypeError(`event[${i}].metadata must be an object`);
    const plainData = isCanonicalPlain(e.data);
    const plainMetadata = isCanonicalPlain(e.metadata);
    return {
      type: e.type,
      schemaVersion,
      dataJson: plainData ? JSON.stringify(e.data) : canonicalJsonByWalk(e.data, `event[${i}].data`),
      metadataJson: plainMetadata ? JSON.stringify(e.metadata) : canonicalJsonByWalk(e.metadata, `event[${i}].metadata`),
      data: plainData ? e.data : undefined,
      metadata: plainMetadata ? e.metadata : undefined,
    };
  });
}
