import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openSqliteEventStore, eventsFile, type SqliteEventStore } from '../../src/events/sqlite-store.js';
import { verifyLog } from '../../src/events/verify.js';
import { ev, tempStorage } from '../helpers/store-fixtures.js';

let storage: ReturnType<typeof tempStorage>;
let store: SqliteEventStore;
let raw: Database.Database;

beforeEach(async () => {
  storage = tempStorage();
  store = openSqliteEventStore(eventsFile(storage.dir));
  await store.append('s', [ev('a'), ev('b'), ev('c')], { expectedVersion: -1 });
  raw = new Database(eventsFile(storage.dir));
});
afterEach(async () => {
  raw.close();
  await store.close();
  storage.cleanup();
});

describe('append-only guards in SQLite', () => {
  it('abort UPDATE and DELETE of events', () => {
    expect(() => raw.prepare(`UPDATE events SET data = '{"x":1}' WHERE position = 2`).run()).toThrow(/append-only: UPDATE/);
    expect(() => raw.prepare('DELETE FROM events WHERE position = 3').run()).toThrow(/append-only: DELETE/);
    expect(() => raw.prepare('DELETE FROM events').run()).toThrow(/append-only/);
    expect([...store.readAll()].map((e) => e.type)).toEqual(['a', 'b', 'c']);
  });

  it('INSERT OR REPLACE (which skips DELETE triggers) cannot pass verify', async () => {
    const row = raw.prepare('SELECT * FROM events WHERE position = 2').get() as Record<string, unknown>;
    raw
      .prepare(`INSERT OR REPLACE INTO events VALUES (@position, @stream_id, @stream_version, 'forged', @schema_version, @data, @metadata, @time, @prev_hash, @hash)`)
      .run(row);
    expect(await verifyLog(eventsFile(storage.dir))).toMatchObject({ ok: false, position: 2 });
  });

  it('let stream heads only move forward', () => {
    expect(() => raw.prepare(`UPDATE streams SET version = 0 WHERE stream_id = 's'`).run()).toThrow(/forward/);
    expect(() => raw.prepare(`DELETE FROM streams`).run()).toThrow(/cannot be deleted/);
    expect(store.streamVersion('s')).toBe(2);
  });

  it('are restored when the store is reopened after someone dropped them', async () => {
    raw.exec('DROP TRIGGER events_no_update');
    await store.close();
    store = openSqliteEventStore(eventsFile(storage.dir));
    expect(() => raw.prepare(`UPDATE events SET type = 'x'`).run()).toThrow(/append-only/);
  });
});
