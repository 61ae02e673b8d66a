/** Opening the log's SQLite file: its directory and file modes, journal and durability, schema, guards. */
import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { ensureGuards } from '../guards.js';
import { migrate } from '../migrations.js';

/**
 * Opens (creating if needed, mode 700 for the directory) and migrates an event log.
 * Journal is WAL with `synchronous=FULL`: each commit is fsynced before any caller hears of it.
 */
export function openLogDatabase(filePath: string, busyTimeoutMs: number): Database.Database {
  if (filePath !== ':memory:') {
    mkdirSync(dirname(filePath), { recursive: true, mode: 0o700 });
    ownerOnly(filePath);
  }
  const db = new Database(filePath, { timeout: busyTimeoutMs });
  try {
    db.pragma('journal_mode = WAL');
    // better-sqlite3 is built with SQLITE_DEFAULT_WAL_SYNCHRONOUS=1 (NORMAL): no fsync per commit.
    db.pragma('synchronous = FULL');
    migrate(db);
    ensureGuards(db);
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}

/**
 * Mode 600 for the log and its -wal/-shm files (issue 39): created so before SQLite opens it (SQLite
 * gives -wal and -shm the database file's mode), and a log created 644 by an older version is
 * narrowed. Best effort: a file we may not chmod is left as it is.
 */
function ownerOnly(filePath: string): void {
  try {
    closeSync(openSync(filePath, 'a', 0o600));
  } catch {
    // SQLite's own open reports an unusable path.
  }
  for (const f of [filePath, `${filePath}-wal`, `${filePath}-shm`]) {
    try {
      chmodSync(f, 0o600);
    } catch {
      // absent (-wal/-shm before the first write) or not ours
    }
  }
}
