import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { eventsFile, openSqliteEventStore, SqliteEventStore } from '../../src/events/sqlite-store.js';
import type { EventStore } from '../../src/events/store.js';
import { storeContract } from './store-contract.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function harness(writerThread: boolean) {
  return {
    async open(): Promise<EventStore> {
      const dir = mkdtempSync(join(tmpdir(), 'shardgate-contract-'));
      dirs.push(dir);
      return openSqliteEventStore(eventsFile(dir), { writerThread });
    },
    async reopen(store: EventStore): Promise<EventStore> {
      await store.close();
      return openSqliteEventStore((store as SqliteEventStore).file, { writerThread });
    },
  };
}

// Both write paths: group commits written by the writer thread (the default for a file) and in-thread.
storeContract('SQLite, writer thread', harness(true));
storeContract('SQLite, in-thread commits', harness(false));
