/**
 * Issue 39 item 6: events.sqlite and devnet.sqlite were mode 644 (in a 700 directory). Now the
 * files and their -wal/-shm are 600, also when an older version created the file 644.
 */
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openStateStore } from '../../src/devnet/chain/persistence.js';
import { openSqliteEventStore } from '../../src/events/sqlite-store.js';

const root = mkdtempSync(join(tmpdir(), 'shardgate-modes-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const mode = (f: string) => statSync(f).mode & 0o777;
function expectOwnerOnly(file: string) {
  for (const f of [file, `${file}-wal`, `${file}-shm`]) {
    expect(existsSync(f), f).toBe(true);
    expect(mode(f).toString(8), f).toBe('600');
  }
}

describe('SQLite files are owner-only (600), -wal and -shm too', () => {
  it('a new event log', async () => {
    const file = join(root, 'new', 'events.sqlite');
    const store = openSqliteEventStore(file, { writerThread: false });
    try {
      expectOwnerOnly(file);
    } finally {
      await store.close();
    }
  });

  it('an event log an older version created 644 is narrowed', async () => {
    const file = join(root, 'old-events.sqlite');
    writeFileSync(file, '', { mode: 0o644 });
    expect(mode(file)).toBe(0o644);
    const store = openSqliteEventStore(file, { writerThread: false });
    try {
      expectOwnerOnly(file);
    } finally {
      await store.close();
    }
  });

  it("the devnet's state file, new and old", () => {
    for (const [name, old] of [['devnet.sqlite', false], ['old-devnet.sqlite', true]] as const) {
      const file = join(root, name);
      if (old) writeFileSync(file, '', { mode: 0o644 });
      const store = openStateStore(file);
      try {
        expectOwnerOnly(file);
      } finally {
        store.close?.();
      }
    }
  });
});
