/**
 * One process per instance name on a PostgreSQL log: a session-level advisory lock on the name,
 * held on its own connection for the gateway's life. Several instances share a log under escrow
 * leases (gateway/scale), each named by DEVSHARD_INSTANCE_NAME; two processes under one name would
 * take each other's leases as their own restart, so the second one is refused at start instead.
 */
import pg from 'pg';
import { connectionConfig, type PostgresConnection } from './connection.js';

/** The advisory lock's class (any constant); the object is the name's hash. */
const INSTANCE_LOCK_CLASS = 0x5348; // "SH"

export class PostgresLogInUseError extends Error {
  constructor(
    readonly instance: string,
    readonly holder: string | undefined,
  ) {
    super(
      `Another gateway process runs as instance '${instance}' on this PostgreSQL event log${holder ? ` (${holder})` : ''}. Each instance sharing a log needs its own DEVSHARD_INSTANCE_NAME: stop the other process, or give this one another name.`,
    );
    this.name = 'PostgresLogInUseError';
  }
}

/** Takes the instance name's lock or refuses; resolves to the release. */
export async function lockPostgresLog(connection: PostgresConnection, instance: string): Promise<() => Promise<void>> {
  const client = new pg.Client({ ...connectionConfig(connection), application_name: `shardgate ${instance}`.slice(0, 63) });
  await client.connect();
  try {
    const got = (await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok', [INSTANCE_LOCK_CLASS, instance])).rows[0]?.ok === true;
    if (!got) {
      const holder = (
        await client.query<{ name: string }>(
          `SELECT a.application_name AS name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
           WHERE l.locktype = 'advisory' AND l.classid = $1 AND l.objid::int = hashtext($2) AND l.granted LIMIT 1`,
          [INSTANCE_LOCK_CLASS, instance],
        )
      ).rows[0]?.name;
      throw new PostgresLogInUseError(instance, holder);
    }
  } catch (err) {
    await client.end().catch(() => undefined);
    throw err;
  }
  // A lost connection ends the session, and the lock with it: nothing to do but not crash on it.
  client.on('error', () => undefined);
  return async () => {
    await client.end().catch(() => undefined);
  };
}
