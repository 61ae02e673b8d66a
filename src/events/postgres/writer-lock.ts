/**
 * One serving gateway per PostgreSQL log, until escrow leases let several share it (issue 42): a
 * session-level advisory lock held on its own connection for the gateway's life. Two gateways
 * deciding nonces for the same escrows from one log would hand the same nonce out twice; the
 * second one is refused at start instead, as SQLite's storage lock refuses a second process.
 */
import pg from 'pg';
import { connectionConfig, type PostgresConnection } from './connection.js';

/** The advisory lock's key (any constant: it only has to be the same for every gateway). */
const GATEWAY_LOCK_KEY = 0x5348_4744; // "SHGD"

export class PostgresLogInUseError extends Error {
  constructor(readonly holder: string | undefined) {
    super(
      `Another gateway serves this PostgreSQL event log${holder ? ` (${holder})` : ''}. One gateway per log until escrow leases let several instances share it; stop the other one, or give this one its own database.`,
    );
    this.name = 'PostgresLogInUseError';
  }
}

/** Takes the lock or refuses; resolves to the release. `instance` is shown to a refused second start. */
export async function lockPostgresLog(connection: PostgresConnection, instance: string): Promise<() => Promise<void>> {
  const client = new pg.Client({ ...connectionConfig(connection), application_name: `shardgate ${instance}`.slice(0, 63) });
  await client.connect();
  try {
    const got = (await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [GATEWAY_LOCK_KEY])).rows[0]?.ok === true;
    if (!got) {
      const holder = (
        await client.query<{ name: string }>(
          `SELECT a.application_name AS name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
           WHERE l.locktype = 'advisory' AND l.objid = $1 AND l.granted LIMIT 1`,
          [GATEWAY_LOCK_KEY],
        )
      ).rows[0]?.name;
      throw new PostgresLogInUseError(holder);
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
