/**
 * DEVNET_STATE: the devnet keeps its state in memory and, when a file is given, writes a JSON
 * snapshot of it into SQLite after blocks that changed something, so a restarted devnet resumes at
 * the same height with the same accounts, escrows and txs.
 */
import Database from 'better-sqlite3';
import type { StateStore } from './chain.js';
import { fromSnapshot, toSnapshot, type ChainState } from './state.js';

export interface SqliteStateStore extends StateStore {
  load(): ChainState | undefined;
}

export function openStateStore(path: string): SqliteStateStore {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
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
