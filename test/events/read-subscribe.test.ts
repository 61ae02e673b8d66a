import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { firstValueFrom, take, toArray } from 'rxjs';
import { openSqliteEventStore, eventsFile } from '../../src/events/sqlite-store.js';
import type { RecordedEvent } from '../../src/events/envelope.js';
import { ev, useTempStore } from '../helpers/store-fixtures.js';

const t = useTempStore();

/** n events, one per append, round-robin over streams, group-committed 500 at a time. */
async function seed(n: number, streams = 3): Promise<void> {
  for (let i = 0; i < n; i += 500) {
    const count = Math.min(500, n - i);
    await Promise.all(
      Array.from({ length: count }, (_, j) => t.store.append(`s${(i + j) % streams}`, [ev('seeded', { n: i + j + 1 })], { expectedVersion: 'any' })),
    );
  }
}

describe('reads', () => {
  it('readAll is exclusive of afterPosition, honours limit, and survives a reopen', async () => {
    await seed(30);
    expect([...t.store.readAll(10, 5)].map((e) => e.position)).toEqual([11, 12, 13, 14, 15]);
    expect([...t.store.readAll(28)].map((e) => e.position)).toEqual([29, 30]);
    expect([...t.store.readAll(30)]).toEqual([]);
    const before = [...t.store.readAll()];
    await t.reopen();
    expect([...t.store.readAll()]).toEqual(before);
    expect(before.map((e) => (e.data as { n: number }).n)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
  });

  it('readAll pages lazily across page boundaries, and appends can commit mid-iteration', async () => {
    await seed(4_500, 1);
    const it = t.store.readAll(0);
    let count = 0;
    for (const e of it) {
      count++;
      expect(e.position).toBe(count);
      if (count === 2_500) t.store.appendNow('late', [ev()], { expectedVersion: 'any' }); // would throw "connection busy" with an open cursor
    }
    expect(count).toBe(4_501);
  });

  it('readStream returns one stream from a version, in order, at most `limit` events', async () => {
    await seed(9, 3);
    expect(t.store.readStream('s1').map((e) => [e.streamVersion, (e.data as { n: number }).n])).toEqual([[0, 2], [1, 5], [2, 8]]);
    expect(t.store.readStream('s1', 2).map((e) => e.streamVersion)).toEqual([2]);
    expect(t.store.readStream('missing')).toEqual([]);
    expect(t.store.readStream('s1', 1, 1).map((e) => e.streamVersion)).toEqual([1]);
    expect(t.store.readStream('s1', 0, 2).map((e) => e.streamVersion)).toEqual([0, 1]);
    expect(t.store.readStream('s1', 1, 10).map((e) => e.streamVersion)).toEqual([1, 2]);
  });

  it('records read back equal the records the append returned', async () => {
    const r = await t.store.append('s', [ev('x', { b: [1, { d: 'e' }], a: null })], { expectedVersion: -1 });
    expect(t.store.readStream('s')).toEqual(r.records);
  });
});

describe('readAllForFold', () => {
  it('yields the records readAll yields (metadata parsed and hashes loaded on demand), across pages and from a position', async () => {
    await seed(4_500, 2);
    t.store.appendNow('meta', [{ type: 'x', data: { a: 1 }, metadata: { actor: { kind: 'client', keyId: 'k1' }, requestId: 'r1', correlationId: 'c1' } }], { expectedVersion: 'any' });
    const plain = [...t.store.readAll()];
    const fold = [...t.store.readAllForFold()];
    expect(fold.length).toBe(4_501);
    expect(fold.map((r) => ({ ...r.toRecord() }))).toEqual(plain);
    expect(JSON.parse(JSON.stringify(fold))).toEqual(JSON.parse(JSON.stringify(plain)));
    const last = fold[fold.length - 1]!;
    expect([last.metadata, last.prevHash, last.hash]).toEqual([plain[4_500]!.metadata, plain[4_500]!.prevHash, plain[4_500]!.hash]);
    expect(last.metadataJson).toBe('{"actor":{"keyId":"k1","kind":"client"},"correlationId":"c1","requestId":"r1"}');
    expect([...t.store.readAllForFold(4_499)].map((r) => r.position)).toEqual([4_500, 4_501]);
    expect([...t.store.readAllForFold(4_501)]).toEqual([]);
  });

  it('sees commits made after it was first used, and appends can commit mid-iteration', async () => {
    await seed(10, 1);
    expect([...t.store.readAllForFold()].length).toBe(10);
    await t.store.append('late', [ev()], { expectedVersion: 'any' });
    expect([...t.store.readAllForFold()].length).toBe(11);
    await seed(4_000, 1);
    let count = 0;
    for (const e of t.store.readAllForFold()) {
      count++;
      expect(e.position).toBe(count);
      if (count === 2_500) t.store.appendNow('late', [ev()], { expectedVersion: 'any' });
    }
    expect(count).toBe(4_012);
  });

  it('on a reader thread: the same records, across pages, from a position; stopping early stops it', async () => {
    await seed(4_500, 3);
    t.store.appendNow('meta', [{ type: 'x', data: { s: 'é ✓ \u2028' }, metadata: { actor: { kind: 'client', keyId: 'ключ-✓' } } }], { expectedVersion: 'any' });
    const plain = [...t.store.readAll()];
    const fold = [...t.store.readAllForFold(0, { thread: true })];
    expect(fold.map((r) => r.toRecord())).toEqual(plain);
    expect([...t.store.readAllForFold(4_499, { thread: true })].map((r) => r.position)).toEqual([4_500, 4_501]);
    expect([...t.store.readAllForFold(4_501, { thread: true })]).toEqual([]);
    let n = 0;
    for (const r of t.store.readAllForFold(0, { thread: true })) {
      if (++n === 10) break;
      expect(r.position).toBe(n);
    }
    expect([...t.store.readAllForFold(2_000, { thread: true })].length).toBe(2_501);
  });

  it('on a reader thread: a read error is thrown to the caller', async () => {
    await seed(3, 1);
    expect([...t.store.readAllForFold(0, { thread: false })].length).toBe(3);
    rmSync(eventsFile(t.dir)); // open connections keep their descriptors; the reader thread cannot open the file
    expect(() => [...t.store.readAllForFold(0, { thread: true })]).toThrow(/fold reader thread/);
  });

  it('works on an in-memory store', async () => {
    const mem = openSqliteEventStore(':memory:');
    await mem.append('s', [ev('x', { n: 1 })], { expectedVersion: 'any' });
    expect([...mem.readAllForFold()].map((r) => r.toRecord())).toEqual([...mem.readAll()]);
    await mem.close();
  });
});

describe('subscribe', () => {
  it('catches up from a position, then goes live', async () => {
    await seed(5);
    const got: number[] = [];
    const sub = t.store.subscribe(2).subscribe((e) => got.push(e.position));
    expect(got).toEqual([3, 4, 5]);
    await t.store.append('s', [ev(), ev()], { expectedVersion: 'any' });
    expect(got).toEqual([3, 4, 5, 6, 7]);
    sub.unsubscribe();
    await t.store.append('s', [ev()], { expectedVersion: 'any' });
    expect(got).toHaveLength(5);
  });

  it('while appends are flowing, emits every event exactly once and in order across catch-up and live', async () => {
    await seed(5_000, 7); // more than one catch-up page, so commits land between pages
    const total = 5_000 + 200 * 3;
    const writers = (async () => {
      for (let round = 0; round < 200; round++) {
        await Promise.all([0, 1, 2].map((k) => t.store.append(`w${k}`, [ev('live', { round })], { expectedVersion: 'any' })));
      }
    })();
    const subs = [0, 1_000, 4_999].map((from) => firstValueFrom(t.store.subscribe(from).pipe(take(total - from), toArray())));
    await writers;
    const results = await Promise.all(subs);
    for (const [i, from] of [0, 1_000, 4_999].entries()) {
      expect(results[i]!.map((e: RecordedEvent) => e.position)).toEqual(Array.from({ length: total - from }, (_, k) => from + k + 1));
    }
  });

  it('completes subscribers when the store closes', async () => {
    let completed = false;
    t.store.subscribe().subscribe({ complete: () => (completed = true) });
    await t.store.close();
    expect(completed).toBe(true);
    t.store = openSqliteEventStore(eventsFile(t.dir));
  });
});
