/**
 * `shardgate migrate --from <storage dir> --to <postgres url>`: moves the event log from SQLite to
 * PostgreSQL as stored (src/events/postgres/copy-log.ts), then verifies both logs and records the
 * copied tail as the PostgreSQL log's anchor (keyed with DEVSHARD_LOG_HMAC_KEY when set). The
 * gateway must be stopped (the storage lock is taken); afterwards start it with
 * DEVSHARD_STORAGE_MODE=postgres and DATABASE_URL, and it continues every escrow from the copy.
 */
import type { Command } from 'commander';
import { shownDatabaseUrl as shownUrl } from '../../events/log-where.js';
import { recordPostgresAnchor } from '../../events/postgres/log-anchor.js';
import { copySqliteLogToPostgres } from '../../events/postgres/copy-log.js';
import { verifyPostgresLog } from '../../events/postgres/verify.js';
import { eventsFile } from '../../events/sqlite-store.js';
import { verifyLog } from '../../events/verify.js';
import { lockStorage } from '../../gateway/write/storage-lock.js';

export async function runMigrate(from: string, to: string, out: (s: string) => void = (s) => process.stdout.write(s)): Promise<number> {
  const file = eventsFile(from);
  const source = await verifyLog(file);
  if (!source.ok) {
    out(`refused: the source log ${file} fails verification at position ${source.position}: ${source.reason}\n`);
    return 1;
  }
  const copied = await copySqliteLogToPostgres(file, to);
  const target = await verifyPostgresLog(to);
  if (!target.ok) {
    out(`the copy in ${shownUrl(to)} fails verification at position ${target.position}: ${target.reason}\n`);
    return 1;
  }
  await recordPostgresAnchor(to, copied.position, copied.hash, process.env.DEVSHARD_LOG_HMAC_KEY?.trim() || undefined);
  out(`migrated ${copied.copied} events from ${file} to ${shownUrl(to)}; both logs verify and end at position ${copied.position} (hash ${copied.hash.slice(0, 16)}…).\n`);
  out('Start the gateway with DEVSHARD_STORAGE_MODE=postgres and DATABASE_URL set to that database; keep the SQLite file as a backup.\n');
  return 0;
}

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('copy the event log from a SQLite storage directory into an empty PostgreSQL database, as stored (same positions and hashes), then verify both (the gateway must be stopped)')
    .requiredOption('--from <dir>', 'the SQLite storage directory (DEVSHARD_STORAGE_DIR of the gateway)')
    .requiredOption('--to <url>', 'the PostgreSQL database, postgres://user:password@host:5432/db (empty)')
    .action(async (opts: { from: string; to: string }) => {
      // The source must not change during the copy: a running gateway holds this lock.
      const unlock = lockStorage(opts.from);
      try {
        process.exitCode = await runMigrate(opts.from, opts.to);
      } finally {
        unlock();
      }
    });
}
