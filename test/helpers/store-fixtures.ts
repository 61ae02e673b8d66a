import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach } from 'vitest';
import type { NewEvent } from '../../src/events/envelope.js';
import { eventsFile, openSqliteEventStore, type SqliteEventStore } from '../../src/events/sqlite-store.js';

/** A fresh temp directory per test; call the returned cleanup in afterEach. */
export function tempStorage(prefix = 'shardgate-store-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A minimal valid event; the store does not care what the catalog says. */
export function ev(type = 'test.happened', data: unknown = {}): NewEvent {
  return { type, data, metadata: { actor: { kind: 'admin' } } };
}

/**
 * A store on a fresh temp directory for every test of the file: opened in beforeEach, closed and
 * removed in afterEach. Read `t.store` inside tests (it is replaced each time).
 */
export function useTempStore(): { store: SqliteEventStore; dir: string; reopen(): Promise<void> } {
  let storage: ReturnType<typeof tempStorage>;
  const t = {
    store: undefined as unknown as SqliteEventStore,
    dir: '',
    async reopen() {
      await t.store.close();
      t.store = openSqliteEventStore(eventsFile(t.dir));
    },
  };
  beforeEach(() => {
    storage = tempStorage();
    t.dir = storage.dir;
    t.store = openSqliteEventStore(eventsFile(storage.dir));
  });
  afterEach(async () => {
    await t.store.close();
    storage.cleanup();
  });
  return t;
}
