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
import { timingSafeEqual } from 'node:crypto';
import pg from 'pg';
import { eventHash } from '../hash.js';
import { anchorMac, type AnchorVerdict, type LogAnchor, type StartCheckFailure, type StartCheckResult } from '../log-anchor.js';
import type { EventRow } from '../rows.js';
import { connectionConfig, type PostgresConnection } from './connection.js';

const PAGE = 5_000;
const RANGE_SQL = 'SELECT position, stream_id, stream_version, type, schema_version, data, metadata, time, prev_hash, hash FROM events WHERE position > $1 AND position <= $2 ORDER BY position LIMIT $3';

const ADOPT_REMEDY =
  'If DEVSHARD_LOG_HMAC_KEY was just set for this log, run `shardgate verify --anchor` once (it re-hashes the whole log and keys its anchor); otherwise the log may have been rewritten';

type Queryable = Pick<pg.Client, 'query'>;

function macMatches(key: string, a: LogAnchor): boolean {
  if (a.mac === null) return false;
  const want = Buffer.from(anchorMac(key, a.position, a.hash), 'hex');
  const got = Buffer.from(a.mac, 'hex');
  return got.length === want.length && timingSafeEqual(got, want);
}

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

/** Re-hashes the events after `after` (whose hash is `prevHash`) up to `until`, in pages. */
export async function verifyPgChainFrom(
  db: Queryable,
  after: number,
  prevHash: string,
  until = Number.MAX_SAFE_INTEGER,
): Promise<{ ok: true; position: number; hash: string; checked: number } | StartCheckFailure> {
  let expected = after + 1;
  let prev = prevHash;
  for (;;) {
    const rows = (await db.query<EventRow>({ text: RANGE_SQL, values: [expected - 1, until, PAGE], rowMode: 'array' })).rows;
    for (const [position, streamId, streamVersion, type, schemaVersion, dataJson, metadataJson, time, storedPrev, hash] of rows) {
      if (position !== expected) return { ok: false, position, reason: `gap: position ${expected} is missing` };
      if (storedPrev !== prev) return { ok: false, position, reason: 'prev_hash does not match the previous event hash' };
      if (eventHash(prev, { position, streamId, streamVersion, type, schemaVersion, dataJson, metadataJson, time }) !== hash) {
        return { ok: false, position, reason: `hash mismatch: the event (${type} in ${streamId}) was altered after it was written` };
      }
      prev = hash;
      expected++;
    }
    if (rows.length < PAGE) return { ok: true, position: expected - 1, hash: prev, checked: expected - 1 - after };
  }
}

/**
 * The start check on a PostgreSQL log (call it after openPostgresEventStore has migrated the
 * database, before serving): verifies from the anchor (0 when there is none) to the tail, then
 * records the tail as the anchor, keyed when `key` is given.
 */
export async function checkPostgresLogAtStart(connection: PostgresConnection, opts: { key?: string } = {}): Promise<StartCheckResult> {
  return withClient(connection, async (db) => {
    const warnings: string[] = [];
    const anchor = await anchorRow(db);
    let from = 0;
    let fromHash = '';
    if (anchor) {
      const stored = await hashAt(db, anchor.position);
      if (stored === undefined) return { ok: false, position: anchor.position, reason: `the last verified event (position ${anchor.position}) is missing: the log was truncated or replaced` };
      if (stored !== anchor.hash) return { ok: false, position: anchor.position, reason: `the hash at the last verified position ${anchor.position} changed: events up to it were rewritten` };
      if (opts.key !== undefined) {
        if (anchor.mac === null) return { ok: false, position: anchor.position, reason: `the log anchor at position ${anchor.position} was recorded without DEVSHARD_LOG_HMAC_KEY. ${ADOPT_REMEDY}` };
        if (!macMatches(opts.key, anchor)) return { ok: false, position: anchor.position, reason: `the log anchor at position ${anchor.position} does not match DEVSHARD_LOG_HMAC_KEY: the log was rewritten, or the key changed` };
      } else if (anchor.mac !== null) {
        warnings.push('the log anchor is keyed but DEVSHARD_LOG_HMAC_KEY is unset: a rewrite of the whole log is not detected at this start');
      }
      from = anchor.position;
      fromHash = anchor.hash;
    } else if (opts.key !== undefined) {
      const tail = (await db.query<{ position: number }>('SELECT position FROM log_head WHERE id = 1')).rows[0]?.position ?? 0;
      if (tail > 0) return { ok: false, position: tail, reason: `the log has no anchor recorded under DEVSHARD_LOG_HMAC_KEY. ${ADOPT_REMEDY}` };
    }
    const result = await verifyPgChainFrom(db, from, fromHash);
    if (!result.ok) return result;
    await moveAnchor(db, result.position, result.hash, opts.key);
    return { ok: true, from, to: result.position, checked: result.checked, keyed: opts.key !== undefined, warnings };
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
    if (!anchor) return { state: 'none' };
    const stored = await hashAt(db, anchor.position);
    if (stored === undefined) return { state: 'failed', position: anchor.position, reason: `the last verified event (position ${anchor.position}) is missing: the log was truncated or replaced` };
    if (stored !== anchor.hash) return { state: 'failed', position: anchor.position, reason: `the hash at the last verified position ${anchor.position} differs from the one a start recorded: events up to it were rewritten` };
    if (key === undefined) return { state: 'holds', position: anchor.position, keyed: anchor.mac === null ? 'unkeyed' : 'key-unset' };
    if (anchor.mac === null) return { state: 'holds', position: anchor.position, keyed: 'unkeyed' };
    if (!macMatches(key, anchor)) return { state: 'failed', position: anchor.position, reason: `the log anchor at position ${anchor.position} does not match DEVSHARD_LOG_HMAC_KEY: the log was rewritten, or the key changed` };
    return { state: 'holds', position: anchor.position, keyed: 'checked' };
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
