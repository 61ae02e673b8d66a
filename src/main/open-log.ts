/**
 * Opens the event log where the configuration says (SQLite in the storage directory, or
 * PostgreSQL), with what a start owes it: one process per log (SQLite) or per instance name (PostgreSQL; a lock), the start check of the
 * hash chain from the last verified position (a log altered since is not served), a new log's
 * anchor, and the background re-hash of what the start took on trust.
 */
import { existsSync } from 'node:fs';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/index.js';
import { checkLogAtStart, checkPrefixInBackground, EventLogTamperedError, readAnchor, recordAnchor, type StartCheckFailure, type StartCheckOk } from '../events/log-anchor.js';
import { checkPostgresLogAtStart, checkPostgresPrefixInBackground } from '../events/postgres/log-anchor.js';
import { postgresConnection } from '../events/log-where.js';
import { openPostgresEventStore } from '../events/postgres/store.js';
import { lockPostgresLog } from '../events/postgres/writer-lock.js';
import { eventsFile, openSqliteEventStore } from '../events/sqlite-store.js';
import type { EventStore } from '../events/store.js';
import { lockStorage } from '../gateway/write/storage-lock.js';

export interface OpenedLog {
  store: EventStore;
  /** The spec's "first gateway start": the log did not exist before this start. */
  firstStart: boolean;
  check: StartCheckOk;
  /** Re-hashes positions 1..check.from (taken on trust from the anchor); `stopped` ends it early. */
  checkPrefix(stopped: () => boolean): Promise<{ ok: true; checked: number } | StartCheckFailure | undefined>;
  /** Where the log is, for messages (a file, or a database URL without its password). */
  where: string;
  /** Gives the lock back (after the store is closed). */
  release(): Promise<void>;
}

/** `beforeOpen(firstStart)` may refuse the start (throw) before anything is created. */
export async function openLog(config: GatewayConfig, logger: Logger, beforeOpen: (firstStart: boolean) => void): Promise<OpenedLog> {
  return config.storage.mode === 'postgres' ? openPostgresLog(config, logger, beforeOpen) : openSqliteLog(config, logger, beforeOpen);
}

function checked(check: StartCheckOk | StartCheckFailure, where: string, logger: Logger): StartCheckOk {
  if (!check.ok) {
    const refused = new EventLogTamperedError(check, where);
    logger.fatal({ component: 'event_log', position: check.position }, `event_log_verification_failed: ${refused.message}`);
    throw refused;
  }
  for (const w of check.warnings) logger.warn({ component: 'event_log' }, w);
  logger.info({ component: 'event_log', verified_from: check.from, verified_to: check.to, events_checked: check.checked, keyed: check.keyed }, 'event_log_verified');
  return check;
}

async function openSqliteLog(config: GatewayConfig, logger: Logger, beforeOpen: (firstStart: boolean) => void): Promise<OpenedLog> {
  const file = eventsFile(config.server.storageDir);
  const unlock = lockStorage(config.server.storageDir);
  try {
    // Not "the log is empty": a start that appended nothing has still created the database.
    const firstStart = !existsSync(file);
    beforeOpen(firstStart);
    const check = checked(checkLogAtStart(file, { key: config.keys.logHmacKey }), file, logger);
    const store = openSqliteEventStore(file);
    // A new log gets its anchor at once (keyed when a key is set): with a key, a log with events and
    // no anchor is refused at the next start (its anchor row was deleted).
    if (store.lastPosition() === 0 && readAnchor(file) === undefined) recordAnchor(file, 0, '', config.keys.logHmacKey);
    return {
      store,
      firstStart,
      check,
      checkPrefix: (stopped) => checkPrefixInBackground(file, check.from, { stopped }),
      where: file,
      release: async () => unlock(),
    };
  } catch (err) {
    unlock();
    throw err;
  }
}

async function openPostgresLog(config: GatewayConfig, logger: Logger, beforeOpen: (firstStart: boolean) => void): Promise<OpenedLog> {
  const { connection, where } = postgresConnection(config.storage.postgres ?? {});
  const release = await lockPostgresLog(connection, config.server.instanceName);
  let store: EventStore | undefined;
  try {
    store = await openPostgresEventStore(connection);
    // A database already holding events has started a gateway before.
    const firstStart = store.lastPosition() === 0;
    beforeOpen(firstStart);
    const check = checked(await checkPostgresLogAtStart(connection, { ...(config.keys.logHmacKey !== undefined ? { key: config.keys.logHmacKey } : {}) }), where, logger);
    return {
      store,
      firstStart,
      check,
      checkPrefix: (stopped) => checkPostgresPrefixInBackground(connection, check.from, { stopped }),
      where,
      release,
    };
  } catch (err) {
    await store?.close().catch(() => undefined);
    await release();
    throw err;
  }
}
