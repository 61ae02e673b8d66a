/**
 * Leases on the shared PostgreSQL log (issue 42): one holder at a time, a new fencing token at
 * every taking, and the store refusing a stale holder's append inside the commit (nothing written),
 * including when the taking and the stale append race. Renewal, release, hand-over requests and
 * instance heartbeats, by the database's clock.
 */
import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/events/envelope.js';
import { LeaseLostError } from '../../src/events/errors.js';
import { openPostgresEventStore } from '../../src/events/postgres/store.js';
import { verifyPostgresLog } from '../../src/events/postgres/verify.js';
import { PG_MIGRATIONS } from '../../src/events/postgres/schema.js';
import pg from 'pg';
import { usePgCluster } from '../helpers/pg-cluster.js';

const cluster = usePgCluster();

const ev = (type: string, data: unknown = {}): NewEvent => ({ type, data, metadata: { actor: { kind: 'admin' } } });

async function twoInstances() {
  const db = await cluster.createDatabase();
  const a = await openPostgresEventStore(cluster.url(db));
  const b = await openPostgresEventStore(cluster.url(db));
  return { db, a, b, close: () => Promise.all([a.close(), b.close()]) };
}

describe('PostgreSQL leases and fencing', () => {
  it('one holder at a time; a stale holder\'s append is refused with LeaseLostError and nothing of it is written', async () => {
    const { db, a, b, close } = await twoInstances();
    try {
      const first = await a.leases.acquire('escrow:1', 'a', 60_000);
      expect(first).toMatchObject({ name: 'escrow:1', token: 1, tail: 0 });
      // Held and not expired: another instance cannot take it.
      expect(await b.leases.acquire('escrow:1', 'b', 60_000)).toBeUndefined();
      await a.append('escrow-1', [ev('Registered')], { expectedVersion: -1, fence: { lease: 'escrow:1', token: 1 } });

      // It expires (a holder that stopped renewing): b takes it with the next token, at the tail a left.
      await a.leases.renew('a', [{ name: 'escrow:1', token: 1 }], 1);
      await new Promise((r) => setTimeout(r, 5)); // the database's clock passes the 1 ms expiry
      const taken = await b.leases.acquire('escrow:1', 'b', 60_000);
      expect(taken).toMatchObject({ token: 2, tail: 1 });

      // a has not heard: its append under token 1 is refused by the store, even with the right version.
      const stale = a.append('escrow-1', [ev('Started')], { expectedVersion: 0, fence: { lease: 'escrow:1', token: 1 } });
      await expect(stale).rejects.toBeInstanceOf(LeaseLostError);
      await expect(stale).rejects.toThrow(/token 1 is stale \(token 2 is in force, held by b\); nothing was written/);
      // b writes under its token; the log holds a's first event and b's, nothing of the refused append.
      await b.append('escrow-1', [ev('Started')], { expectedVersion: 0, fence: { lease: 'escrow:1', token: 2 } });
      expect((await b.readStream('escrow-1')).map((r) => r.type)).toEqual(['Registered', 'Started']);
      // a renewing with its stale token renews nothing: it learns it lost the lease.
      expect((await a.leases.renew('a', [{ name: 'escrow:1', token: 1 }], 60_000)).renewed.size).toBe(0);
      // An append without a fence (a stream no lease covers) is not checked.
      await a.append('settings', [ev('SettingsChanged')], { expectedVersion: -1 });
      expect((await verifyPostgresLog(cluster.url(db))).ok).toBe(true);
    } finally {
      await close();
    }
  });

  it('a batch mixing a stale append with good ones: only the stale one fails', async () => {
    const { a, b, close } = await twoInstances();
    try {
      await a.leases.acquire('escrow:x', 'a', 60_000);
      await b.leases.acquire('escrow:y', 'b', 60_000);
      // In one group commit: a's own stream, b's stream under a token a never held, an unfenced one.
      const results = await Promise.allSettled([
        a.append('escrow-x', [ev('E')], { expectedVersion: -1, fence: { lease: 'escrow:x', token: 1 } }),
        a.append('escrow-y', [ev('E')], { expectedVersion: -1, fence: { lease: 'escrow:y', token: 7 } }),
        a.append('rotation-m', [ev('E')], { expectedVersion: -1 }),
      ]);
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(LeaseLostError);
      expect(a.streamVersion('escrow-y')).toBe(-1);
      expect(a.stats().commits).toBe(1);
    } finally {
      await close();
    }
  });

  it('a taking racing a stale holder\'s appends: every append after the taking\'s tail is refused, none before it is lost', async () => {
    const { a, b, close } = await twoInstances();
    try {
      await a.leases.acquire('escrow:r', 'a', 60_000);
      await a.leases.renew('a', [{ name: 'escrow:r', token: 1 }], 1);
      await new Promise((r) => setTimeout(r, 5));
      // a keeps appending one event at a time (each its own commit) while b takes the lease, and a
      // few more after its first refusal.
      const outcomes: ('ok' | 'lost')[] = [];
      let version = -1;
      const writing = (async () => {
        for (let i = 0, after = 0; i < 100_000 && after < 5; i++) {
          if (outcomes.includes('lost')) after++;
          try {
            await a.append('escrow-r', [ev('N', { i })], { expectedVersion: version, fence: { lease: 'escrow:r', token: 1 } });
            version++;
            outcomes.push('ok');
          } catch (e) {
            expect(e).toBeInstanceOf(LeaseLostError);
            outcomes.push('lost');
          }
        }
      })();
      while (outcomes.length < 5) await new Promise((r) => setImmediate(r));
      const taken = await b.leases.acquire('escrow:r', 'b', 60_000);
      await writing;
      expect(taken?.token).toBe(2);
      // Once refused, refused ever after; every accepted one is at or below the tail b got.
      const firstLost = outcomes.indexOf('lost');
      expect(firstLost).toBeGreaterThan(0);
      expect(outcomes.slice(firstLost).every((o) => o === 'lost')).toBe(true);
      const written = await b.readStream('escrow-r');
      expect(written.length).toBe(firstLost);
      expect(Math.max(...written.map((r) => r.position))).toBeLessThanOrEqual(taken!.tail);
    } finally {
      await close();
    }
  });

  it('a hand-over request reaches the holder at its renewal and the release gives it to the asker; unasked, a release frees it at once; instances beat by the database clock', async () => {
    const { a, b, close } = await twoInstances();
    try {
      const t = await a.leases.acquire('leader', 'a', 60_000);
      await b.leases.want('leader', 'b');
      const renewal = await a.leases.renew('a', [{ name: 'leader', token: t!.token }], 60_000);
      expect([...renewal.renewed]).toEqual(['leader']);
      expect([...renewal.wanted]).toEqual(['leader']);
      // Asked for: it goes to the one who asked (a third instance cannot take it meanwhile).
      expect([...(await a.leases.release('a', [{ name: 'leader', token: t!.token }], 60_000))]).toEqual(['leader']);
      expect((await a.leases.list()).find((l) => l.name === 'leader')).toMatchObject({ owner: 'b', token: 1, wantedBy: undefined });
      expect(await a.leases.acquire('leader', 'c', 60_000)).toBeUndefined();
      expect(await b.leases.acquire('leader', 'b', 60_000)).toMatchObject({ token: 2 });
      // Not asked for: free at once.
      expect([...(await b.leases.release('b', [{ name: 'leader', token: 2 }], 60_000))]).toEqual(['leader']);
      expect((await a.leases.list()).find((l) => l.name === 'leader')).toMatchObject({ owner: undefined, token: 2 });
      expect(await b.leases.acquire('leader', 'b', 60_000)).toMatchObject({ token: 3 });
      // The same owner taking again (a restart under its name) gets a new token: its old process is fenced out.
      expect(await b.leases.acquire('leader', 'b', 60_000)).toMatchObject({ token: 4 });

      await a.leases.beat({ name: 'a', url: 'http://127.0.0.1:1', stopping: false });
      await b.leases.beat({ name: 'b', url: undefined, stopping: true });
      const rows = await a.leases.instances();
      expect(rows.map((r) => [r.name, r.url, r.stopping])).toEqual([
        ['a', 'http://127.0.0.1:1', false],
        ['b', undefined, true],
      ]);
      expect(rows.every((r) => r.seenAgoMs >= 0 && r.seenAgoMs < 60_000)).toBe(true);
    } finally {
      await close();
    }
  });

  it('the lease tables are migration step 2; a database whose lease tables an earlier build created at open migrates and keeps its leases', async () => {
    const db = await cluster.createDatabase();
    // What the build before step 2 left: step 1 recorded, the lease tables created beside it, a lease held.
    const sql = new pg.Client(cluster.config(db));
    await sql.connect();
    try {
      await sql.query('CREATE TABLE shardgate_schema (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())');
      await sql.query(PG_MIGRATIONS[0]!.sql);
      await sql.query("INSERT INTO shardgate_schema (version, description) VALUES (1, 'step 1')");
      await sql.query(PG_MIGRATIONS[1]!.sql);
      await sql.query("INSERT INTO leases (name, owner, token, expires_at) VALUES ('escrow:7', 'a', 3, now() + interval '1 hour')");

      const store = await openPostgresEventStore(cluster.url(db));
      try {
        expect((await sql.query('SELECT version FROM shardgate_schema ORDER BY version')).rows.map((r: { version: number }) => r.version)).toEqual([1, 2]);
        // Still held by a, under its token: b cannot take it.
        expect(await store.leases.acquire('escrow:7', 'b', 60_000)).toBeUndefined();
        expect((await store.leases.list()).find((l) => l.name === 'escrow:7')).toMatchObject({ owner: 'a', token: 3 });
      } finally {
        await store.close();
      }
      // A fresh database gets both steps.
      const fresh = await cluster.createDatabase();
      await (await openPostgresEventStore(cluster.url(fresh))).close();
      const c = new pg.Client(cluster.config(fresh));
      await c.connect();
      expect((await c.query('SELECT version FROM shardgate_schema ORDER BY version')).rows.map((r: { version: number }) => r.version)).toEqual([1, 2]);
      expect((await c.query("SELECT count(*)::int AS n FROM information_schema.tables WHERE table_name IN ('leases', 'instances')")).rows[0].n).toBe(2);
      await c.end();
    } finally {
      await sql.end();
    }
  });
});
