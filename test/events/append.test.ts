import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openSqliteEventStore, eventsFile, type SqliteEventStore } from '../../src/events/sqlite-store.js';
import { WrongExpectedVersionError } from '../../src/events/errors.js';
import { verifyLog } from '../../src/events/verify.js';
import { eventHash } from '../../src/events/hash.js';
import { canonicalJson } from '../../src/events/canonical-json.js';
import type { RecordedEvent } from '../../src/events/envelope.js';
import { ev, tempStorage } from '../helpers/store-fixtures.js';
import { readlinkSync, statSync } from 'node:fs';
import { join } from 'node:path';

let storage: ReturnType<typeof tempStorage>;
let store: SqliteEventStore;

beforeEach(() => {
  storage = tempStorage();
  store = openSqliteEventStore(eventsFile(join(storage.dir, 'state')));
});
afterEach(async () => {
  await store.close();
  storage.cleanup();
});

describe('opening', () => {
  it('creates the storage directory private to the user', () => {
    expect(statSync(join(storage.dir, 'state')).mode & 0o777).toBe(0o700);
  });

  it('makes commits durable: WAL with synchronous=FULL', () => {
    const db = (store as unknown as { db: { pragma(s: string, o: object): unknown } }).db;
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('synchronous', { simple: true })).toBe(2); // FULL
  });
});

describe('the writer thread', () => {
  // The benches read CPU per thread from /proc/<pid>/task/<id> and label the log's writer by this id.
  it.runIf(process.platform === 'linux')('names its Linux thread id, another thread than the caller', async () => {
    await store.append('escrow-1', [ev('a')], { expectedVersion: 'any' });
    const id = store.writerThreadId;
    expect(id).toBeGreaterThan(0);
    const self = /task\/(\d+)$/.exec(readlinkSync('/proc/thread-self'))![1];
    expect(String(id)).not.toBe(self);
    expect(statSync(`/proc/${process.pid}/task/${id}`).isDirectory()).toBe(true);
    const inThread = openSqliteEventStore(eventsFile(join(storage.dir, 'other')), { writerThread: false });
    expect(inThread.writerThreadId).toBeUndefined();
    await inThread.close();
  });
});

describe('append with expected version', () => {
  it('appends to a new stream and returns positions and versions', async () => {
    const r = await store.append('escrow-1', [ev('a'), ev('b')], { expectedVersion: 'no-stream' });
    expect(r.positions).toEqual([1, 2]);
    expect(r.nextExpectedVersion).toBe(1);
    expect(r.records.map((x) => [x.streamVersion, x.type])).toEqual([[0, 'a'], [1, 'b']]);
    expect(store.streamVersion('escrow-1')).toBe(1);
    expect(store.lastPosition()).toBe(2);
  });

  it('rejects a stale expected version with a typed error and writes nothing', async () => {
    await store.append('escrow-1', [ev('a')], { expectedVersion: -1 });
    const err = await store.append('escrow-1', [ev('b'), ev('c')], { expectedVersion: -1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WrongExpectedVersionError);
    expect(err).toMatchObject({ streamId: 'escrow-1', expected: -1, actual: 0 });
    expect(store.lastPosition()).toBe(1);
    expect(store.readStream('escrow-1').map((e) => e.type)).toEqual(['a']);
    await expect(store.append('escrow-2', [ev()], { expectedVersion: 3 })).rejects.toMatchObject({ actual: -1 });
    await expect(store.append('escrow-1', [ev()], { expectedVersion: 'no-stream' })).rejects.toBeInstanceOf(WrongExpectedVersionError);
  });

  it('live records equal the records read back from the log, whatever the key order or value kinds', async () => {
    const sortedPlain = { a: 1, b: { c: ['x', null, true], d: '10' } };
    const unsorted = { z: 1, a: { y: undefined, b: new Date(0) }, list: [undefined] };
    const r = await store.append('escrow-9', [
      { type: 'sorted', data: sortedPlain, metadata: { actor: { kind: 'admin' }, requestId: 'r' } },
      { type: 'unsorted', data: unsorted, metadata: { requestId: 'r', actor: { kind: 'client', keyId: 'k' } } },
    ], { expectedVersion: 'any' });
    const replayed = [...store.readAll()];
    expect(r.records).toStrictEqual(replayed);
    expect(replayed[1]!.data).toStrictEqual({ a: { b: '1970-01-01T00:00:00.000Z' }, list: [null], z: 1 });
  });

  it('chains the hashes on the writer thread exactly as the in-thread path does, across group commits', async () => {
    const live: RecordedEvent[] = [];
    store.onCommit((records) => live.push(...records));
    // Many appends in a few turns: several batches, the next queued while one is on the writer thread.
    for (let turn = 0; turn < 5; turn++) {
      await Promise.all(Array.from({ length: 40 }, (_, i) => store.append(`escrow-${i % 7}`, [ev('a', { turn, i }), ev('b', { note: 'é\u2028"' }), ev('c', { i, list: [turn, { x: null }], n: -0 })], { expectedVersion: 'any' })));
    }
    expect(live).toHaveLength(600);
    let prev = '';
    for (const r of live) {
      expect(r.prevHash).toBe(prev);
      expect(r.hash).toBe(eventHash(prev, { ...r, dataJson: canonicalJson(r.data), metadataJson: canonicalJson(r.metadata) }));
      prev = r.hash;
    }
    expect(live).toStrictEqual([...store.readAll()]);
    expect(await verifyLog(store.file)).toMatchObject({ ok: true, events: 600, lastHash: prev });
    // A store without the writer thread continues the same chain.
    await store.close();
    store = openSqliteEventStore(eventsFile(join(storage.dir, 'state')), { writerThread: false });
    const next = await store.append('escrow-1', [ev('c')], { expectedVersion: 'any' });
    expect(next.records[0]!.prevHash).toBe(prev);
    expect(await verifyLog(store.file)).toMatchObject({ ok: true, events: 601, lastHash: next.records[0]!.hash });
  });

  it('a batch refused by the writer thread (another connection wrote first) is redone in-thread with the same text and chain', async () => {
    await store.append('escrow-1', [ev('first', { a: 1 })], { expectedVersion: 'any' });
    // Plain values (sorted keys, shared with the records) and values serialized by the canonical walk: both kinds in the redone batch.
    const plain = { amount: '12', nested: { list: [1, 'é\u2028"', null], ok: true } };
    const other = openSqliteEventStore(store.file, { writerThread: false });
    await other.append('escrow-2', [ev('foreign')], { expectedVersion: 'any' });
    await other.close();
    const [r] = await Promise.all([
      store.append('escrow-1', [ev('plain', plain), ev('unsorted', { z: 1, a: 2 })], { expectedVersion: 'any' }),
      store.append('escrow-3', [{ type: 'meta', data: {}, metadata: { actor: { kind: 'admin' }, requestId: 'q' } }], { expectedVersion: 'any' }),
    ]);
    expect(r.positions).toEqual([3, 4]);
    const replayed = [...store.readAll()];
    expect(replayed.map((e) => e.type)).toEqual(['first', 'foreign', 'plain', 'unsorted', 'meta']);
    expect(r.records).toStrictEqual(replayed.slice(2, 4));
    expect(replayed[2]!.data).toStrictEqual(plain);
    expect(await verifyLog(store.file)).toMatchObject({ ok: true, events: 5 });
  });

  it("'any' skips the check", async () => {
    await store.append('s', [ev()], { expectedVersion: 'any' });
    await store.append('s', [ev()], { expectedVersion: 'any' });
    expect(store.streamVersion('s')).toBe(1);
  });

  it('a conflict inside a group commit rejects only that caller', async () => {
    const results = await Promise.allSettled([
      store.append('s', [ev('first')], { expectedVersion: -1 }),
      store.append('s', [ev('loser')], { expectedVersion: -1 }), // same expectation, queued second
      store.append('t', [ev('other')], { expectedVersion: -1 }),
      store.append('s', [ev('second')], { expectedVersion: 0 }),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(store.stats().commits).toBe(1);
    expect(store.readStream('s').map((e) => e.type)).toEqual(['first', 'second']);
    expect([...store.readAll()].map((e) => e.position)).toEqual([1, 2, 3]);
    expect(await verifyLog(store.file)).toMatchObject({ ok: true, events: 3 });
  });

  it('rejects bigint data with a clear error and still commits the others', async () => {
    const [bad, good] = await Promise.allSettled([
      store.append('s', [ev('x', { amount: 5n })], { expectedVersion: 'any' }),
      store.append('s', [ev('y', { amount: '5' })], { expectedVersion: 'any' }),
    ]);
    expect(bad.status).toBe('rejected');
    expect((bad as PromiseRejectedResult).reason.message).toMatch(/bigint.*event\[0\]\.data\.amount/);
    expect(good.status).toBe('fulfilled');
    expect(store.readStream('s').map((e) => e.data)).toEqual([{ amount: '5' }]);
  });
});

describe('group commit', () => {
  it('lands a burst of concurrent appends in few transactions, each resolved with its own positions', async () => {
    const n = 500;
    const commitsBefore = store.stats().commits;
    const results = await Promise.all(
      Array.from({ length: n }, (_, i) => store.append(`stream-${i % 17}`, [ev('e', { i }), ev('f', { i })], { expectedVersion: 'any' })),
    );
    expect(store.stats().commits - commitsBefore).toBe(1);
    const positions = results.flatMap((r) => r.positions);
    expect(new Set(positions).size).toBe(2 * n);
    expect(Math.min(...positions)).toBe(1);
    expect(Math.max(...positions)).toBe(2 * n);
    for (const [i, r] of results.entries()) {
      expect(r.positions[1]).toBe(r.positions[0]! + 1);
      const stored = [...store.readAll(r.positions[0]! - 1, 2)];
      expect(stored.map((e) => e.data)).toEqual([{ i }, { i }]);
    }
    expect(await verifyLog(store.file)).toMatchObject({ ok: true, events: 2 * n });
  });

  it('splits very large bursts at maxBatchEvents', async () => {
    const small = openSqliteEventStore(eventsFile(join(storage.dir, 'small')), { maxBatchEvents: 100 });
    await Promise.all(Array.from({ length: 1000 }, () => small.append('s', [ev()], { expectedVersion: 'any' })));
    expect(small.stats().commits).toBe(10);
    expect(small.streamVersion('s')).toBe(999);
    await small.close();
  });

  it('calls onCommit synchronously after the commit, in position order, before callers resume', async () => {
    const seen: number[][] = [];
    let resolvedBeforeListener = false;
    store.onCommit((records) => seen.push(records.map((r) => r.position)));
    const p = store.append('a', [ev(), ev()], { expectedVersion: 'any' }).then((r) => {
      resolvedBeforeListener = seen.length === 0;
      return r;
    });
    const q = store.append('b', [ev()], { expectedVersion: 'any' });
    await Promise.all([p, q]);
    expect(seen).toEqual([[1, 2, 3]]);
    expect(resolvedBeforeListener).toBe(false);
  });

  it('appendNow commits synchronously after whatever is queued', async () => {
    const queued = store.append('s', [ev('queued')], { expectedVersion: 'any' });
    const r = store.appendNow('s', [ev('now')], { expectedVersion: 0 });
    expect(r.positions).toEqual([2]);
    await expect(queued).resolves.toMatchObject({ positions: [1] });
    expect(() => store.appendNow('s', [ev()], { expectedVersion: 0 })).toThrow(WrongExpectedVersionError);
  });

  it('a callback staged withinMs waits that long for a commit of its own, and joins any earlier batch', async () => {
    const stage = (type: string) => {
      let done!: Promise<unknown>;
      store.stageForNextBatch(() => {
        done = store.append('lazy', [ev(type)], { expectedVersion: 'any' });
      }, { withinMs: 150 });
      return () => done;
    };
    // Alone: nothing is committed before its time, then one commit takes every staged callback.
    // Waits for that commit, and checks when it came (a lower bound: a busy machine only makes it later).
    const c0 = store.stats().commits;
    const firstCommit = new Promise<{ at: number; types: string[] }>((resolve) => {
      const off = store.onCommit((records) => {
        off();
        resolve({ at: Date.now(), types: records.map((r) => r.type) });
      });
    });
    const t0 = Date.now();
    stage('a');
    stage('b');
    const { at, types } = await firstCommit;
    expect(at - t0).toBeGreaterThanOrEqual(100); // withinMs 150, less the timer base's slack
    expect(types).toEqual(['a', 'b']);
    expect(store.lastPosition()).toBe(2);
    expect(store.stats().commits - c0).toBe(1);
    // Another append's batch takes it at once, in that commit.
    const c1 = store.stats().commits;
    const staged = stage('c');
    await store.append('urgent', [ev('u')], { expectedVersion: 'any' });
    await staged();
    expect(store.stats().commits - c1).toBe(1);
    expect([...store.readAll(2)].map((e) => e.type).sort()).toEqual(['c', 'u']);
    // Close commits what is staged without waiting for the deadline.
    stage('d');
    await store.close();
    store = openSqliteEventStore(store.file);
    expect(store.lastPosition()).toBe(5);
  });

  it('close waits for queued appends', async () => {
    const p = store.append('s', [ev()], { expectedVersion: 'any' });
    await store.close();
    await expect(p).resolves.toMatchObject({ positions: [1] });
    await expect(store.append('s', [ev()], { expectedVersion: 'any' })).rejects.toThrow(/closed/);
    store = openSqliteEventStore(store.file);
    expect(store.lastPosition()).toBe(1);
  });
});
