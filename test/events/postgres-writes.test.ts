/** The PostgreSQL group commit's failure handling (src/events/postgres/writer.ts). */
import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/events/envelope.js';
import { openPostgresEventStore } from '../../src/events/postgres/store.js';
import { verifyPostgresLog } from '../../src/events/postgres/verify.js';
import { usePgCluster } from '../helpers/pg-cluster.js';

const cluster = usePgCluster();

const ev = (type: string, data: unknown = {}): NewEvent => ({ type, data, metadata: { actor: { kind: 'admin' } } });

describe('PostgreSQL event store: writes', () => {
  it('an append the database refuses fails alone; the rest of its batch commits, chained without a hole', async () => {
    const db = await cluster.createDatabase();
    const store = await openPostgresEventStore(cluster.url(db));
    try {
      const commits: number[][] = [];
      store.onCommit((records) => commits.push(records.map((r) => r.position)));
      // PostgreSQL text cannot hold NUL: that row aborts the batch's transaction.
      const results = await Promise.allSettled([
        store.append('w-1', [ev('a')], { expectedVersion: -1 }),
        store.append('bad\u0000stream', [ev('b')], { expectedVersion: -1 }),
        store.append('w-2', [ev('c'), ev('d')], { expectedVersion: -1 }),
      ]);
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect((results[1] as PromiseRejectedResult).reason).toMatchObject({ code: '22021' });
      expect(results.flatMap((r) => (r.status === 'fulfilled' ? r.value.positions : []))).toEqual([1, 2, 3]);
      expect(commits).toEqual([[1], [2, 3]]);
      expect(store.streamVersion('bad\u0000stream')).toBe(-1);
      expect(store.lastPosition()).toBe(3);
      expect(await verifyPostgresLog(cluster.config(db))).toMatchObject({ ok: true, events: 3 });
    } finally {
      await store.close();
    }
  });

  it('what a staged callback appends while the store closes is committed before it closes', async () => {
    const db = await cluster.createDatabase();
    const store = await openPostgresEventStore(cluster.url(db));
    let staged: Promise<unknown> | undefined;
    store.stageForNextBatch(() => {
      staged = store.append('late', [ev('x')], { expectedVersion: -1 });
    }, { withinMs: 60_000 });
    await store.close();
    await expect(staged).resolves.toMatchObject({ positions: [1] });
    expect(() => store.stageForNextBatch(() => undefined)).toThrow(/closed/);
  });
});
