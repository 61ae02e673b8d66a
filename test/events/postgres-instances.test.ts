/**
 * Several instances on one PostgreSQL log (issue 42): concurrent writers from two store instances
 * (two pools) keep one unforked, gapless chain; a reader never sees a position committed behind
 * one it has already read (the sequence gap); each instance hears every event once, in order;
 * expected versions hold across instances; a follower hears another's commit within a second,
 * by LISTEN/NOTIFY and by the poll alone.
 */
import { filter, firstValueFrom, take, toArray } from 'rxjs';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { NewEvent, RecordedEvent } from '../../src/events/envelope.js';
import { WrongExpectedVersionError } from '../../src/events/errors.js';
import { openPostgresEventStore, type PostgresEventStore, type PostgresEventStoreOptions } from '../../src/events/postgres/store.js';
import { verifyPostgresLog } from '../../src/events/postgres/verify.js';
import { usePgCluster } from '../helpers/pg-cluster.js';

const cluster = usePgCluster();

const ev = (type: string, data: unknown = {}): NewEvent => ({ type, data, metadata: { actor: { kind: 'admin' } } });

async function twoInstances(opts: { a?: PostgresEventStoreOptions; b?: PostgresEventStoreOptions } = {}) {
  const db = await cluster.createDatabase();
  const a = await openPostgresEventStore(cluster.url(db), opts.a);
  const b = await openPostgresEventStore(cluster.config(db), opts.b);
  return { db, a, b, close: () => Promise.all([a.close(), b.close()]) };
}

/** Everything a store hears through onCommit, in the order heard. */
function heard(store: PostgresEventStore): RecordedEvent[] {
  const out: RecordedEvent[] = [];
  store.onCommit((records) => out.push(...records));
  return out;
}

describe('PostgreSQL event store: several instances on one log', () => {
  it('concurrent writers from two instances: one unforked chain, gapless positions, readers never skip, each instance hears every event once in order', async () => {
    const { db, a, b, close } = await twoInstances();
    try {
      const waves = 20;
      const perWave = 8; // appends per instance per wave, each of 1 or 2 events
      const total = waves * perWave * 2 * 1.5;
      const heardA = heard(a);
      const heardB = heard(b);
      const subA = firstValueFrom(a.subscribe(0).pipe(take(total), toArray()));
      const subB = firstValueFrom(b.subscribe(0).pipe(take(total), toArray()));

      // A raw reader polling "position > last" all along: every answer must continue exactly at
      // last + 1. With positions from a sequence, a later-committed lower position would show up
      // here as a hole that fills afterwards.
      const watcher = new pg.Client(cluster.config(db));
      await watcher.connect();
      const holes: string[] = [];
      let watched = 0;
      let writing = true;
      const watch = (async () => {
        while (writing || watched < total) {
          const rows = (await watcher.query<{ position: string }>('SELECT position FROM events WHERE position > $1 ORDER BY position', [watched])).rows;
          for (const r of rows) {
            const p = Number(r.position);
            if (p !== watched + 1) holes.push(`${watched} -> ${p}`);
            watched = p;
          }
        }
      })();

      for (let w = 0; w < waves; w++) {
        const appends: Promise<unknown>[] = [];
        for (let i = 0; i < perWave; i++) {
          const events = i % 2 ? [ev('e', { w, i })] : [ev('e', { w, i }), ev('f', { w, i })];
          appends.push(a.append(i % 3 ? `a-${i}` : 'shared', events.map((e) => ({ ...e, data: { by: 'a', ...(e.data as object) } })), { expectedVersion: 'any' }));
          appends.push(b.append(i % 3 ? `b-${i}` : 'shared', events.map((e) => ({ ...e, data: { by: 'b', ...(e.data as object) } })), { expectedVersion: 'any' }));
        }
        await Promise.all(appends);
      }
      writing = false;
      await watch;
      await watcher.end();

      const [seenA, seenB] = await Promise.all([subA, subB]);
      const expected = Array.from({ length: total }, (_, i) => i + 1);
      expect(seenA.map((r) => r.position)).toEqual(expected);
      expect(seenB.map((r) => r.position)).toEqual(expected);
      expect(holes).toEqual([]);
      // onCommit: both instances heard the whole shared log, once each, in order.
      await Promise.all([a.catchUp(), b.catchUp()]);
      expect(heardA.map((r) => r.position)).toEqual(expected);
      expect(heardB.map((r) => r.position)).toEqual(expected);
      // The same records on both sides (hash chain included), and both wrote.
      expect(seenA.map((r) => r.hash)).toEqual(seenB.map((r) => r.hash));
      expect(new Set(seenA.map((r) => (r.data as { by: string }).by))).toEqual(new Set(['a', 'b']));
      expect(a.stats().commits).toBeGreaterThan(0);
      expect(b.stats().commits).toBeGreaterThan(0);
      // In memory: the tail and each stream's head, the same on both instances.
      expect(a.lastPosition()).toBe(total);
      expect(b.lastPosition()).toBe(total);
      const sharedEvents = seenA.filter((r) => r.streamId === 'shared');
      expect(sharedEvents.map((r) => r.streamVersion)).toEqual(sharedEvents.map((_, i) => i));
      expect(a.streamVersion('shared')).toBe(sharedEvents.length - 1);
      expect(b.streamVersion('shared')).toBe(sharedEvents.length - 1);
      // One chain, recomputable (what `shardgate verify` checks), with no fork.
      const verdict = await verifyPostgresLog(cluster.config(db));
      expect(verdict).toMatchObject({ ok: true, events: total, lastPosition: total, lastHash: seenA[total - 1]!.hash, warnings: [] });
    } finally {
      await close();
    }
  });

  it('expected versions hold across instances: an instance that has not heard of another append still gets the conflict', async () => {
    const { a, b, close } = await twoInstances({ b: { listen: false, pollMs: 60_000 } }); // b hears only through its own commits
    try {
      await a.append('x', [ev('one')], { expectedVersion: -1 });
      expect(b.streamVersion('x')).toBe(-1); // b has not followed yet
      const conflict = await b.append('x', [ev('again')], { expectedVersion: -1 }).catch((e: unknown) => e);
      expect(conflict).toBeInstanceOf(WrongExpectedVersionError);
      expect(conflict).toMatchObject({ streamId: 'x', expected: -1, actual: 0 });
      // Its commit brought b up to date (a's event delivered first), so the retry knows the head.
      expect(b.streamVersion('x')).toBe(0);
      const r = await b.append('x', [ev('two')], { expectedVersion: 0 });
      expect(r.positions).toEqual([2]);
      expect(r.records[0]!.prevHash).toBe((await a.readStream('x'))[0]!.hash);
    } finally {
      await close();
    }
  });

  it('a commit of one instance heard by its own listeners after the other instance\'s earlier commits, in position order', async () => {
    const { a, b, close } = await twoInstances({ b: { listen: false, pollMs: 60_000 } });
    try {
      const heardB = heard(b);
      await a.append('p', [ev('a1'), ev('a2')], { expectedVersion: -1 });
      await b.append('q', [ev('b1')], { expectedVersion: -1 });
      expect(heardB.map((r) => [r.position, r.type])).toEqual([[1, 'a1'], [2, 'a2'], [3, 'b1']]);
      expect(b.lastPosition()).toBe(3);
    } finally {
      await close();
    }
  });

  for (const mode of [{ name: 'LISTEN/NOTIFY', opts: {} }, { name: 'the poll alone (500 ms bound)', opts: { listen: false, pollMs: 500 } }]) {
    it(`a follower instance hears another instance's commit within a second: ${mode.name}`, async () => {
      const { a, b, close } = await twoInstances({ b: mode.opts });
      try {
        const arrived = firstValueFrom(b.subscribe(0).pipe(filter((r) => r.type === 'settings.changed')));
        // The follower's delivery (onCommit) is what moves b's in-memory tail; subscribe's catch-up
        // may read the committed row from the database before that.
        const heard = new Promise<void>((resolve) => {
          const off = b.onCommit((records) => {
            if (!records.some((x) => x.type === 'settings.changed')) return;
            off();
            resolve();
          });
        });
        const started = Date.now();
        const r = await a.append('settings', [ev('settings.changed', { killSwitch: true })], { expectedVersion: -1 });
        const got = await arrived;
        await heard;
        expect(Date.now() - started).toBeLessThan(1_000);
        expect(got).toEqual(r.records[0]);
        expect(b.lastPosition()).toBe(1);
        expect(b.streamVersion('settings')).toBe(0);
      } finally {
        await close();
      }
    });
  }
});
