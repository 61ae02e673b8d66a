/**
 * Connecting to the PostgreSQL log: a `pg` pool whose BIGINT columns (positions) come back as
 * numbers, like SQLite's. Positions stay far below 2^53, so nothing is lost; a value beyond it is
 * refused rather than rounded.
 */
import pg from 'pg';

/** A connection string (`postgres://…`) or node-postgres' own pool settings. */
export type PostgresConnection = string | pg.PoolConfig;

const INT8_OID = 20;

function int8ToNumber(text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw new RangeError(`BIGINT ${text} is beyond what the log's positions may reach`);
  return n;
}

/** Type parsers of every connection the store opens: BIGINT as number, the rest as pg's defaults. */
export const LOG_TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: string) => {
    if (oid === INT8_OID && format !== 'binary') return int8ToNumber;
    return (pg.types.getTypeParser as (oid: number, format?: string) => unknown)(oid, format);
  }) as pg.CustomTypesConfig['getTypeParser'],
};

/**
 * How long a session may sit idle inside a transaction before the server ends it (ms). A commit
 * holds the log's tail lock (writer.ts) for a few round trips; an instance that stalls or loses
 * its network mid-commit would otherwise block every other instance's commits until TCP gives up.
 */
export const IDLE_IN_TRANSACTION_MS = 10_000;

/** The settings of every connection (pool and the follower's LISTEN client). */
export function connectionConfig(connection: PostgresConnection): pg.ClientConfig {
  const base: pg.ClientConfig = typeof connection === 'string' ? { connectionString: connection } : { ...connection };
  return {
    ...base,
    types: LOG_TYPES,
    application_name: base.application_name ?? 'shardgate',
    idle_in_transaction_session_timeout: base.idle_in_transaction_session_timeout ?? IDLE_IN_TRANSACTION_MS,
  };
}

export function openPool(connection: PostgresConnection, max: number): pg.Pool {
  const config = connectionConfig(connection);
  return new pg.Pool({ ...(typeof connection === 'string' ? {} : connection), ...config, max: (typeof connection === 'string' ? undefined : connection.max) ?? max });
}
