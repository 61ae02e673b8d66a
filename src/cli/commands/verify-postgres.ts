/**
 * `shardgate verify` on a PostgreSQL log (DEVSHARD_STORAGE_MODE=postgres, or `--database-url`):
 * the same checks as on SQLite, in the transaction src/events/postgres/verify.ts verifies the chain
 * in (positions, stream versions, the hash chain, the streams table and the log head), then the
 * stored projections checkpoint against a rebuild, every devshard session against its replica,
 * and the start check's anchor. The output and exit codes are SQLite's (verify.ts); where the log
 * is, is shown without the password.
 */
import { PROJECTIONS_CHECKPOINT, Projections } from '../../projections/projections.js';
import { compareCheckpoint, openCheckpoint, settleVerdict, type ProjectionsCheckReport } from '../../projections/verify-check.js';
import type { AnchorVerdict } from '../../events/log-anchor.js';
import type { PostgresConnection } from '../../events/postgres/connection.js';
import { recordPostgresAnchor, verifyPostgresAnchor } from '../../events/postgres/log-anchor.js';
import { verifyPostgresLog, type PgVerifyCheck } from '../../events/postgres/verify.js';
import { decodeRow, EVENT_COLUMNS, type EventRow } from '../../events/rows.js';
import { AUDITED_TYPES, DevshardLogAudit } from '../../gateway/session/audit.js';
import { failureText, isMissingFacts, type EscrowAudit } from '../../gateway/session/audit-report.js';
import { reportVerify } from './verify-report.js';

const PAGE = 5_000;
const CHECKPOINT_SQL = 'SELECT position, state, hash FROM checkpoints WHERE name = $1';
const UP_TO_SQL = `SELECT ${EVENT_COLUMNS} FROM events WHERE position > $1 AND position <= $2 ORDER BY position LIMIT $3`;
const AUDITED_SQL = `SELECT ${EVENT_COLUMNS} FROM events WHERE position > $1 AND type = ANY($2::text[]) ORDER BY position LIMIT $3`;

/** The projections check of src/projections/verify-check.ts on the PostgreSQL log (the same rules, read in pages). */
export function pgProjectionsCheck(report?: (r: ProjectionsCheckReport) => void): PgVerifyCheck {
  return async ({ db }) => {
    const row = (await db.query<[number, string, string]>({ text: CHECKPOINT_SQL, values: [PROJECTIONS_CHECKPOINT], rowMode: 'array' })).rows[0];
    const at = row && (await db.query<{ hash: string }>('SELECT hash FROM events WHERE position = $1', [row[0]])).rows[0]?.hash;
    const opened = openCheckpoint(row, () => at);
    if (!('stored' in opened)) return settleVerdict(opened, report);
    const rebuilt = new Projections();
    for (let after = 0; ; ) {
      const rows = (await db.query<EventRow>({ text: UP_TO_SQL, values: [after, opened.position, PAGE], rowMode: 'array' })).rows;
      rebuilt.foldAll(rows.map(decodeRow));
      if (rows.length < PAGE) break;
      after = rows[rows.length - 1]![0];
    }
    return settleVerdict(compareCheckpoint(opened.position, opened.stored, rebuilt.toCheckpoint().state), report);
  };
}

/** The devshard check of src/gateway/session/audit.ts on the PostgreSQL log (the audited events, read in pages). */
export function pgDevshardCheck(report?: (escrows: EscrowAudit[]) => void): PgVerifyCheck {
  return async ({ db }) => {
    const audit = new DevshardLogAudit();
    for (let after = 0; ; ) {
      const rows = (await db.query<EventRow>({ text: AUDITED_SQL, values: [after, [...AUDITED_TYPES], PAGE], rowMode: 'array' })).rows;
      for (const r of rows) audit.apply(decodeRow(r));
      if (rows.length < PAGE) break;
      after = rows[rows.length - 1]![0];
    }
    const escrows = audit.result();
    report?.(escrows);
    const failures = escrows.flatMap((e) => e.failures).filter((f) => !isMissingFacts(f));
    if (failures.length === 0) return undefined;
    const first = failures[0]!;
    return { position: first.position, reason: `${failureText(first)}${failures.length > 1 ? ` (and ${failures.length - 1} more devshard failure(s))` : ''}` };
  };
}

/** `text` with every secret (a password, as given and URL-decoded) replaced by `***`. */
function withoutSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) {
    if (s === '') continue;
    for (const form of new Set([s, safeDecode(s), encodeURIComponent(s)])) out = out.split(form).join('***');
  }
  return out;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export interface PostgresVerifyTarget {
  connection: PostgresConnection;
  /** Where the log is, for what is printed: the URL without its password. */
  where: string;
  /** Passwords never to print (an error of the driver is printed with them masked). */
  secrets: readonly string[];
}

/**
 * Verifies the PostgreSQL log, writing the summary or the failures as runVerify does for SQLite;
 * answers the exit code (0, or 1 naming the first bad position). `--anchor` records the verified
 * tail as the start check's anchor: no lock is needed, other instances may keep appending (the
 * anchor is a verified prefix).
 */
export async function runVerifyPostgres(
  target: PostgresVerifyTarget,
  out: (s: string) => void = (s) => process.stdout.write(s),
  err: (s: string) => void = (s) => process.stderr.write(s),
  key: string | undefined = process.env.DEVSHARD_LOG_HMAC_KEY || undefined,
  opts: { anchor?: boolean } = {},
): Promise<number> {
  let projections: ProjectionsCheckReport | undefined;
  let devshard: EscrowAudit[] = [];
  let anchor: AnchorVerdict = { state: 'none' };
  try {
    const result = await verifyPostgresLog(target.connection, [
      pgProjectionsCheck((r) => (projections = r)),
      pgDevshardCheck((r) => (devshard = r)),
      // --anchor: the whole log is about to be re-hashed, so the old anchor is not needed to trust it.
      async () => {
        if (opts.anchor) return undefined;
        anchor = await verifyPostgresAnchor(target.connection, key);
        return anchor.state === 'failed' ? { position: anchor.position, reason: anchor.reason } : undefined;
      },
    ]);
    return await reportVerify(
      { where: target.where, result, projections, devshard, anchor, key, recordAnchor: opts.anchor ? (position, hash) => recordPostgresAnchor(target.connection, position, hash, key) : undefined },
      out,
      err,
    );
  } catch (e) {
    // The database could not be read (refused connection, authentication, a missing database), or
    // the anchor could not be recorded: no verdict on the log.
    out(`FAILED: cannot verify the log: ${withoutSecrets((e as Error).message, target.secrets)} (${target.where})\n`);
    return 1;
  }
}
