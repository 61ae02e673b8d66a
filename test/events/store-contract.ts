/**
 * The EventStore port's contract (src/events/store.ts): what every implementation must do, run
 * against each one by a test file (store-contract.sqlite.test.ts; PostgreSQL next, issue 42).
 * The harness opens a fresh, empty store per test and can reopen it on the same log.
 */
import { firstValueFrom, take, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/events/canonical-json.js';
import type { NewEvent, RecordedEvent } from '../../src/events/envelope.js';
import { EventStoreClosedError, WrongExpectedVersionError } from '../../src/events/errors.js';
import { eventHash } from '../../src/events/hash.js';
import type { EventStore } from '../../src/events/store.js';

export interface StoreHarness {
  /** A fresh, empty store (closed by the harness after the test). */
  open(): Promise<EventStore>;
  /** Closes `store` and opens the same log again. */
  reopen(store: EventStore): Promise<EventStore>;
}

/** Every record of a read, whether the store answers at once or asynchronously. */
async function all(records: Iterable<RecordedEvent> | AsyncIterable<RecordedEvent>): Promise<RecordedEvent[]> {
  const out: RecordedEvent[] = [];
  for await (const r of records) out.push(r);
  return out;
}

const ev = (type = 'contract.happened', data: unknown = {}): NewEvent => ({ type, data, metadata: { actor: { kind: 'admin' } } });

/** The hash of a record recomputed from its fields (what `shardgate verify` checks, store.ts principle 1). */
function rehash(r: RecordedEvent): string {
  return eventHash(r.prevHash, {
    position: r.position,
    streamId: r.streamId,
    streamVersion: r.streamVersion,
    type: r.type,
    schemaVersion: r.schemaVersion,
    dataJson: canonicalJson(r.data),
    metadataJson: canonicalJson(r.metadata),
    time: r.time,
  });
}

export function storeContract(name: string, harness: StoreHarness): void {
  const withStore = (run: (store: EventStore) => Promise<EventStore | void>) => async () => {
    const opened = await harness.open();
    let store = opened;
    try {
      store = (await run(opened)) ?? opened;
    } finally {
      await store.close();
    }
  };

  describe(`EventStore contract: ${name}`, () => {
    it('appends with the expected stream version; a conflict rejects that append only, with WrongExpectedVersionError', withStore(async (store) => {
      const a = await store.append('s-1', [ev(), ev()], { expectedVersion: 'no-stream' });
      expect(a.nextExpectedVersion).toBe(1);
      expect(a.positions).toEqual([1, 2]);
      expect(a.records.map((r) => [r.streamId, r.streamVersion])).toEqual([['s-1', 0], ['s-1', 1]]);
      await expect(store.append('s-1', [ev()], { expectedVersion: 'no-stream' })).rejects.toBeInstanceOf(WrongExpectedVersionError);
      const conflict = await store.append('s-1', [ev()], { expectedVersion: 0 }).catch((e: unknown) => e);
      expect(conflict).toBeInstanceOf(WrongExpectedVersionError);
      expect(conflict).toMatchObject({ streamId: 's-1', expected: 0, actual: 1 });
      expect((await store.append('s-1', [ev()], { expectedVersion: 1 })).nextExpectedVersion).toBe(2);
      expect((await store.append('s-1', [ev()], { expectedVersion: 'any' })).nextExpectedVersion).toBe(3);
      expect(store.streamVersion('s-1')).toBe(3);
      expect(store.streamVersion('absent')).toBe(-1);
      expect(store.lastPosition()).toBe(4);
      await expect(store.append('s-2', [ev()], { expectedVersion: -2 })).rejects.toThrow(TypeError);
      expect(store.stats()).toMatchObject({ appends: 3, conflicts: 2 });
    }));

    it('a retried append (same expected version) is refused once the first one committed: never written twice', withStore(async (store) => {
      const first = await store.append('retry', [ev('a', { n: 1 })], { expectedVersion: -1 });
      const again = await store.append('retry', [ev('a', { n: 1 })], { expectedVersion: -1 }).catch((e: unknown) => e);
      expect(again).toBeInstanceOf(WrongExpectedVersionError);
      expect(await store.readStream('retry')).toEqual(first.records);
      expect(store.lastPosition()).toBe(1);
    }));

    it('group commit: appends of one turn share a commit, keep call order, and a conflict fails only its own', withStore(async (store) => {
      const commits: number[][] = [];
      store.onCommit((records) => commits.push(records.map((r) => r.position)));
      const before = store.stats().commits;
      const results = await Promise.allSettled([
        store.append('g-a', [ev()], { expectedVersion: -1 }),
        store.append('g-b', [ev(), ev()], { expectedVersion: -1 }),
        store.append('g-a', [ev()], { expectedVersion: -1 }), // conflicts with the first
        store.append('g-a', [ev()], { expectedVersion: 0 }),
      ]);
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
      expect(results.flatMap((r) => (r.status === 'fulfilled' ? r.value.positions : []))).toEqual([1, 2, 3, 4]);
      expect(store.stats().commits - before).toBe(1);
      expect(commits).toEqual([[1, 2, 3, 4]]);
    }));

    it('stageForNextBatch: what the staged callback appends joins the next batch, once however often staged', withStore(async (store) => {
      const commits: number[][] = [];
      store.onCommit((records) => commits.push(records.map((r) => r.position)));
      let staged: Promise<unknown> | undefined;
      let takes = 0;
      const take = () => {
        takes++;
        staged = store.append('staged', [ev()], { expectedVersion: 'any' });
      };
      store.stageForNextBatch(take, { withinMs: 1_000 });
      store.stageForNextBatch(take, { withinMs: 1_000 });
      await store.append('other', [ev()], { expectedVersion: -1 }); // forms the batch before 1 s
      await staged;
      expect(takes).toBe(1);
      expect(commits).toEqual([[1, 2]]);
    }));

    it('withinMs: an append nobody hurries is still committed, within its time', withStore(async (store) => {
      const started = Date.now();
      const r = await store.append('later', [ev()], { expectedVersion: -1, withinMs: 20 });
      expect(r.positions).toEqual([1]);
      expect(Date.now() - started).toBeLessThan(5_000);
    }));

    it('reads by stream (from a version, with a limit) and from a position, in order', withStore(async (store) => {
      for (let i = 0; i < 5; i++) await store.append(i % 2 ? 'odd' : 'even', [ev('n', { i })], { expectedVersion: 'any' });
      expect((await store.readStream('even')).map((r) => (r.data as { i: number }).i)).toEqual([0, 2, 4]);
      expect((await store.readStream('even', 1)).map((r) => r.streamVersion)).toEqual([1, 2]);
      expect((await store.readStream('even', 1, 1)).map((r) => r.streamVersion)).toEqual([1]);
      expect(await store.readStream('absent')).toEqual([]);
      expect((await all(store.readAll())).map((r) => r.position)).toEqual([1, 2, 3, 4, 5]);
      expect((await all(store.readAll(2))).map((r) => r.position)).toEqual([3, 4, 5]);
      expect((await all(store.readAll(2, 2))).map((r) => r.position)).toEqual([3, 4]);
      expect(await all(store.readAll(5))).toEqual([]);
      const read = (await store.readStream('odd'))[0]!;
      expect(read).toMatchObject({ position: 2, streamId: 'odd', streamVersion: 0, type: 'n', schemaVersion: 1, data: { i: 1 }, metadata: { actor: { kind: 'admin' } } });
    }));

    it('records read back equal the records the append answered', withStore(async (store) => {
      const r = await store.append('same', [ev('x', { a: [1, { b: 'é' }] }), { type: 'y', schemaVersion: 2, data: null, metadata: { actor: { kind: 'admin' }, requestId: 'r' } }], { expectedVersion: -1 });
      expect(await store.readStream('same')).toEqual(r.records);
      expect(await all(store.readAll())).toEqual(r.records);
    }));

    it('subscribe: catches up from a position, then goes live, every event once and in order', withStore(async (store) => {
      for (let i = 0; i < 3; i++) await store.append('sub', [ev()], { expectedVersion: 'any' });
      const seen = firstValueFrom(store.subscribe(1).pipe(take(7), toArray()));
      // Live commits arrive while (and after) it catches up: none skipped, none twice.
      await Promise.all([store.append('sub', [ev(), ev()], { expectedVersion: 'any' }), store.append('sub2', [ev()], { expectedVersion: 'any' })]);
      await store.append('sub', [ev(), ev()], { expectedVersion: 'any' });
      expect((await seen).map((r) => r.position)).toEqual([2, 3, 4, 5, 6, 7, 8]);
    }));

    it('onCommit: each commit once, in position order, before the appender hears of it', withStore(async (store) => {
      const heard: number[] = [];
      const off = store.onCommit((records) => heard.push(...records.map((r) => r.position)));
      const r = await store.append('c', [ev(), ev()], { expectedVersion: -1 });
      expect(heard).toEqual(r.positions);
      off();
      await store.append('c', [ev()], { expectedVersion: 1 });
      expect(heard).toEqual([1, 2]);
    }));

    it('checkpoints: saved, overwritten, tied to the log; beyond the log refused; kept across a reopen', withStore(async (opened) => {
      let store = opened;
      expect(await store.loadCheckpoint('cp')).toBeUndefined();
      await store.saveCheckpoint('cp', 0, { n: 0 });
      expect(await store.loadCheckpoint('cp')).toEqual({ name: 'cp', position: 0, state: { n: 0 }, hash: '' });
      const r = await store.append('s', [ev(), ev()], { expectedVersion: -1 });
      await store.saveCheckpoint('cp', 2, { n: 2 });
      await expect(store.saveCheckpoint('cp', 3, {})).rejects.toThrow(RangeError);
      await store.saveCheckpoint('soon', 1, { n: 1 }, { soon: true });
      store = await harness.reopen(store);
      expect(await store.loadCheckpoint('cp')).toEqual({ name: 'cp', position: 2, state: { n: 2 }, hash: r.records[1]!.hash });
      expect((await store.loadCheckpoint<{ n: number }>('soon'))?.state).toEqual({ n: 1 });
      return store;
    }));

    it('the hash chain: each event chained to the previous one, recomputable from its fields, across a reopen', withStore(async (opened) => {
      let store = opened;
      await Promise.all([store.append('h-a', [ev('a', { x: 1 })], { expectedVersion: -1 }), store.append('h-b', [ev('b', { y: [2] }), ev('c')], { expectedVersion: -1 })]);
      store = await harness.reopen(store);
      await store.append('h-a', [ev('d', { z: 'é' })], { expectedVersion: 0 });
      const records = await all(store.readAll());
      expect(records.map((r) => r.position)).toEqual([1, 2, 3, 4]);
      let prev = '';
      for (const r of records) {
        expect(r.prevHash).toBe(prev);
        expect(r.hash).toBe(rehash(r));
        prev = r.hash;
      }
      return store;
    }));

    it('close: commits what is pending first; afterwards appends are refused with EventStoreClosedError', async () => {
      const store = await harness.open();
      const pending = store.append('p', [ev()], { expectedVersion: -1, withinMs: 10_000 });
      await store.close();
      await expect(pending).resolves.toMatchObject({ positions: [1] });
      await expect(store.append('p', [ev()], { expectedVersion: 'any' })).rejects.toBeInstanceOf(EventStoreClosedError);
      const again = await harness.reopen(store);
      expect(await again.readStream('p')).toHaveLength(1);
      await again.close();
    });
  });
}
