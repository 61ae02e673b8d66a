/**
 * Leases and instances on the shared PostgreSQL log (../leases.ts says what they are for).
 *
 * Taking a lease locks the log's tail first (`log_head … FOR UPDATE`, as every commit does,
 * writer.ts): so a taking and a commit never overlap. A commit of the previous holder is either
 * before it (at or below the tail it returns, which the new holder reads before it writes) or
 * after it, and then finds the new token in force and is refused (LeaseLostError), nothing
 * written. Renewals and releases need no such order: they only ever shorten what the holder may do.
 */
import type pg from 'pg';
import type { HeldLease, InstanceRow, LeaseRow, LeaseTable, TakenLease } from '../leases.js';

const ACQUIRE_SQL = `
  INSERT INTO leases (name, owner, token, expires_at) VALUES ($1, $2, 1, clock_timestamp() + make_interval(secs => $3::float8 / 1000))
  ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, token = leases.token + 1, expires_at = excluded.expires_at, wanted_by = NULL
  WHERE leases.owner IS NULL OR leases.owner = excluded.owner OR leases.expires_at < clock_timestamp()
  RETURNING token`;

const RENEW_SQL = `
  UPDATE leases l SET expires_at = clock_timestamp() + make_interval(secs => $4::float8 / 1000)
  FROM unnest($2::text[], $3::bigint[]) AS h(name, token)
  WHERE l.name = h.name AND l.token = h.token AND l.owner = $1
  RETURNING l.name, l.wanted_by`;

/**
 * A lease another instance asked for goes to it (it takes it with the next token, as after its own
 * restart; unclaimed, it expires after the lease time); any other is freed at once.
 */
const RELEASE_SQL = `
  UPDATE leases l SET owner = l.wanted_by, wanted_by = NULL,
    expires_at = CASE WHEN l.wanted_by IS NULL THEN clock_timestamp() ELSE clock_timestamp() + make_interval(secs => $4::float8 / 1000) END
  FROM unnest($2::text[], $3::bigint[]) AS h(name, token)
  WHERE l.name = h.name AND l.token = h.token AND l.owner = $1
  RETURNING l.name`;

/** The fencing check of a commit (writer.ts): the tokens in force of the batch's leases. */
export const FENCES_SQL = 'SELECT name, owner, token FROM leases WHERE name = ANY($1::text[])';

export class PgLeases implements LeaseTable {
  constructor(private readonly pool: pg.Pool) {}

  async acquire(name: string, owner: string, ttlMs: number): Promise<TakenLease | undefined> {
    const client = await this.pool.connect();
    try {
      const [, tail] = (await client.query('BEGIN; SELECT position FROM log_head WHERE id = 1 FOR UPDATE')) as unknown as [pg.QueryResult, pg.QueryResult<{ position: number }>];
      const r = await client.query<{ token: number }>(ACQUIRE_SQL, [name, owner, ttlMs]);
      await client.query('COMMIT');
      const token = r.rows[0]?.token;
      return token === undefined ? undefined : { name, token, tail: tail.rows[0]!.position };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  async renew(owner: string, held: readonly HeldLease[], ttlMs: number): Promise<{ renewed: Set<string>; wanted: Set<string> }> {
    if (held.length === 0) return { renewed: new Set(), wanted: new Set() };
    const r = await this.pool.query<{ name: string; wanted_by: string | null }>(RENEW_SQL, [owner, held.map((h) => h.name), held.map((h) => h.token), ttlMs]);
    return { renewed: new Set(r.rows.map((x) => x.name)), wanted: new Set(r.rows.filter((x) => x.wanted_by !== null && x.wanted_by !== owner).map((x) => x.name)) };
  }

  async release(owner: string, held: readonly HeldLease[], ttlMs = 0): Promise<Set<string>> {
    if (held.length === 0) return new Set();
    const r = await this.pool.query<{ name: string }>(RELEASE_SQL, [owner, held.map((h) => h.name), held.map((h) => h.token), ttlMs]);
    return new Set(r.rows.map((x) => x.name));
  }

  async want(name: string, requester: string): Promise<void> {
    await this.pool.query('UPDATE leases SET wanted_by = $2 WHERE name = $1 AND owner IS NOT NULL AND owner <> $2', [name, requester]);
  }

  async list(): Promise<LeaseRow[]> {
    const r = await this.pool.query<{ name: string; owner: string | null; token: number; ms: number; wanted_by: string | null }>(
      'SELECT name, owner, token, (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS ms, wanted_by FROM leases ORDER BY name',
    );
    return r.rows.map((x) => ({ name: x.name, owner: x.owner ?? undefined, token: x.token, expiresInMs: Math.round(x.ms), wantedBy: x.wanted_by ?? undefined }));
  }

  async beat(instance: { name: string; url: string | undefined; stopping: boolean }): Promise<void> {
    await this.pool.query(
      `INSERT INTO instances (name, url, started_at, seen_at, stopping) VALUES ($1, $2, clock_timestamp(), clock_timestamp(), $3)
       ON CONFLICT (name) DO UPDATE SET url = excluded.url, seen_at = excluded.seen_at, stopping = excluded.stopping`,
      [instance.name, instance.url ?? null, instance.stopping],
    );
  }

  async instances(): Promise<InstanceRow[]> {
    const r = await this.pool.query<{ name: string; url: string | null; started_at: Date; ms: number; stopping: boolean }>(
      'SELECT name, url, started_at, (extract(epoch FROM clock_timestamp() - seen_at) * 1000)::float8 AS ms, stopping FROM instances ORDER BY name',
    );
    return r.rows.map((x) => ({ name: x.name, url: x.url ?? undefined, startedAt: x.started_at.toISOString(), seenAgoMs: Math.round(x.ms), stopping: x.stopping }));
  }
}
