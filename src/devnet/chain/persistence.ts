/**
 * DEVNET_STATE: the devnet keeps its state in memory and, when a file is given, writes a JSON
 * snapshot of it into SQLite synchronously after each block that changed something (before anyone
 * can see the block), so a restarted devnet — also one killed with SIGKILL — resumes at the same
 * height with the same accounts, escrows and txs. A tx only accepted into the mempool is lost with
 * the process, as on a real node that restarts. The simulated hosts' protocol sessions live in
 * memory only: after a restart the gateway sends each host every recorded diff once (docs/protocol.md).
 */
import { chmodSync, closeSync, openSync } from 'node:fs';
import Database from 'better-sqlite3';
import type { StateStore } from './chain.js';
import { fromSnapshot, toSnapshot, type ChainState } from './state.js';

export interface SqliteStateStore extends StateStore {
  load(): ChainState | undefined;
}

export function openStateStore(path: string): SqliteStateStore {
  // Mode 600 for the file and its -wal/-shm (SQLite gives them the database file's mode), also for a
  // file an older version created 644 (issue 39). Best effort: SQLite reports an unusable path.
  if (path !== ':memory:' && path !== '') {
    try {
      closeSync(openSync(path, 'a', 0o600));
    } catch {
      // SQLite's own open reports it
    }
    for (const f of [path, `${path}-wal`, `${path}-shm`]) {
      try {
        chmodSync(f, 0o600);
      } catch {
        // absent, or not ours
      }
    }
  }
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  // WAL + NORMAL: every commit survives a killed process (the OS has the WAL pages); only a power
  // loss could drop the last ones. That is the durability the devnet promises.
  db.pragma('synchronous = NORMAL');
  db.exec('CREATE TABLE IF NOT EXISTS devnet_snapshot (id INTEGER PRIMARY KEY CHECK (id = 1), height INTEGER NOT NULL, state TEXT NOT NULL)');
  const select = db.prepare<[], { state: string }>('SELECT state FROM devnet_snapshot WHERE id = 1');
  const upsert = db.prepare<[number, string]>(
    'INSERT INTO devnet_snapshot (id, height, state) VALUES (1, ?, ?) ON CONFLICT (id) DO UPDATE SET height = excluded.height, state = excluded.state',
  );
  return {
    load() {
      const row = select.get();
      return row ? fromSnapshot(row.state) : undefined;
    },
    save(state) {
      upsert.run(state.height, toSnapshot(state));
    },
    close() {
      db.close();
    },
  };
}
