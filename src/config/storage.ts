/**
 * Where the event log lives: SQLite in the storage directory (the embedded default), or a
 * PostgreSQL database (DEVSHARD_STORAGE_MODE=postgres, devshardctl's name) reached by DATABASE_URL
 * or the standard PG* variables, read from the same environment as every other setting.
 */
export type StorageMode = 'sqlite' | 'postgres';

export interface PostgresSettings {
  /** DATABASE_URL (secret: it may hold a password). */
  url?: string;
  /** PGHOST, PGPORT, PGUSER, PGPASSWORD (secret), PGDATABASE: used when DATABASE_URL is unset. */
  host?: string;
  port?: number;
  user?: string;
  password?: string;
  database?: string;
  /** DEVSHARD_LEASE_TTL_MS: how long an instance's escrow and leader leases last unrenewed. */
  leaseTtlMs?: number;
}

export interface StorageSettings {
  mode: StorageMode;
  /** Set when `mode` is postgres. */
  postgres?: PostgresSettings;
}

/** The storage settings from the environment; `fail` records a variable's problem. */
export function storageSettings(get: (name: string) => string | undefined, fail: (variable: string, message: string) => void): StorageSettings {
  const raw = (get('DEVSHARD_STORAGE_MODE') ?? 'sqlite').trim().toLowerCase();
  if (raw !== 'sqlite' && raw !== 'postgres') {
    fail('DEVSHARD_STORAGE_MODE', `must be sqlite or postgres (got ${JSON.stringify(raw.slice(0, 40))})`);
    return { mode: 'sqlite' };
  }
  if (raw === 'sqlite') return { mode: 'sqlite' };
  const url = get('DATABASE_URL');
  if (url !== undefined && !/^postgres(ql)?:\/\//.test(url)) fail('DATABASE_URL', 'must be a postgres:// or postgresql:// URL');
  const port = get('PGPORT');
  if (port !== undefined && !/^\d{1,5}$/.test(port)) fail('PGPORT', `must be a port number (got ${JSON.stringify(port.slice(0, 10))})`);
  const host = get('PGHOST');
  if (url === undefined && host === undefined) fail('DATABASE_URL', 'or PGHOST is required with DEVSHARD_STORAGE_MODE=postgres');
  const ttl = get('DEVSHARD_LEASE_TTL_MS') ?? '10000';
  if (!/^\d{1,9}$/.test(ttl) || Number(ttl) < 300) fail('DEVSHARD_LEASE_TTL_MS', `must be a whole number of milliseconds, at least 300 (got ${JSON.stringify(ttl.slice(0, 12))})`);
  const pg: PostgresSettings = { leaseTtlMs: Number(ttl) };
  if (url !== undefined) pg.url = url;
  if (host !== undefined) pg.host = host;
  if (port !== undefined) pg.port = Number(port);
  const user = get('PGUSER');
  if (user !== undefined) pg.user = user;
  const password = get('PGPASSWORD');
  if (password !== undefined) pg.password = password;
  const database = get('PGDATABASE');
  if (database !== undefined) pg.database = database;
  return { mode: 'postgres', postgres: pg };
}
