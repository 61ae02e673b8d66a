/** The start check's anchor on a PostgreSQL log (src/events/postgres/log-anchor.ts), as log-anchor.test.ts for SQLite. */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/events/envelope.js';
import { checkPostgresLogAtStart, checkPostgresPrefixInBackground, recordPostgresAnchor, verifyPostgresAnchor } from '../../src/events/postgres/log-anchor.js';
import { openPostgresEventStore } from '../../src/events/postgres/store.js';
import { usePgCluster } from '../helpers/pg-cluster.js';

const cluster = usePgCluster();

const ev = (type: string, data: unknown = {}): NewEvent => ({ type, data, metadata: { actor: { kind: 'admin' } } });

async function logWith(n: number): Promise<pg.PoolConfig> {
  const config = cluster.config(await cluster.createDatabase());
  const store = await openPostgresEventStore(config);
  for (let i = 0; i < n; i++) await store.append('s', [ev('e', { i })], { expectedVersion: i - 1 });
  await store.close();
  return config;
}

async function tamper(config: pg.PoolConfig, position: number): Promise<void> {
  const sql = new pg.Client(config);
  await sql.connect();
  await sql.query('ALTER TABLE events DISABLE TRIGGER events_no_update');
  await sql.query(`UPDATE events SET data = '{"i":99}' WHERE position = $1`, [position]);
  await sql.query('ALTER TABLE events ENABLE TRIGGER events_no_update');
  await sql.end();
}

describe('PostgreSQL log anchor', () => {
  it('verifies from the anchor to the tail and moves it; a change after the anchor is found at the next start', async () => {
    const config = await logWith(3);
    expect(await checkPostgresLogAtStart(config)).toMatchObject({ ok: true, from: 0, to: 3, checked: 3, keyed: false });
    const store = await openPostgresEventStore(config);
    await store.append('s', [ev('e', { i: 3 }), ev('e', { i: 4 })], { expectedVersion: 2 });
    await store.close();
    expect(await checkPostgresLogAtStart(config)).toMatchObject({ ok: true, from: 3, to: 5, checked: 2 });
    expect(await verifyPostgresAnchor(config, undefined)).toEqual({ state: 'holds', position: 5, keyed: 'unkeyed' });
    await tamper(config, 2);
    // Before the anchor, with its stored hash left: the start trusts the prefix; the background check finds it.
    expect(await checkPostgresLogAtStart(config)).toMatchObject({ ok: true, from: 5, to: 5, checked: 0 });
    expect(await checkPostgresPrefixInBackground(config, 5)).toMatchObject({ ok: false, position: 2, reason: expect.stringMatching(/hash mismatch/) });
  });

  it('keyed: a missing MAC is refused with the remedy; recorded with the key it holds, and a wrong key fails', async () => {
    const config = await logWith(2);
    expect(await checkPostgresLogAtStart(config, { key: 'k1' })).toMatchObject({ ok: false, position: 2, reason: expect.stringMatching(/verify --anchor/) });
    const sql = new pg.Client(config);
    await sql.connect();
    const { hash } = (await sql.query<{ hash: string }>('SELECT hash FROM events WHERE position = 2')).rows[0]!;
    await sql.end();
    await recordPostgresAnchor(config, 2, hash, 'k1');
    expect(await checkPostgresLogAtStart(config, { key: 'k1' })).toMatchObject({ ok: true, from: 2, to: 2, keyed: true });
    expect(await verifyPostgresAnchor(config, 'k1')).toEqual({ state: 'holds', position: 2, keyed: 'checked' });
    expect(await verifyPostgresAnchor(config, 'k2')).toMatchObject({ state: 'failed', position: 2 });
    expect(await checkPostgresLogAtStart(config, { key: 'k2' })).toMatchObject({ ok: false, position: 2 });
  });

  it('a change after the anchor fails the start check at its position', async () => {
    const config = await logWith(4);
    expect(await checkPostgresLogAtStart(config)).toMatchObject({ ok: true, to: 4 });
    const store = await openPostgresEventStore(config);
    await store.append('s', [ev('e', { i: 4 })], { expectedVersion: 3 });
    await store.close();
    await tamper(config, 5);
    expect(await checkPostgresLogAtStart(config)).toMatchObject({ ok: false, position: 5, reason: expect.stringMatching(/hash mismatch/) });
  });
});
