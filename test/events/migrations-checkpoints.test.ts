import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LATEST_SCHEMA_VERSION, migrate, schemaVersion } from '../../src/events/migrations.js';
import { openSqliteEventStore, eventsFile } from '../../src/events/sqlite-store.js';
import { eventHash } from '../../src/events/hash.js';
import { verifyLog } from '../../src/events/verify.js';
import { ev, tempStorage } from '../helpers/store-fixtures.js';

let storage: ReturnType<typeof tempStorage>;
beforeEach(() => {
  storage = tempStorage();
});
afterEach(() => storage.cleanup());

/** A log as the first released schema wrote it: v1 tables, rows chained by hand. */
function writeV1Log(file: string, n: number): void {
  const db = new Database(file);
  migrate(db, 1);
  let prev = '';
  const insert = db.prepare('INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)');
  for (let p = 1; p <= n; p++) {
    const row = { position: p, streamId: 'old', streamVersion: p - 1, type: 'legacy', schemaVersion: 1, dataJson: `{"p":${p}}`, metadataJson: '{"actor":{"kind":"startup"}}', time: '2023-05-01T00:00:00.000Z' };
    const hash = eventHash(prev, row);
    insert.run(p, row.streamId, row.streamVersion, row.type, row.schemaVersion, row.dataJson, row.metadataJson, row.time, prev, hash);
    prev = hash;
  }
  db.prepare('INSERT INTO streams VALUES (?, ?)').run('old', n - 1);
  db.close();
}

describe('schema migrations', () => {
  it('opening a v1 file upgrades it in place and keeps every event', async () => {
    const file = eventsFile(storage.dir);
    writeV1Log(file, 25);
    const probe = new Database(file, { readonly: true });
    expect(schemaVersion(probe)).toBe(1);
    expect(probe.prepare(`SELECT count(*) FROM sqlite_master WHERE name = 'checkpoints'`).pluck().get()).toBe(0);
    probe.close();

    const store = openSqliteEventStore(file);
    expect([...store.readAll()].map((e) => (e.data as { p: number }).p)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    await store.append('old', [ev('new')], { expectedVersion: 24 }); // stream head carried over
    await store.saveCheckpoint('pool', 26, { ok: true }); // v2 table exists
    await store.close();

    const after = new Database(file, { readonly: true });
    expect(schemaVersion(after)).toBe(LATEST_SCHEMA_VERSION);
    after.close();
    expect(await verifyLog(file)).toMatchObject({ ok: true, events: 26, warnings: [] });
  });

  it('refuses a file from a newer build instead of guessing', () => {
    const file = eventsFile(storage.dir);
    const db = new Database(file);
    migrate(db);
    db.pragma(`user_version = ${LATEST_SCHEMA_VERSION + 1}`);
    db.close();
    expect(() => openSqliteEventStore(file)).toThrow(/newer than this build/);
  });
});

describe('checkpoints', () => {
  it('save, overwrite and load by name', async () => {
    const store = openSqliteEventStore(eventsFile(storage.dir));
    expect(store.loadCheckpoint('pool')).toBeUndefined();
    await store.saveCheckpoint('pool', 0, { escrows: [] });
    const r = await store.append('s', [ev(), ev()], { expectedVersion: -1 });
    await store.saveCheckpoint('pool', 2, { escrows: ['e1'] });
    expect(store.loadCheckpoint('pool')).toEqual({ name: 'pool', position: 2, state: { escrows: ['e1'] }, hash: r.records[1]!.hash });
    await expect(store.saveCheckpoint('pool', 3, {})).rejects.toThrow(/no event at position 3/);
    await store.close();
  });

  it('saveCheckpointSoon: written by the writer thread with the next batch, or alone; a close writes a pending one', async () => {
    const file = eventsFile(storage.dir);
    const store = openSqliteEventStore(file);
    const first = await store.append('s', [ev('a')], { expectedVersion: -1 });
    store.saveCheckpointSoon('pool', 1, { n: 1 });
    expect(store.loadCheckpoint('pool')).toBeUndefined(); // not written on the caller's turn
    const second = await store.append('s', [ev('b')], { expectedVersion: 0 }); // the batch carries it
    expect(store.loadCheckpoint('pool')).toEqual({ name: 'pool', position: 1, state: { n: 1 }, hash: first.records[0]!.hash });
    store.saveCheckpointSoon('pool', 2, { n: 2 }); // nothing else queued: a batch of its own
    await expect.poll(() => store.loadCheckpoint('pool')?.state, { timeout: 10_000 }).toEqual({ n: 2 });
    expect(() => store.saveCheckpointSoon('pool', 9, {})).toThrow(/no event at position 9/);
    store.saveCheckpointSoon('pool', 2, { n: 3 });
    await store.close(); // pending: written on close
    const reopened = openSqliteEventStore(file);
    expect(reopened.loadCheckpoint('pool')).toEqual({ name: 'pool', position: 2, state: { n: 3 }, hash: second.records[0]!.hash });
    await reopened.close();
  });

  it('a checkpoint from another log is ignored so the projection rebuilds', async () => {
    const file = eventsFile(storage.dir);
    const store = openSqliteEventStore(file);
    await store.append('s', [ev('a')], { expectedVersion: -1 });
    await store.saveCheckpoint('pool', 1, { n: 1 });
    await store.close();
    const raw = new Database(file);
    raw.prepare(`UPDATE checkpoints SET hash = 'ffff'`).run();
    raw.close();
    const reopened = openSqliteEventStore(file);
    expect(reopened.loadCheckpoint('pool')).toBeUndefined();
    await reopened.close();
  });
});
