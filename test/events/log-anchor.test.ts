/**
 * Issue 39 item 2: the start check verifies the hash chain from the last verified position (the
 * anchor), records the new one, and keys it with DEVSHARD_LOG_HMAC_KEY when set.
 */
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { eventHash } from '../../src/events/hash.js';
import { runVerify } from '../../src/cli/commands/verify.js';
import { checkLogAtStart, checkPrefixInBackground, readAnchor } from '../../src/events/log-anchor.js';
import { eventsFile, openSqliteEventStore } from '../../src/events/sqlite-store.js';
import { ev, tempStorage } from '../helpers/store-fixtures.js';

const KEY = 'test-anchor-key-0123456789abcdef';
let storage: ReturnType<typeof tempStorage>;
let file: string;

async function appendEvents(from: number, n: number): Promise<void> {
  const store = openSqliteEventStore(file);
  for (let i = from; i < from + n; i++) await store.append(`s${i % 3}`, [ev('t', { i, amount: String(i * 10) })], { expectedVersion: 'any' });
  await store.close();
}

/** Drop the no-update guard, change, put the guard back (the repro). */
function tamper(sql: string): void {
  const raw = new Database(file);
  raw.exec('DROP TRIGGER events_no_update');
  raw.exec(sql);
  raw.exec(`CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE is forbidden'); END`);
  raw.close();
}

/** Rewrites the whole chain from position 1 with recomputed hashes, as a careful attacker would. */
function rehashAll(): void {
  const raw = new Database(file);
  raw.exec('DROP TRIGGER events_no_update');
  const rows = raw.prepare('SELECT position, stream_id, stream_version, type, schema_version, data, metadata, time FROM events ORDER BY position').all() as {
    position: number; stream_id: string; stream_version: number; type: string; schema_version: number; data: string; metadata: string; time: string;
  }[];
  let prev = '';
  const update = raw.prepare('UPDATE events SET prev_hash = ?, hash = ? WHERE position = ?');
  for (const r of rows) {
    const h = eventHash(prev, { position: r.position, streamId: r.stream_id, streamVersion: r.stream_version, type: r.type, schemaVersion: r.schema_version, dataJson: r.data, metadataJson: r.metadata, time: r.time });
    update.run(prev, h, r.position);
    prev = h;
  }
  raw.exec(`CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE is forbidden'); END`);
  raw.close();
}

/** The fixture's log was written before a key was set: the operator keys its anchor once. */
async function keyAnchor(): Promise<void> {
  if ((await runVerify(file, () => {}, () => {}, KEY, { anchor: true })) !== 0) throw new Error('verify --anchor failed');
}

beforeEach(async () => {
  storage = tempStorage();
  file = eventsFile(storage.dir);
  await appendEvents(0, 10);
});
afterEach(() => storage.cleanup());

describe('checkLogAtStart', () => {
  it('verifies an old log (no anchor) whole and records the anchor at its tail', () => {
    expect(readAnchor(file)).toBeUndefined();
    const r = checkLogAtStart(file);
    expect(r).toMatchObject({ ok: true, from: 0, to: 10, checked: 10, keyed: false });
    expect(readAnchor(file)).toMatchObject({ position: 10, mac: null });
  });

  it('re-hashes only the events appended since the last start', async () => {
    checkLogAtStart(file);
    await appendEvents(10, 5);
    expect(checkLogAtStart(file)).toMatchObject({ ok: true, from: 10, to: 15, checked: 5 });
    expect(checkLogAtStart(file)).toMatchObject({ ok: true, from: 15, to: 15, checked: 0 });
  });

  it('refuses an event changed after the last verified position, naming its position', async () => {
    checkLogAtStart(file);
    await appendEvents(10, 5);
    tamper(`UPDATE events SET data = '{"amount":"999999","i":12}' WHERE position = 13`);
    const r = checkLogAtStart(file);
    expect(r).toMatchObject({ ok: false, position: 13 });
    expect(!r.ok && r.reason).toMatch(/hash mismatch/);
    // Refusing does not move the anchor.
    expect(readAnchor(file)?.position).toBe(10);
  });

  it('refuses events up to the anchor rewritten with recomputed hashes', () => {
    checkLogAtStart(file);
    tamper(`UPDATE events SET data = '{"amount":"999999","i":3}' WHERE position = 4`);
    rehashAll();
    expect(checkLogAtStart(file)).toMatchObject({ ok: false, position: 10 });
  });

  it('with a key: refuses a whole-chain rewrite that also rewrote the anchor row', async () => {
    await keyAnchor();
    expect(checkLogAtStart(file, { key: KEY })).toMatchObject({ ok: true, keyed: true });
    tamper(`UPDATE events SET data = '{"amount":"999999","i":3}' WHERE position = 4`);
    rehashAll();
    const raw = new Database(file);
    const tail = raw.prepare('SELECT hash FROM events WHERE position = 10').pluck().get() as string;
    raw.prepare('UPDATE log_anchor SET hash = ? WHERE id = 1').run(tail);
    raw.close();
    const r = checkLogAtStart(file, { key: KEY });
    expect(r).toMatchObject({ ok: false, position: 10 });
    expect(!r.ok && r.reason).toMatch(/does not match DEVSHARD_LOG_HMAC_KEY/);
    expect(!r.ok && r.reason).not.toContain(KEY);
    // Without the key the same rewrite is not detected at start (docs/faults.md says so).
    expect(checkLogAtStart(file)).toMatchObject({ ok: true });
  });

  it('with a key: refuses an anchor recorded without one (a stripped MAC looks the same) until `verify --anchor` keys it', async () => {
    checkLogAtStart(file);
    const r = checkLogAtStart(file, { key: KEY });
    expect(r).toMatchObject({ ok: false, position: 10 });
    expect(!r.ok && r.reason).toMatch(/recorded without DEVSHARD_LOG_HMAC_KEY.*shardgate verify --anchor/);
    // The operator's step: a whole verification, then the anchor keyed at the tail.
    let out = '';
    expect(await runVerify(file, (x) => (out += x), (x) => (out += x), KEY, { anchor: true })).toBe(0);
    expect(out).toContain('log anchor recorded at position 10, keyed with DEVSHARD_LOG_HMAC_KEY');
    expect(readAnchor(file)?.mac).toMatch(/^[0-9a-f]{64}$/);
    expect(checkLogAtStart(file, { key: KEY })).toMatchObject({ ok: true, keyed: true, warnings: [] });
    expect(checkLogAtStart(file, { key: 'another-key' })).toMatchObject({ ok: false, position: 10 });
  });

  it('with a key: refuses a log whose anchor row was deleted', async () => {
    await keyAnchor();
    expect(checkLogAtStart(file, { key: KEY })).toMatchObject({ ok: true });
    const raw = new Database(file);
    raw.exec('DELETE FROM log_anchor');
    raw.close();
    const r = checkLogAtStart(file, { key: KEY });
    expect(r).toMatchObject({ ok: false, position: 10 });
    expect(!r.ok && r.reason).toMatch(/no anchor recorded under DEVSHARD_LOG_HMAC_KEY/);
  });

  it('refuses a log truncated below the anchor', () => {
    checkLogAtStart(file);
    const raw = new Database(file);
    raw.exec('DROP TRIGGER events_no_delete');
    raw.exec('DELETE FROM events WHERE position > 7');
    raw.close();
    expect(checkLogAtStart(file)).toMatchObject({ ok: false, position: 10 });
  });

  it('accepts a missing file and an empty log', async () => {
    expect(checkLogAtStart(`${storage.dir}/none.sqlite`)).toMatchObject({ ok: true, to: 0 });
    const empty = `${storage.dir}/empty.sqlite`;
    await openSqliteEventStore(empty).close();
    expect(checkLogAtStart(empty)).toMatchObject({ ok: true, to: 0 });
    expect(checkLogAtStart(empty)).toMatchObject({ ok: true, from: 0, to: 0 });
  });
});

describe('shardgate verify and the anchor', () => {
  const verify = async (key?: string) => {
    let out = '';
    const code = await runVerify(file, (x) => (out += x), (x) => (out += x), key);
    return { code, out };
  };

  it('says the anchor holds, and whether its MAC was checked', async () => {
    await keyAnchor();
    expect(await verify(KEY)).toMatchObject({ code: 0, out: expect.stringContaining('log anchor at position 10 holds; its MAC matches DEVSHARD_LOG_HMAC_KEY') });
    expect((await verify()).out).toContain('keyed, but DEVSHARD_LOG_HMAC_KEY is unset here');
  });

  it('with the key: fails a whole-chain rewrite that re-hashed everything and moved the anchor row (the chain alone verifies)', async () => {
    await keyAnchor();
    tamper(`UPDATE events SET data = '{"amount":"999999","i":3}' WHERE position = 4`);
    rehashAll();
    const raw = new Database(file);
    raw.prepare('UPDATE log_anchor SET hash = ? WHERE id = 1').run(raw.prepare('SELECT hash FROM events WHERE position = 10').pluck().get());
    raw.close();
    const r = await verify(KEY);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/FAILED at position 10: the log anchor at position 10 does not match DEVSHARD_LOG_HMAC_KEY/);
    expect(r.out).not.toContain(KEY);
    // Without the key the rewrite is consistent: verify cannot tell (docs/faults.md says so).
    expect((await verify()).code).toBe(0);
  });

  it('fails a chain re-hashed below an anchor that was left as it was', async () => {
    checkLogAtStart(file);
    tamper(`UPDATE events SET data = '{"amount":"999999","i":3}' WHERE position = 4`);
    rehashAll();
    const r = await verify();
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/FAILED at position 10: the hash at the last verified position 10 differs/);
  });
});

describe('the background check of what the start took on trust', () => {
  it('finds an event before the anchor changed with its stored hash left as it was, by position', async () => {
    checkLogAtStart(file);
    await appendEvents(10, 5);
    expect(checkLogAtStart(file)).toMatchObject({ ok: true, from: 10, to: 15 });
    tamper(`UPDATE events SET data = '{"amount":"999999","i":3}' WHERE position = 4`);
    // The start does not see it (only the tail is re-hashed)...
    expect(checkLogAtStart(file)).toMatchObject({ ok: true, from: 15, checked: 0 });
    // ...the background check does, in batches.
    const r = await checkPrefixInBackground(file, 15, { batch: 3 });
    expect(r).toMatchObject({ ok: false, position: 4 });
    expect(r && !r.ok && r.reason).toMatch(/hash mismatch/);
  });

  it('passes an untouched log, batch by batch, and stops when asked', async () => {
    await appendEvents(10, 5);
    expect(await checkPrefixInBackground(file, 15, { batch: 4 })).toEqual({ ok: true, checked: 15 });
    expect(await checkPrefixInBackground(file, 15, { batch: 4, stopped: () => true })).toBeUndefined();
    expect(await checkPrefixInBackground(file, 0)).toEqual({ ok: true, checked: 0 });
  });
});
