/**
 * Reading the PostgreSQL log: a stream, everything after a position (lazily, in pages), and
 * subscriptions (catch-up from the table, then live runs from CommittedLog). Reads need no care
 * about late commits: positions become visible in order (writer.ts), so "everything after p" read
 * now is a contiguous run, never a run with a hole that a slower transaction fills later.
 */
import type pg from 'pg';
import { Observable } from 'rxjs';
import type { RecordedEvent } from '../envelope.js';
import { EVENT_COLUMNS, decodeRow, type EventRow } from '../rows.js';
import type { CommittedLog } from './committed-log.js';

/** Rows per page when reading: big enough to amortize the round trip, small enough to stay lazy. */
export const PG_PAGE_SIZE = 1_000;

const PAGE_SQL = `SELECT ${EVENT_COLUMNS} FROM events WHERE position > $1 ORDER BY position LIMIT $2`;
const STREAM_SQL = `SELECT ${EVENT_COLUMNS} FROM events WHERE stream_id = $1 AND stream_version >= $2 ORDER BY stream_version LIMIT $3`;
const RANGE_SQL = `SELECT ${EVENT_COLUMNS} FROM events WHERE position > $1 AND position <= $2 ORDER BY position`;

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

/** Events after `after`, at most `limit` of them, in order. */
export async function readPage(db: Queryable, after: number, limit: number): Promise<RecordedEvent[]> {
  const r = await db.query<EventRow>({ text: PAGE_SQL, values: [after, limit], rowMode: 'array' });
  return r.rows.map(decodeRow);
}

/** Events with after < position <= upTo, in order. */
export async function readRange(db: Queryable, after: number, upTo: number): Promise<RecordedEvent[]> {
  const r = await db.query<EventRow>({ text: RANGE_SQL, values: [after, upTo], rowMode: 'array' });
  return r.rows.map(decodeRow);
}

export class PostgresReader {
  constructor(
    private readonly pool: pg.Pool,
    private readonly log: CommittedLog,
    private readonly isClosed: () => boolean,
  ) {}

  async readStream(streamId: string, fromVersion = 0, limit?: number): Promise<RecordedEvent[]> {
    const r = await this.pool.query<EventRow>({ text: STREAM_SQL, values: [streamId, fromVersion, limit ?? null], rowMode: 'array' });
    return r.rows.map(decodeRow);
  }

  /** Lazily yields events after `afterPosition`, a page (one query) at a time. */
  async *readAll(afterPosition = 0, limit = Number.POSITIVE_INFINITY): AsyncGenerator<RecordedEvent> {
    let after = afterPosition;
    let left = limit;
    while (left > 0 && !this.isClosed()) {
      const n = Math.min(PG_PAGE_SIZE, left);
      const rows = await readPage(this.pool, after, n);
      yield* rows;
      if (rows.length < n) return;
      after = rows[rows.length - 1]!.position;
      left -= rows.length;
    }
  }

  /**
   * Catch-up then live. Live runs are attached first and held while the table is read, so none
   * slips between the catch-up and going live: once a page comes back short, everything heard
   * before attaching is behind us (heard means committed, and committed rows are read in order),
   * and the held runs cover everything heard since; the overlap is skipped by position.
   */
  subscribe(afterPosition = 0): Observable<RecordedEvent> {
    return new Observable<RecordedEvent>((subscriber) => {
      let last = afterPosition;
      let held: RecordedEvent[][] | undefined = [];
      const emit = (records: readonly RecordedEvent[]): void => {
        for (const r of records) {
          if (subscriber.closed) return;
          if (r.position <= last) continue;
          subscriber.next(r);
          last = r.position;
        }
      };
      const liveSub = this.log.commits.subscribe({
        next: (run) => (held ? held.push(run) : emit(run)),
        complete: () => subscriber.complete(),
      });
      const catchUp = async (): Promise<void> => {
        for (;;) {
          if (subscriber.closed || this.isClosed()) return;
          const rows = await readPage(this.pool, last, PG_PAGE_SIZE);
          emit(rows);
          if (rows.length < PG_PAGE_SIZE) break;
        }
        const runs = held ?? [];
        held = undefined;
        for (const run of runs) emit(run);
      };
      catchUp().catch((error: unknown) => {
        if (this.isClosed()) subscriber.complete();
        else subscriber.error(error);
      });
      return () => liveSub.unsubscribe();
    });
  }
}
