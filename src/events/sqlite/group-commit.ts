/**
 * The SQLite log's write path: appends queue for the next group commit (one transaction, one
 * fsync), positions, versions and the hash chain are decided here, and the batch is written
 * in-thread or by the writer thread (writer.ts). After each commit: the cached tail and stream
 * heads, the counters, the commit listeners and live subscriptions, then the appenders' promises.
 */
import type Database from 'better-sqlite3';
import type { Observable } from 'rxjs';
import type { NewEvent, RecordedEvent } from '../envelope.js';
import { EventStoreClosedError } from '../errors.js';
import type { AppendOptions, AppendResult, CommitListener, StoreStats } from '../store.js';
import { GroupSchedule } from '../group-schedule.js';
import { decideBatch, sealBatch, type LogTail, type SealedBatch } from './batch.js';
import { CommitNotifier } from './commit-notifier.js';
import { writeDueCheckpointRow, type CheckpointRow, type DueCheckpoint } from './due-checkpoint.js';
import { chainWrittenHashes, type InFlightBatch } from './in-flight-batch.js';
import { checkExpected, prepareEvents, recordOf, type PendingAppend } from './prepare.js';
import { prepareWriteStatements, readTail, type WriteStatements } from './write-statements.js';
import { SqliteWriter, type WriteReply } from './writer.js';

// checkpoints.ts (and anyone else) keeps importing the row type from here.
export type { CheckpointRow } from './due-checkpoint.js';

export interface GroupCommitOptions {
  maxBatchEvents: number;
  busyTimeoutMs: number;
  now: () => Date;
  onListenerError: (error: unknown) => void;
  writerThread: boolean;
}

/**
 * One writer process per file: positions and the hash chain are assigned here. (A foreign commit
 * is noticed at the next batch and caches are reloaded, so the chain stays consistent, but live
 * subscriptions only hear about this process's commits.)
 */
export class SqliteGroupCommit {
  /** When batches are formed; the queue of appends waiting for one. */
  private readonly schedule: GroupSchedule<PendingAppend>;
  private readonly writer: SqliteWriter | undefined;
  private inFlight: InFlightBatch | undefined;
  /** A checkpoint waiting for the writer thread (checkpointSoon). */
  private checkpointDue: DueCheckpoint | undefined;
  private batchIds = 0;
  private closedFlag = false;
  private lastPos: number;
  private lastHash: string;
  /** Committed stream heads; filled lazily from the streams table. */
  private readonly versions = new Map<string, number>();
  /** Counters, commit listeners and live subscriptions. */
  private readonly notifier: CommitNotifier;
  private readonly stmt: WriteStatements;

  constructor(
    private readonly db: Database.Database,
    file: string,
    private readonly opts: GroupCommitOptions,
  ) {
    this.notifier = new CommitNotifier((error) => this.opts.onListenerError(error));
    this.stmt = prepareWriteStatements(db);
    const tail = readTail(this.stmt);
    this.lastPos = tail.pos;
    this.lastHash = tail.hash;
    this.schedule = new GroupSchedule({
      maxBatchEvents: opts.maxBatchEvents,
      // One batch on the writer thread at a time; what queues (and stays staged) meanwhile is the next batch.
      held: () => this.closedFlag || (this.writer !== undefined && this.inFlight !== undefined),
      flush: () => this.flush(),
    });
    this.writer = opts.writerThread ? new SqliteWriter(file, opts.busyTimeoutMs, (reply) => this.written(reply)) : undefined;
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  /** Batches of committed records, in position order (what live subscriptions follow). */
  get commits(): Observable<RecordedEvent[]> {
    return this.notifier.commits;
  }

  get hasWriterThread(): boolean {
    return this.writer !== undefined;
  }

  /** The writer thread's Linux thread id, when commits run on one. */
  get writerThreadId(): number | undefined {
    return this.writer?.threadId;
  }

  lastPosition(): number {
    return this.lastPos;
  }

  stats(): StoreStats {
    return this.notifier.stats();
  }

  onCommit(listener: CommitListener): () => void {
    return this.notifier.onCommit(listener);
  }

  /**
   * Queues the append for the next group commit (scheduled with setImmediate, so every append
   * issued in this event-loop turn shares one transaction and one fsync). Resolves after commit;
   * a version conflict rejects this call only, with WrongExpectedVersionError.
   */
  append(streamId: string, events: NewEvent[], options: AppendOptions): Promise<AppendResult> {
    if (this.closedFlag) return Promise.reject(new EventStoreClosedError());
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
    this.schedule.add(pending!, options.withinMs);
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
    if (this.closedFlag) throw new EventStoreClosedError();
    this.schedule.stage(take, opts.withinMs);
  }

  /**
   * Synchronous append in its own transaction (after committing anything already queued, to keep
   * call order). For tools and benchmarks; the server should use `append` to get group commit.
   */
  appendNow(streamId: string, events: NewEvent[], options: AppendOptions): AppendResult {
    if (this.closedFlag) throw new EventStoreClosedError();
    // Committing from inside a commit notification would hand later listeners batches out of
    // position order; listeners that need to write use `append`, which queues.
    if (this.notifier.notifying) throw new Error('appendNow cannot be called from a commit listener; use append');
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

  /** Writes a checkpoint row now, in its own statement (no writer thread involved). */
  writeCheckpointNow(row: CheckpointRow): void {
    this.stmt.saveCheckpoint.run(...row);
  }

  /**
   * Hands a checkpoint row to the writer thread, to be written with the next batch (alone when
   * nothing else is queued). A later call before the write replaces the earlier row; both callers
   * hear when the later one is written. Needs a writer thread.
   */
  checkpointSoon(row: CheckpointRow): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiters = this.checkpointDue?.waiters ?? [];
      waiters.push({ resolve, reject });
      this.checkpointDue = { row, waiters };
      this.schedule.soon();
    });
  }

  /** Current committed version of a stream (-1 when absent), cached once read. */
  committedVersion(streamId: string): number {
    let v = this.versions.get(streamId);
    if (v === undefined) {
      v = (this.stmt.streamHead.get(streamId) as number | undefined) ?? -1;
      this.versions.set(streamId, v);
    }
    return v;
  }

  /** Commits everything queued (and a due checkpoint), ends the writer thread; no append after. */
  close(): void {
    if (this.closedFlag) return;
    this.drain();
    this.writer?.close();
    this.closedFlag = true;
    this.notifier.complete();
  }

  /** Forms a batch (the schedule ran the staged callbacks) and writes it. */
  private flush(): void {
    const queue = this.schedule.queue;
    if (queue.length === 0 && !this.checkpointDue) return;
    if (this.writer) {
      this.sendBatch(this.schedule.takeBatch());
      return;
    }
    this.commitBatch(this.schedule.takeBatch());
    // Leftovers (over maxBatchEvents) go next turn, letting this batch's callers run first.
    if (queue.length > 0) this.schedule.soon();
  }

  /** Commits everything queued, now. */
  private drain(): void {
    this.writer?.waitSync();
    this.schedule.takeStaged();
    this.schedule.cancel();
    while (this.schedule.queue.length > 0) this.commitBatch(this.schedule.takeBatch());
    this.writeDueCheckpoint();
  }

  /** A checkpoint the writer thread did not get to write (closing, or its batch was redone here). */
  private writeDueCheckpoint(checkpoint = this.checkpointDue): void {
    if (checkpoint === this.checkpointDue) this.checkpointDue = undefined;
    if (!checkpoint) return;
    writeDueCheckpointRow(this.stmt.saveCheckpoint, checkpoint);
  }

  private commitBatch(batch: PendingAppend[]): void {
    let sealed: SealedBatch;
    let failing = -1;
    try {
      this.stmt.begin.run();
      this.syncTail();
      sealed = sealBatch(batch, this.tail(), (row, i) => {
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
        this.schedule.retry(batch.filter((_, i) => i !== failing));
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
    this.notifier.publish(committed);
    this.notifier.settle(batch, outcomes);
  }

  /**
   * Writer-thread path: decides versions, positions and hashes here (this process is the only
   * writer; a foreign commit makes the writer refuse the batch, which is then redone in-thread),
   * and hands the rows to the writer thread.
   */
  private sendBatch(batch: PendingAppend[]): void {
    const rows: unknown[][] = [];
    // Records leave here without their hashes: the writer thread chains them and answers them.
    const sealed = decideBatch(batch, this.tail(), (e, streamId, pos, version, time) => {
      rows.push([pos, streamId, version, e.type, e.schemaVersion, e.dataJson, e.metadataJson, time]);
      return recordOf(e, streamId, pos, version, time, '', '');
    });
    const id = ++this.batchIds;
    const checkpoint = this.checkpointDue;
    this.checkpointDue = undefined;
    this.inFlight = { id, batch, ...sealed, ...(checkpoint ? { checkpoint } : {}) };
    this.writer!.write({ id, lastPos: this.lastPos, lastHash: this.lastHash, rows, heads: [...sealed.heads], ...(checkpoint ? { checkpoint: checkpoint.row } : {}) });
  }

  /** The writer thread answered the batch under way. */
  private written(reply: WriteReply): void {
    const f = this.inFlight;
    if (!f || f.id !== reply.id) return;
    this.inFlight = undefined;
    if (reply.ok) {
      const hash = chainWrittenHashes(f.committed, this.lastHash, reply.hashes);
      this.finishCommit(f.batch, f.outcomes, f.committed, f.heads, f.pos, hash);
      if (f.checkpoint) for (const w of f.checkpoint.waiters) w.resolve();
    }
    // Another connection wrote first, or a row failed: redo the batch in-thread, which reloads the
    // tail and isolates a failing append exactly as before (and the checkpoint is written here).
    else {
      if (f.batch.length > 0) this.commitBatch(f.batch);
      if (f.checkpoint) {
        // A newer checkpoint already due replaces this one; its callers wait for that one.
        if (this.checkpointDue) this.checkpointDue.waiters.push(...f.checkpoint.waiters);
        else this.writeDueCheckpoint(f.checkpoint);
      }
    }
    this.schedule.next(this.checkpointDue !== undefined);
  }

  /** The committed tail a batch is sealed after. */
  private tail(): LogTail {
    return { pos: this.lastPos, hash: this.lastHash, time: this.opts.now().toISOString(), versionOf: (streamId) => this.committedVersion(streamId) };
  }

  /** Inside the write transaction: if another connection appended, reload what we cached. */
  private syncTail(): void {
    const { pos, hash } = readTail(this.stmt);
    if (pos === this.lastPos && hash === this.lastHash) return;
    this.lastPos = pos;
    this.lastHash = hash;
    this.versions.clear();
  }
}
