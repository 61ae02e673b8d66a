/**
 * DEVNET_STATE: the devnet keeps its state in memory and, when a file is given, writes a JSON
 * snapshot of it into SQLite synchronously after each block that changed something (before anyone
 * can see the block), so a restarted devnet — also one killed with SIGKILL — resumes at the same
 * height with the same accounts, escrows and txs. A tx only accepted into the mempool is lost with
 * the process, as on a real node that restarts. The simulated hosts' ledgers (what each host served
 * per escrow and slot) are written through on every recorded request: real hosts do not forget
 * what they served when the gateway dies, and they refuse to sign claims they cannot vouch for.
 */
import Database from 'better-sqlite3';
import type { LedgerSnapshot } from '../hosts/ledger.js';
import type { StateStore } from './chain.js';
import { fromSnapshot, toSnapshot, type ChainState } from './state.js';

export interface SqliteStateStore extends StateStore {
  load(): ChainState | undefined;
  /** The simulated hosts' ledgers, keyed by host index. */
  loadLedgers(): Record<number, LedgerSnapshot>;
  saveTally(hostIndex: number, escrowId: string, tally: LedgerSnapshot[string][number]): void;
}

export function openStateStore(path: string): SqliteStateStore {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  // WAL + NORMAL: every commit survives a killed process (the OS has the WAL pages); only a power
  // loss could drop the last ones. That is the durability the devnet promises.
  db.pragma('synchronous = NORMAL');
  db.exec('CREATE TABLE IF NOT EXISTS devnet_snapshot (id INTEGER PRIMARY KEY CHECK (id = 1), height INTEGER NOT NULL, state TEXT NOT NULL)');
  db.exec('CREATE TABLE IF NOT EXISTS devnet_host_ledger (host INTEGER NOT NULL, escrow TEXT NOT NULL, slot INTEGER NOT NULL, tally TEXT NOT NULL, PRIMARY KEY (host, escrow, slot))');
  const upsertTally = db.prepare<[number, string, number, string]>(
    'INSERT INTO devnet_host_ledger (host, escrow, slot, tally) VALUES (?, ?, ?, ?) ON CONFLICT (host, escrow, slot) DO UPDATE SET tally = excluded.tally',
  );
  const selectTallies = db.prepare<[], { host: number; escrow: string; tally: string }>('SELECT host, escrow, tally FROM devnet_host_ledger ORDER BY host, escrow, slot');
  let closed = false;
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
    loadLedgers() {
      const out: Record<number, LedgerSnapshot> = {};
      for (const r of selectTallies.all()) ((out[r.host] ??= {})[r.escrow] ??= []).push(JSON.parse(r.tally) as LedgerSnapshot[string][number]);
      return out;
    },
    saveTally(hostIndex, escrowId, tally) {
      if (!closed) upsertTally.run(hostIndex, escrowId, tally.slotId, JSON.stringify(tally));
    },
    close() {
      closed = true;
      db.close();
    },
  };
}
