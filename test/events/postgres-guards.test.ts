/**
 * The PostgreSQL log is append-only in the database itself: UPDATE, DELETE and TRUNCATE of events
 * are refused by triggers (even for a superuser) and by the privileges revoked from the role that
 * owns the tables; stream heads and the log head only move forward; `verify` sees a tampered row.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/events/envelope.js';
import { openPostgresEventStore } from '../../src/events/postgres/store.js';
import { verifyPostgresLog } from '../../src/events/postgres/verify.js';
import { usePgCluster } from '../helpers/pg-cluster.js';

const cluster = usePgCluster();

const ev = (type: string, data: unknown = {}): NewEvent => ({ type, data, metadata: { actor: { kind: 'admin' } } });

async function withLog(run: (sql: pg.Client, db: string) => Promise<void>, user?: string): Promise<void> {
  const db = await cluster.createDatabase(user);
  const config = { ...cluster.config(db), ...(user ? { user } : {}) };
  const store = await openPostgresEventStore(config);
  await store.append('s', [ev('a', { n: 1 }), ev('b', { n: 2 })], { expectedVersion: -1 });
  await store.close();
  const sql = new pg.Client(config);
  await sql.connect();
  try {
    await run(sql, db);
  } finally {
    await sql.end();
  }
}

describe('PostgreSQL event store: append-only in the database', () => {
  it('refuses UPDATE, DELETE and TRUNCATE of events, even for a superuser (triggers)', () =>
    withLog(async (sql, db) => {
      await expect(sql.query(`UPDATE events SET data = '{"n":9}' WHERE position = 1`)).rejects.toThrow(/events are append-only: UPDATE is forbidden/);
      await expect(sql.query('DELETE FROM events WHERE position = 2')).rejects.toThrow(/events are append-only: DELETE is forbidden/);
      await expect(sql.query('TRUNCATE events')).rejects.toThrow(/events are append-only: TRUNCATE is forbidden/);
      await expect(sql.query(`UPDATE streams SET version = 0 WHERE stream_id = 's'`)).rejects.toThrow(/stream versions only move forward/);
      await expect(sql.query('DELETE FROM streams')).rejects.toThrow(/cannot be deleted/);
      await expect(sql.query('UPDATE log_head SET position = 1')).rejects.toThrow(/the log head only moves forward/);
      await expect(sql.query('DELETE FROM log_head')).rejects.toThrow(/cannot be deleted/);
      expect(await verifyPostgresLog(cluster.config(db))).toMatchObject({ ok: true, events: 2, warnings: [] });
    }));

  it('the role that owns the log has no UPDATE, DELETE or TRUNCATE privilege on events', async () => {
    const admin = new pg.Client(cluster.config());
    await admin.connect();
    await admin.query('CREATE ROLE gateway LOGIN');
    await admin.end();
    await withLog(async (sql) => {
      await expect(sql.query(`UPDATE events SET data = '{}'`)).rejects.toThrow(/permission denied/);
      await expect(sql.query('DELETE FROM events')).rejects.toThrow(/permission denied/);
      await expect(sql.query('TRUNCATE events')).rejects.toThrow(/permission denied/);
      await expect(sql.query('SELECT count(*) FROM events')).resolves.toMatchObject({ rows: [{ count: '2' }] });
    }, 'gateway');
  });

  it('verify warns of a disabled guard, and finds a row changed with the guard out of the way', () =>
    withLog(async (sql, db) => {
      await sql.query('ALTER TABLE events DISABLE TRIGGER events_no_update');
      expect(await verifyPostgresLog(cluster.config(db))).toMatchObject({ ok: true, warnings: [expect.stringMatching(/events_no_update/)] });
      await sql.query(`UPDATE events SET data = '{"n":9}' WHERE position = 1`);
      expect(await verifyPostgresLog(cluster.config(db))).toMatchObject({ ok: false, position: 1, reason: expect.stringMatching(/hash mismatch/) });
    }));
});
