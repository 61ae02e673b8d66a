/**
 * The start-time check of a PostgreSQL log (../log-anchor.ts says what it catches and why): the
 * chain is re-hashed from the recorded anchor to the tail, then the anchor moves to the tail, with
 * an HMAC when DEVSHARD_LOG_HMAC_KEY is set. Only the storage differs: the anchor is the one row
 * of `log_anchor` in the log's database, and the events are read in pages over a connection.
 *
 * Several instances share the anchor: each start verifies from it to the tail it sees and moves it
 * forward only (a slower start never moves it back; the row is locked while it is compared and
 * written, so two starts cannot both believe they moved it).
 */
import pg from 'pg';
import { rehashRows, type ChainRun } from '../chain-rehash.js';
import { anchorMac, anchorVerdict, startCheckOk, startPoint, type AnchorVerdict, type LogAnchor, type StartCheckFailure, type StartCheckResult } from '../log-anchor-verdict.js';
import type { EventRow } from '../rows.js';
import { connectionConfig, type PostgresConnection } from './connection.js';

const PAGE = 5_000;
const RANGE_SQL = 'SELECT position, stream_id, stream_version, type, schema_version, data, metadata, time, prev_hash, hash FROM events WHERE position > $1 AND position <= $2 ORDER BY position LIMIT $3';

type Queryable = Pick<pg.Client, 'query'>;

async function withClient<T>(connection: PostgresConnection, run: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client(connectionConfig(connection));
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function anchorRow(db: Queryable, lock = false): Promise<LogAnchor | undefined> {
  const r = await db.query<LogAnchor>(`SELECT position, hash, mac FROM log_anchor WHERE id = 1${lock ? ' FOR UPDATE' : ''}`);
  return r.rows[0];
}

async function hashAt(db: Queryable, position: number): Promise<string | undefined> {
  if (position === 0) return '';
  return (await db.query<{ hash: string }>('SELECT hash FROM events WHERE position = $1', [position])).rows[0]?.hash;
}

async function tailPosition(db: Queryable): Promise<number> {
  return (await db.query<{ position: number }>('SELECT position FROM log_head WHERE id = 1')).rows[0]?.position ?? 0;
}

/** Re-hashes the events after `after` (whose hash is `prevHash`) up to `until`, in pages. */
export async function verifyPgChainFrom(db: Queryable, after: number, prevHash: string, until = Number.MAX_SAFE_INTEGER): Promise<ChainRun | StartCheckFailure> {
  let at = after;
  let hash = prevHash;
  for (;;) {
    const rows = (await db.query<EventRow>({ text: RANGE_SQL, values: [at, until, PAGE], rowMode: 'array' })).rows;
    const page = rehashRows(rows, at, hash);
    if (!page.ok) return page;
    at = page.position;
    hash = page.hash;
    if (rows.length < PAGE) return { ok: true, position: at, hash, checked: at - after };
  }
}

/**
 * The start check on a PostgreSQL log (call it after openPostgresEventStore has migrated the
 * database, before serving): verifies from the anchor (0 when there is none) to the tail, then
 * records the tail as the anchor, keyed when `key` is given.
 */
export async function checkPostgresLogAtStart(connection: PostgresConnection, opts: { key?: string } = {}): Promise<StartCheckResult> {
  return withClient(connection, async (db) => {
    const anchor = await anchorRow(db);
    const start = startPoint(anchor ? { anchor, hashAtAnchor: await hashAt(db, anchor.position) } : { anchor, tail: await tailPosition(db) }, opts.key);
    if (!start.ok) return start;
    const result = await verifyPgChainFrom(db, start.from, start.fromHash);
    if (!result.ok) return result;
    await moveAnchor(db, result.position, result.hash, opts.key);
    return startCheckOk(start, result, opts.key);
  });
}

/** Records (position, hash) as the anchor unless another start already moved it further. */
async function moveAnchor(db: Queryable, position: number, hash: string, key: string | undefined): Promise<void> {
  await db.query(
    `INSERT INTO log_anchor (id, position, hash, mac) VALUES (1, $1, $2, $3)
     ON CONFLICT (id) DO UPDATE SET position = excluded.position, hash = excluded.hash, mac = excluded.mac
     WHERE log_anchor.position < excluded.position OR (log_anchor.position = excluded.position AND log_anchor.mac IS DISTINCT FROM excluded.mac)`,
    [position, hash, key !== undefined ? anchorMac(key, position, hash) : null],
  );
}

/** `shardgate verify`'s look at the anchor of a PostgreSQL log (as verifyAnchor for SQLite). */
export async function verifyPostgresAnchor(connection: PostgresConnection, key: string | undefined): Promise<AnchorVerdict> {
  return withClient(connection, async (db) => {
    const anchor = await anchorRow(db);
    return anchorVerdict(anchor, anchor ? await hashAt(db, anchor.position) : undefined, key);
  });
}

/**
 * `shardgate verify --anchor` on PostgreSQL: records a tail the caller verified whole as the anchor
 * (keyed when `key` is given). Refused when the event at `position` is not `hash`. Unlike SQLite,
 * the log may have moved on meanwhile (other instances keep appending): the anchor is a verified
 * prefix, which is all it has to be.
 */
export async function recordPostgresAnchor(connection: PostgresConnection, position: number, hash: string, key: string | undefined): Promise<void> {
  await withClient(connection, async (db) => {
    await db.query('BEGIN');
    try {
      if ((await hashAt(db, position)) !== hash) throw new Error(`the event at position ${position} is not the one verified: the log changed during verification`);
      await anchorRow(db, true);
      await db.query(
        `INSERT INTO log_anchor (id, position, hash, mac) VALUES (1, $1, $2, $3)
         ON CONFLICT (id) DO UPDATE SET position = excluded.position, hash = excluded.hash, mac = excluded.mac`,
        [position, hash, key !== undefined ? anchorMac(key, position, hash) : null],
      );
      await db.query('COMMIT');
    } catch (error) {
      await db.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  });
}

/**
 * Re-hashes positions 1..`until` (what the start check took on trust from the anchor), a page at a
 * time, the event loop free between pages. Ends at the first bad position; `stopped()` ends it early.
 */
export async function checkPostgresPrefixInBackground(
  connection: PostgresConnection,
  until: number,
  opts: { stopped?: () => boolean } = {},
): Promise<{ ok: true; checked: number } | StartCheckFailure | undefined> {
  if (until <= 0) return { ok: true, checked: 0 };
  return withClient(connection, async (db) => {
    let at = 0;
    let hash = '';
    while (at < until) {
      if (opts.stopped?.()) return undefined;
      const to = Math.min(until, at + PAGE);
      const r = await verifyPgChainFrom(db, at, hash, to);
      if (!r.ok) return r;
      if (r.position !== to) return { ok: false, position: r.position + 1, reason: `gap: position ${r.position + 1} is missing` };
      at = r.position;
      hash = r.hash;
    }
    return { ok: true, checked: until };
  });
}
