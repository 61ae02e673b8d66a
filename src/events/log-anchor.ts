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
import { existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { rehashRows, type ChainRun } from './chain-rehash.js';
import { anchorMac, anchorVerdict, startCheckOk, startPoint, type AnchorVerdict, type LogAnchor, type StartCheckFailure, type StartCheckResult } from './log-anchor-verdict.js';
import { EVENT_COLUMNS, type EventRow } from './rows.js';

// The types and the MAC live with the verdicts (log-anchor-verdict.ts); callers keep importing them from here.
export { anchorMac, type AnchorVerdict, type LogAnchor, type StartCheckFailure, type StartCheckOk, type StartCheckResult } from './log-anchor-verdict.js';

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

function hashAt(db: Database.Database, position: number): string | undefined {
  return position === 0 ? '' : (db.prepare('SELECT hash FROM events WHERE position = ?').pluck().get(position) as string | undefined);
}

function tailPosition(db: Database.Database): number {
  return (db.prepare('SELECT MAX(position) FROM events').pluck().get() as number | null) ?? 0;
}

/**
 * Re-hashes the events after `after` (whose hash is `prevHash`), in order. Returns the tail
 * (position, hash) and how many were checked, or the first bad position.
 */
export function verifyChainFrom(db: Database.Database, after: number, prevHash: string, until = Number.MAX_SAFE_INTEGER): ChainRun | StartCheckFailure {
  const rows = db.prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE position > ? AND position <= ? ORDER BY position`).raw().iterate(after, until) as IterableIterator<EventRow>;
  return rehashRows(rows, after, prevHash);
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
    const anchor = anchorRow(db);
    const start = startPoint(anchor ? { anchor, hashAtAnchor: hashAt(db, anchor.position) } : { anchor, tail: tailPosition(db) }, opts.key);
    if (!start.ok) return start;
    const result = verifyChainFrom(db, start.from, start.fromHash);
    if (!result.ok) return result;
    db.exec(ANCHOR_TABLE);
    db.prepare('INSERT INTO log_anchor (id, position, hash, mac) VALUES (1, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET position = excluded.position, hash = excluded.hash, mac = excluded.mac').run(
      result.position,
      result.hash,
      opts.key !== undefined ? anchorMac(opts.key, result.position, result.hash) : null,
    );
    return startCheckOk(start, result, opts.key);
  } finally {
    db.close();
  }
}

/** `shardgate verify`'s look at the anchor (log-anchor-verdict.ts, anchorVerdict). */
export function verifyAnchor(filePath: string, key: string | undefined): AnchorVerdict {
  if (!existsSync(filePath)) return { state: 'none' };
  const db = new Database(filePath, { readonly: true, fileMustExist: true });
  try {
    const anchor = anchorRow(db);
    // An anchor at 0 has no event to compare with; this check has always let it hold as recorded.
    return anchorVerdict(anchor, anchor && anchor.position > 0 ? hashAt(db, anchor.position) : anchor?.hash, key);
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
      const tail = tailPosition(db);
      const stored = hashAt(db, position);
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
