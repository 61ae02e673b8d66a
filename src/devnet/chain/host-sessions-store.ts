/**
 * DEVNET_STATE for the simulated hosts' protocol sessions: every diff a host applies is written
 * through (synchronously, before the host answers) to the devnet's state file, keyed by the host's
 * address, the protocol version, the escrow and the nonce; a restarted devnet's hosts replay them into
 * their Replica when the session is first used (src/devnet/hosts/protocol/session.ts `HostSessions`),
 * as a real host resumes from its storage (one per version's devshardd). Its own connection to the
 * same SQLite file (WAL), beside the chain's. A file written before versions were kept has rows
 * without one: they are moved, once, to version "v2" (the legacy route's sessions, tag "v2").
 */
import Database from 'better-sqlite3';
import { LEGACY_SESSION_VERSION, type HostSessionStore } from '../hosts/protocol/session.js';

export interface SqliteHostSessionStore extends HostSessionStore {
  close(): void;
}

export function openHostSessionStore(path: string): SqliteHostSessionStore {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  const create = (table: string) =>
    `CREATE TABLE IF NOT EXISTS ${table} (host TEXT NOT NULL, version TEXT NOT NULL, escrow TEXT NOT NULL, nonce INTEGER NOT NULL, diff TEXT NOT NULL, PRIMARY KEY (host, version, escrow, nonce))`;
  const columns = db.prepare<[], { name: string }>("SELECT name FROM pragma_table_info('devnet_host_diffs')").all();
  if (columns.length > 0 && !columns.some((c) => c.name === 'version')) {
    db.transaction(() => {
      db.exec(create('devnet_host_diffs_versioned'));
      db.prepare('INSERT INTO devnet_host_diffs_versioned (host, version, escrow, nonce, diff) SELECT host, ?, escrow, nonce, diff FROM devnet_host_diffs').run(LEGACY_SESSION_VERSION);
      db.exec('DROP TABLE devnet_host_diffs; ALTER TABLE devnet_host_diffs_versioned RENAME TO devnet_host_diffs');
    })();
  }
  db.exec(create('devnet_host_diffs'));
  const insert = db.prepare<[string, string, string, number, string]>('INSERT OR IGNORE INTO devnet_host_diffs (host, version, escrow, nonce, diff) VALUES (?, ?, ?, ?, ?)');
  const select = db.prepare<[string, string, string], { diff: string }>('SELECT diff FROM devnet_host_diffs WHERE host = ? AND version = ? AND escrow = ? ORDER BY nonce');
  let closed = false;
  return {
    load(host, escrowId, version = LEGACY_SESSION_VERSION) {
      if (closed) return [];
      return select.all(host, version, escrowId).map((r) => JSON.parse(r.diff) as ReturnType<HostSessionStore['load']>[number]);
    },
    save(host, escrowId, diff, version = LEGACY_SESSION_VERSION) {
      if (!closed) insert.run(host, version, escrowId, diff.nonce, JSON.stringify(diff));
    },
    close() {
      if (closed) return;
      closed = true;
      db.close();
    },
  };
}
