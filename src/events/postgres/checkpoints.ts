/**
 * Projection checkpoints in the PostgreSQL log's database (not events), with SQLite's semantics
 * (../sqlite/checkpoints.ts): each is tied to the log by the hash of the event at its position, so
 * a checkpoint of another log (or of a log rewritten since) is ignored; a position beyond the log
 * is refused with RangeError. Written at once, in one statement ("soon" needs nothing more here:
 * the write is a network round trip off the event loop either way).
 */
import type pg from 'pg';
import { canonicalJson } from '../canonical-json.js';
import { EventStoreClosedError } from '../errors.js';
import type { Checkpoint } from '../store.js';

/** Upserts the checkpoint with the hash at its position; no row when there is no event there. */
const SAVE_SQL = `
  INSERT INTO checkpoints (name, position, state, hash)
  SELECT $1, $2, $3, at.hash FROM (
    SELECT hash FROM events WHERE position = $2
    UNION ALL SELECT '' WHERE $2 = 0
  ) AS at
  ON CONFLICT (name) DO UPDATE SET position = excluded.position, state = excluded.state, hash = excluded.hash
  RETURNING name`;

const LOAD_SQL = `
  SELECT c.name, c.position, c.state, c.hash, CASE WHEN c.position = 0 THEN '' ELSE e.hash END AS at
  FROM checkpoints c LEFT JOIN events e ON e.position = c.position
  WHERE c.name = $1`;

export class PgCheckpoints {
  constructor(
    private readonly pool: pg.Pool,
    private readonly isClosed: () => boolean,
  ) {}

  async save(name: string, position: number, state: unknown, soon: boolean): Promise<void> {
    if (this.isClosed()) throw new EventStoreClosedError();
    if (!Number.isSafeInteger(position) || position < 0) throw new RangeError(`checkpoint ${name}: position must be an integer >= 0 (got ${position})`);
    // The serving gateway's periodic checkpoint ("soon") skips the canonical walk, as SQLite does.
    const text = soon ? JSON.stringify(state) : canonicalJson(state, `checkpoint ${name}`);
    const r = await this.pool.query(SAVE_SQL, [name, position, text]);
    if (r.rowCount === 0) throw new RangeError(`checkpoint ${name}: no event at position ${position}`);
  }

  /** The checkpoint, or undefined when absent or when the event at its position has another hash. */
  async load<S>(name: string): Promise<Checkpoint<S> | undefined> {
    const r = await this.pool.query<{ name: string; position: number; state: string; hash: string; at: string | null }>(LOAD_SQL, [name]);
    const row = r.rows[0];
    if (!row || row.at !== row.hash) return undefined;
    return { name: row.name, position: row.position, state: JSON.parse(row.state) as S, hash: row.hash };
  }
}
