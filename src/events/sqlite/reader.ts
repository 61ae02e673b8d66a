/**
 * Reading the SQLite log: a stream, everything after a position (lazily, in pages), the fold read
 * path (fold-read.ts, on a reader thread for long reads), the partitioned fold's view of the log,
 * and subscriptions (catch-up from the table, then live batches from the write path).
 */
import { availableParallelism } from 'node:os';
import type Database from 'better-sqlite3';
import { Observable } from 'rxjs';
import type { RecordedEvent } from '../envelope.js';
import { FOLD_COLUMNS, StoredRecord, type FoldRow, type HashLoader } from '../fold-read.js';
import { readAllOnThread } from '../fold-reader-thread.js';
import { FOLD_MMAP_BYTES, openFoldConnection, readFoldSource, readPartition, type PartitionableLog } from '../fold-partition.js';
import { EVENT_COLUMNS, decodeRow, type EventRow } from '../rows.js';

/** Rows per page when reading: big enough to amortize the query, small enough to stay lazy. */
export const PAGE_SIZE = 2_000;
/** Above this many events to read, readAllForFold reads on a worker thread by default. */
const FOLD_THREAD_MIN_EVENTS = 50_000;

/** What the reader needs of the write path: whether the store is closed, its tail, its commits. */
export interface CommittedLog {
  readonly closed: boolean;
  lastPosition(): number;
  readonly commits: Observable<RecordedEvent[]>;
}

export class SqliteReader {
  private readonly page: Database.Statement;
  private readonly stream: Database.Statement;
  /** readAllForFold's own read-only connection (opened on first use; the main one for `:memory:`). */
  private foldReader: { db: Database.Database; page: Database.Statement; hashes: HashLoader } | undefined;

  constructor(
    private readonly db: Database.Database,
    private readonly file: string,
    private readonly log: CommittedLog,
  ) {
    this.page = db.prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT ?`).raw();
    this.stream = db
      .prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE stream_id = ? AND stream_version >= ? ORDER BY stream_version LIMIT ?`)
      .raw();
  }

  readStream(streamId: string, fromVersion = 0, limit?: number): RecordedEvent[] {
    return (this.stream.all(streamId, fromVersion, limit ?? -1) as EventRow[]).map(decodeRow);
  }

  /**
   * Lazily yields events after `afterPosition`. Reads in pages rather than holding one
   * `.iterate()` cursor open: an open cursor makes the connection "busy", and a group commit
   * firing while a consumer is still iterating would then fail.
   */
  *readAll(afterPosition = 0, limit = Number.POSITIVE_INFINITY): Generator<RecordedEvent> {
    let after = afterPosition;
    let left = limit;
    while (left > 0 && !this.log.closed) {
      const n = Math.min(PAGE_SIZE, left);
      const rows = this.page.all(after, n) as EventRow[];
      for (const row of rows) yield decodeRow(row);
      if (rows.length < n) return;
      after = rows[rows.length - 1]![0];
      left -= rows.length;
    }
  }

  /** See SqliteEventStore.readAllForFold. */
  *readAllForFold(afterPosition = 0, options: { thread?: boolean } = {}): Generator<StoredRecord> {
    const { page, hashes } = (this.foldReader ??= this.openFoldReader());
    const thread = this.file !== ':memory:' && (options.thread ?? (availableParallelism() > 1 && this.log.lastPosition() - afterPosition > FOLD_THREAD_MIN_EVENTS));
    if (thread) {
      yield* readAllOnThread(this.file, afterPosition, PAGE_SIZE, FOLD_MMAP_BYTES, hashes);
      return;
    }
    let after = afterPosition;
    while (!this.log.closed) {
      const rows = page.all(after, PAGE_SIZE) as FoldRow[];
      for (let i = 0; i < rows.length; i++) yield StoredRecord.fromRow(rows[i]!, hashes);
      if (rows.length < PAGE_SIZE) return;
      after = rows[rows.length - 1]![0];
    }
  }

  /** See SqliteEventStore.foldPartitions. */
  foldPartitions(): PartitionableLog | undefined {
    if (this.file === ':memory:') return undefined;
    const { db } = (this.foldReader ??= this.openFoldReader());
    return { file: this.file, ...readFoldSource(db), read: (read) => readPartition(db, read) };
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
          const rows = this.page.all(last, Math.min(PAGE_SIZE, upTo - last)) as EventRow[];
          if (rows.length === 0) return;
          for (const row of rows) {
            subscriber.next(decodeRow(row));
            last = row[0];
            if (subscriber.closed) return;
          }
        }
      };
      const liveSub = this.log.commits.subscribe({
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
        if (this.log.closed) return subscriber.complete();
        const rows = this.page.all(last, PAGE_SIZE) as EventRow[];
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

  /** Closes the fold connection when it is one of its own. */
  close(): void {
    if (this.foldReader && this.foldReader.db !== this.db) this.foldReader.db.close();
  }

  private openFoldReader(): NonNullable<SqliteReader['foldReader']> {
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
}
