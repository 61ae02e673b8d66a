import type { Command } from 'commander';
import { storageSettings } from '../../config/storage.js';
import { eventsFile, defaultStorageDir } from '../../events/storage-path.js';
import { postgresConnection, shownDatabaseUrl } from '../../events/log-where.js';
import { recordAnchor, verifyAnchor, type AnchorVerdict } from '../../events/log-anchor.js';
import { lockStorage } from '../../gateway/write/storage-lock.js';
import { verifyLog } from '../../events/verify.js';
import { projectionsCheck, type ProjectionsCheckReport } from '../../projections/verify-check.js';
import { devshardCheck } from '../../gateway/session/audit.js';
import type { EscrowAudit } from '../../gateway/session/audit-report.js';
import { reportVerify } from './verify-report.js';
import { runVerifyPostgres, type PostgresVerifyTarget } from './verify-postgres.js';

export { devshardSummary } from './verify-report.js';

/**
 * Verifies the log at `file`, writing the summary or the failures; answers the exit code. `key` is
 * DEVSHARD_LOG_HMAC_KEY (the anchor's MAC is checked when it is given).
 */
export async function runVerify(
  file: string,
  out: (s: string) => void = (s) => process.stdout.write(s),
  err: (s: string) => void = (s) => process.stderr.write(s),
  key: string | undefined = process.env.DEVSHARD_LOG_HMAC_KEY || undefined,
  opts: { anchor?: boolean } = {},
): Promise<number> {
  let projections: ProjectionsCheckReport | undefined;
  let devshard: EscrowAudit[] = [];
  // --anchor: the whole log is about to be re-hashed, so the old anchor (unkeyed, or none) is not needed to trust it.
  const anchor: AnchorVerdict = opts.anchor ? { state: 'none' } : verifyAnchor(file, key);
  const result = await verifyLog(file, [
    projectionsCheck((r) => (projections = r)),
    devshardCheck((r) => (devshard = r)),
    () => (anchor.state === 'failed' ? { position: anchor.position, reason: anchor.reason } : undefined),
  ]);
  return reportVerify({ where: file, result, projections, devshard, anchor, key, recordAnchor: opts.anchor ? (position, hash) => recordAnchor(file, position, hash, key) : undefined }, out, err);
}

export interface VerifyCliOptions {
  storage?: string;
  databaseUrl?: string;
  anchor?: boolean;
}

/** Which log `shardgate verify` checks, or why it cannot tell (a usage or configuration error, exit 2). */
export type VerifyTarget = { kind: 'sqlite'; dir: string } | ({ kind: 'postgres' } & PostgresVerifyTarget) | { kind: 'error'; message: string };

const POSTGRES_URL = /^postgres(ql)?:\/\//;

/**
 * `--database-url` (PostgreSQL), else `--storage` (SQLite), else the environment: with
 * DEVSHARD_STORAGE_MODE=postgres the database DATABASE_URL or the PG* variables name (as `serve`
 * reads them), otherwise the SQLite log in DEVSHARD_STORAGE_DIR (default .devshardctl).
 */
export function verifyTarget(opts: VerifyCliOptions, env: NodeJS.ProcessEnv = process.env): VerifyTarget {
  if (opts.storage !== undefined && opts.databaseUrl !== undefined) return { kind: 'error', message: 'give --storage (a SQLite log) or --database-url (a PostgreSQL log), not both' };
  if (opts.databaseUrl !== undefined) {
    const url = opts.databaseUrl.trim();
    // The value is not quoted back: it may hold a password.
    if (!POSTGRES_URL.test(url)) return { kind: 'error', message: '--database-url must be a postgres:// or postgresql:// URL' };
    return { kind: 'postgres', connection: url, where: shownDatabaseUrl(url), secrets: urlPasswords(url) };
  }
  if (opts.storage !== undefined) return { kind: 'sqlite', dir: opts.storage };
  const get = (name: string): string | undefined => {
    const v = env[name]?.trim();
    return v === undefined || v === '' ? undefined : v;
  };
  const problems: string[] = [];
  const storage = storageSettings(get, (variable, message) => problems.push(`${variable} ${message}`));
  if (problems.length > 0) return { kind: 'error', message: problems.join('; ') };
  if (storage.mode === 'postgres') {
    const pg = storage.postgres ?? {};
    const { connection, where } = postgresConnection(pg);
    return { kind: 'postgres', connection, where, secrets: [...(pg.url !== undefined ? urlPasswords(pg.url) : []), ...(pg.password !== undefined ? [pg.password] : [])] };
  }
  return { kind: 'sqlite', dir: defaultStorageDir(env) };
}

/** The password a URL carries (userinfo, or a `password` query parameter), never to be printed. */
function urlPasswords(url: string): string[] {
  try {
    const u = new URL(url);
    return [u.password, ...[...u.searchParams.entries()].filter(([k]) => k.toLowerCase() === 'password').map(([, v]) => v)].filter((p) => p !== '');
  } catch {
    return [];
  }
}

/** The command's work, its exit code answered: 0 verified, 1 the log fails (or cannot be read), 2 a usage or configuration error. */
export async function runVerifyCommand(
  opts: VerifyCliOptions,
  env: NodeJS.ProcessEnv = process.env,
  out: (s: string) => void = (s) => process.stdout.write(s),
  err: (s: string) => void = (s) => process.stderr.write(s),
): Promise<number> {
  const target = verifyTarget(opts, env);
  const key = env.DEVSHARD_LOG_HMAC_KEY || undefined;
  if (target.kind === 'error') {
    err(`shardgate verify: ${target.message}\n`);
    return 2;
  }
  if (target.kind === 'postgres') return runVerifyPostgres(target, out, err, key, { anchor: opts.anchor === true });
  if (!opts.anchor) return runVerify(eventsFile(target.dir), out, err, key);
  // Writing the anchor needs the storage to itself: a running gateway holds the lock.
  const unlock = lockStorage(target.dir);
  try {
    return await runVerify(eventsFile(target.dir), out, err, key, { anchor: true });
  } finally {
    unlock();
  }
}

/**
 * `shardgate verify`: proves the log was not altered (positions, versions, hash chain) and that the
 * stored projections checkpoint equals the projections rebuilt from the log, and that every devshard
 * protocol session rebuilds from its recorded diffs (src/gateway/session/audit.ts: contiguous
 * nonces, user signatures by the creator, the roots the hosts signed, the settlement and its
 * signatures); exit 0 with a summary, or 1 naming the first bad position (for a devshard session:
 * the escrow, nonce and rule, every failure listed). The log is the SQLite file in the storage
 * directory, or the PostgreSQL database of `--database-url` or of DEVSHARD_STORAGE_MODE=postgres
 * (DATABASE_URL or PG*), shown without its password.
 */
export function registerVerify(program: Command): void {
  program
    .command('verify')
    .description('check positions, stream versions and the hash chain of the event log, the stored projections checkpoint against a rebuild, and every devshard protocol session against its replica rebuilt from the log (SQLite, or PostgreSQL with --database-url or DEVSHARD_STORAGE_MODE=postgres)')
    .option('--storage <dir>', 'storage directory of a SQLite log (default: $DEVSHARD_STORAGE_DIR or .devshardctl)')
    .option('--database-url <url>', 'a PostgreSQL log, postgres://user:password@host:5432/db (default with DEVSHARD_STORAGE_MODE=postgres: DATABASE_URL, or the PG* variables); the password is never printed')
    .option('--anchor', 'after the whole log verified, record its tail as the start check\'s anchor, keyed with DEVSHARD_LOG_HMAC_KEY (once, when the key is set for an existing log; on SQLite the gateway must be stopped)')
    .action(async (opts: VerifyCliOptions) => {
      process.exitCode = await runVerifyCommand(opts);
    });
}
