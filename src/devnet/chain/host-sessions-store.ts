/**
 * DEVNET_STATE for the simulated hosts' protocol sessions: every diff a host applies is written
 * through (synchronously, before the host answers) to the devnet's state file, keyed by the host's
 * address, the escrow and the nonce; a restarted devnet's hosts replay them into their Replica when
 * the session is first used (src/devnet/hosts/protocol/session.ts `HostSessions`), as a real host
 * resumes from its storage. Its own connection to the same SQLite file (WAL), beside the chain's.
 */
import Database from 'better-sqlite3';
import type { HostSessionStore } from '../hosts/protocol/session.js';

export interface SqliteHostSessionStore extends HostSessionStore {
  close(): void;
}

export function openHostSessionStore(path: string): SqliteHostSessionStore {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec('CREATE TABLE IF NOT EXISTS devnet_host_diffs (host TEXT NOT NULL, escrow TEXT NOT NULL, nonce INTEGER NOT NULL, diff TEXT NOT NULL, PRIMARY KEY (host, escrow, nonce))');
  const insert = db.prepare<[string, string, number, string]>('INSERT OR IGNORE INTO devnet_host_diffs (host, escrow, nonce, diff) VALUES (?, ?, ?, ?)');
  const select = db.prepare<[string, string], { diff: string }>('SELECT diff FROM devnet_host_diffs WHERE host = ? AND escrow = ? ORDER BY nonce');
  let closed = false;
  return {
    load(host, escrowId) {
      if (closed) return [];
      return select.all(host, escrowId).map((r) => JSON.parse(r.diff) as ReturnType<HostSessionStore['load']>[number]);
    },
    save(host, escrowId, diff) {
      if (!closed) insert.run(host, escrowId, diff.nonce, JSON.stringify(diff));
    },
    close() {
      if (closed) return;
      closed = true;
      db.close();
    },
  };
}
