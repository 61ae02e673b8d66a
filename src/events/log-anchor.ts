/**
 * The start-time check of the event log (issue 39, item 2): the hash chain is verified from the
 * last position a start verified (the *anchor*) to the tail, and the anchor moves to the tail.
 * So a start reads only what was appended since the previous start, and an event appended during
 * any run is re-hashed once before the next run serves.
 *
 * The anchor is a row of `log_anchor` in the log's own file: position, hash of the event there,
 * and, when DEVSHARD_LOG_HMAC_KEY is set, HMAC-SHA256(key, position + hash). The key never enters
 * the file or the logs. What this catches (docs/faults.md, "Tampered log at start"):
 * - an event after the anchor changed in place (its stored hash no longer recomputes);
 * - events before the anchor re-hashed after a change (the hash at the anchor differs);
 * - the whole chain and the anchor row rewritten together: only with the key (the MAC fails).
 * An event before the anchor changed with its stored hash left as it was is found after the start
 * by the background check of what the start did not re-hash (`checkPrefixInBackground`), and by
 * `shardgate verify`. Not caught: a rewrite by someone holding the key; a whole-file rollback to
 * an older copy (its anchor is older and still valid).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { eventHash } from './hash.js';
import { EVENT_COLUMNS, type EventRow } from './rows.js';

export interface LogAnchor {
  position: number;
  hash: string;
  /** Hex HMAC over position and hash; null when it was recorded without a key. */
  mac: string | null;
}

export interface StartCheckOk {
  ok: true;
  /** Where verification started (0: the whole log, e.g. the first start after this check existed). */
  from: number;
  /** The new anchor (the tail). */
  to: number;
  /** Events re-hashed by this check. */
  checked: number;
  /** True when the anchor was recorded with a MAC (a key is set). */
  keyed: boolean;
  /** Worth a log line, not a refusal (e.g. a key set for the first time: the old anchor had no MAC). */
  warnings: string[];
}

export interface StartCheckFailure {
  ok: false;
  /** The first position found wrong (the anchor's position when the anchor itself does not hold). */
  position: number;
  reason: string;
}

export type StartCheckResult = StartCheckOk | StartCheckFailure;

/** Thrown by the composition root when the start check fails: the gateway does not serve. */
export class EventLogTamperedError extends Error {
  readonly position: number;
  constructor(readonly failure: StartCheckFailure, file: string) {
    super(
      `event log ${file} failed verification at position ${failure.position}: ${failure.reason}. ` +
        'The gateway refuses to serve from it; run `shardgate verify` and restore the log from a backup.',
    );
    this.name = 'EventLogTamperedError';
    this.position = failure.position;
  }
}

const ANCHOR_TABLE = `CREATE TABLE IF NOT EXISTS log_anchor (
  id       INTEGER PRIMARY KEY CHECK (id = 1),
  position INTEGER NOT NULL,
  hash     TEXT    NOT NULL,
  mac      TEXT
) STRICT`;

const ADOPT_REMEDY =
  'If DEVSHARD_LOG_HMAC_KEY was just set for this log, run `shardgate verify --anchor` once (it re-hashes the whole log and keys its anchor); otherwise the log may have been rewritten';

export function anchorMac(key: string, position: number, hash: string): string {
  return createHmac('sha256', key).update(`shardgate-log-anchor\n${position}\n${hash}`).digest('hex');
}

function macMatches(key: string, a: LogAnchor): boolean {
  if (a.mac === null) return false;
  const want = Buffer.from(anchorMac(key, a.position, a.hash), 'hex');
  const got = Buffer.from(a.mac, 'hex');
  return got.length === want.length && timingSafeEqual(got, want);
}

/** The anchor recorded in a log file, or undefined (no file, no table, no row). */
export function readAnchor(filePath: string): LogAnchor | undefined {
  if (!existsSync(filePath)) return undefined;
  const db = new Database(filePath, { readonly: true, fileMustExist: true });
  try {
    return anchorRow(db);
  } finally {
    db.close();
  }
}

function anchorRow(db: Database.Database): LogAnchor | undefined {
  const has = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'log_anchor'`).get();
  if (!has) return undefined;
  const row = db.prepare('SELECT position, hash, mac FROM log_anchor WHERE id = 1').get() as LogAnchor | undefined;
  return row ? { position: row.position, hash: row.hash, mac: row.mac } : undefined;
}

/**
 * Re-hashes the events after `after` (whose hash is `prevHash`), in order. Returns the tail
 * (position, hash) and how many were checked, or the first bad position.
 */
export function verifyChainFrom(
  db: Database.Database,
  after: number,
  prevHash: string,
  until = Number.MAX_SAFE_INTEGER,
): { ok: true; position: number; hash: string; checked: number } | StartCheckFailure {
  let expected = after + 1;
  let prev = prevHash;
  const rows = db.prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE position > ? AND position <= ? ORDER BY position`).raw().iterate(after, until) as IterableIterator<EventRow>;
  for (const [position, streamId, streamVersion, type, schemaVersion, dataJson, metadataJson, time, storedPrev, hash] of rows) {
    const fail = (reason: string): StartCheckFailure => {
      rows.return?.();
      return { ok: false, position, reason };
    };
    if (position !== expected) return fail(`gap: position ${expected} is missing`);
    if (storedPrev !== prev) return fail('prev_hash does not match the previous event hash');
    if (eventHash(prev, { position, streamId, streamVersion, type, schemaVersion, dataJson, metadataJson, time }) !== hash) {
      return fail(`hash mismatch: the event (${type} in ${streamId}) was altered after it was written`);
    }
    prev = hash;
    expected++;
  }
  return { ok: true, position: expected - 1, hash: prev, checked: expected - 1 - after };
}

/**
 * The start check: verifies the chain from the recorded anchor (position 0 when there is none:
 * an older log, verified whole once) to the tail, then records the tail as the new anchor (with a
 * MAC when `key` is given). Opens the file itself; call it before the event store is opened.
 * A missing file is fine (nothing to verify: the first start).
 */
export function checkLogAtStart(filePath: string, opts: { key?: string } = {}): StartCheckResult {
  if (!existsSync(filePath)) return { ok: true, from: 0, to: 0, checked: 0, keyed: opts.key !== undefined, warnings: [] };
  const db = new Database(filePath, { fileMustExist: true, timeout: 5_000 });
  try {
    const hasEvents = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'`).get();
    if (!hasEvents) return { ok: true, from: 0, to: 0, checked: 0, keyed: opts.key !== undefined, warnings: [] };
    const warnings: string[] = [];
    const anchor = anchorRow(db);
    let from = 0;
    let fromHash = '';
    if (anchor) {
      const stored = anchor.position === 0 ? '' : (db.prepare('SELECT hash FROM events WHERE position = ?').pluck().get(anchor.position) as string | undefined);
      if (stored === undefined) return { ok: false, position: anchor.position, reason: `the last verified event (position ${anchor.position}) is missing: the log was truncated or replaced` };
      if (stored !== anchor.hash) return { ok: false, position: anchor.position, reason: `the hash at the last verified position ${anchor.position} changed: events up to it were rewritten` };
      if (opts.key !== undefined) {
        // A stripped MAC and a key set for the first time look alike: the operator says which.
        if (anchor.mac === null) return { ok: false, position: anchor.position, reason: `the log anchor at position ${anchor.position} was recorded without DEVSHARD_LOG_HMAC_KEY. ${ADOPT_REMEDY}` };
        if (!macMatches(opts.key, anchor)) {
          return { ok: false, position: anchor.position, reason: `the log anchor at position ${anchor.position} does not match DEVSHARD_LOG_HMAC_KEY: the log was rewritten, or the key changed` };
        }
      } else if (anchor.mac !== null) {
        warnings.push('the log anchor is keyed but DEVSHARD_LOG_HMAC_KEY is unset: a rewrite of the whole log is not detected at this start');
      }
      from = anchor.position;
      fromHash = anchor.hash;
    } else if (opts.key !== undefined) {
      // With a key, a log that has events and no anchor had it deleted, or predates the key.
      const tail = (db.prepare('SELECT MAX(position) FROM events').pluck().get() as number | null) ?? 0;
      if (tail > 0) return { ok: false, position: tail, reason: `the log has no anchor recorded under DEVSHARD_LOG_HMAC_KEY. ${ADOPT_REMEDY}` };
    }
    const result = verifyChainFrom(db, from, fromHash);
    if (!result.ok) return result;
    db.exec(ANCHOR_TABLE);
    db.prepare('INSERT INTO log_anchor (id, position, hash, mac) VALUES (1, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET position = excluded.position, hash = excluded.hash, mac = excluded.mac').run(
      result.position,
      result.hash,
      opts.key !== undefined ? anchorMac(opts.key, result.position, result.hash) : null,
    );
    return { ok: true, from, to: result.position, checked: result.checked, keyed: opts.key !== undefined, warnings };
  } finally {
    db.close();
  }
}

export type AnchorVerdict =
  | { state: 'none' }
  | { state: 'holds'; position: number; keyed: 'checked' | 'unkeyed' | 'key-unset' }
  | { state: 'failed'; position: number; reason: string };

/**
 * `shardgate verify`'s look at the anchor, after the whole chain re-hashed: the event at the
 * anchor's position still has the recorded hash, and with `key` the MAC holds. A log rewritten
 * whole with a consistent chain passes the re-hash and fails here (with the key).
 */
export function verifyAnchor(filePath: string, key: string | undefined): AnchorVerdict {
  if (!existsSync(filePath)) return { state: 'none' };
  const db = new Database(filePath, { readonly: true, fileMustExist: true });
  try {
    const anchor = anchorRow(db);
    if (!anchor) return { state: 'none' };
    if (anchor.position > 0) {
      const stored = db.prepare('SELECT hash FROM events WHERE position = ?').pluck().get(anchor.position) as string | undefined;
      if (stored === undefined) return { state: 'failed', position: anchor.position, reason: `the last verified event (position ${anchor.position}) is missing: the log was truncated or replaced` };
      if (stored !== anchor.hash) return { state: 'failed', position: anchor.position, reason: `the hash at the last verified position ${anchor.position} differs from the one a start recorded: events up to it were rewritten` };
    }
    if (key === undefined) return { state: 'holds', position: anchor.position, keyed: anchor.mac === null ? 'unkeyed' : 'key-unset' };
    if (anchor.mac === null) return { state: 'holds', position: anchor.position, keyed: 'unkeyed' };
    if (!macMatches(key, anchor)) return { state: 'failed', position: anchor.position, reason: `the log anchor at position ${anchor.position} does not match DEVSHARD_LOG_HMAC_KEY: the log was rewritten, or the key changed` };
    return { state: 'holds', position: anchor.position, keyed: 'checked' };
  } finally {
    db.close();
  }
}

export type PrefixCheckResult = { ok: true; checked: number } | StartCheckFailure;

/**
 * Re-hashes positions 1..`until` (what the start check took on trust from the anchor), a batch at a
 * time with the event loop free between batches, each batch its own short read (no transaction
 * held across the check). Ends at the first bad position. `stopped()` ends it early (shutdown).
 */
export async function checkPrefixInBackground(
  filePath: string,
  until: number,
  opts: { batch?: number; stopped?: () => boolean } = {},
): Promise<PrefixCheckResult | undefined> {
  if (until <= 0) return { ok: true, checked: 0 };
  const batch = opts.batch ?? 5_000;
  const db = new Database(filePath, { readonly: true, fileMustExist: true });
  try {
    let at = 0;
    let hash = '';
    while (at < until) {
      if (opts.stopped?.()) return undefined;
      const to = Math.min(until, at + batch);
      const r = verifyChainFrom(db, at, hash, to);
      if (!r.ok) return r;
      if (r.position !== to) return { ok: false, position: r.position + 1, reason: `gap: position ${r.position + 1} is missing` };
      at = r.position;
      hash = r.hash;
      await new Promise((resolve) => setImmediate(resolve));
    }
    return { ok: true, checked: until };
  } finally {
    db.close();
  }
}

/**
 * `shardgate verify --anchor`: records `position`/`hash` (a tail the caller just verified whole) as
 * the anchor, keyed when `key` is given. Refused when the log moved on or changed meanwhile.
 */
export function recordAnchor(filePath: string, position: number, hash: string, key: string | undefined): void {
  const db = new Database(filePath, { fileMustExist: true, timeout: 5_000 });
  try {
    db.transaction(() => {
      const tail = (db.prepare('SELECT MAX(position) FROM events').pluck().get() as number | null) ?? 0;
      const stored = position === 0 ? '' : (db.prepare('SELECT hash FROM events WHERE position = ?').pluck().get(position) as string | undefined);
      if (tail !== position || stored !== hash) throw new Error(`the log changed during verification (tail ${tail}, verified ${position}): stop the gateway and run it again`);
      db.exec(ANCHOR_TABLE);
      db.prepare('INSERT INTO log_anchor (id, position, hash, mac) VALUES (1, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET position = excluded.position, hash = excluded.hash, mac = excluded.mac').run(
        position,
        hash,
        key !== undefined ? anchorMac(key, position, hash) : null,
      );
    })();
  } finally {
    db.close();
  }
}
