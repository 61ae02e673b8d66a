/**
 * Where the event log is, as messages, answers and the CLI show it, and how to reach a PostgreSQL
 * log from the storage settings: the SQLite file in the storage directory, or the PostgreSQL
 * database's URL without its password (DATABASE_URL and PGPASSWORD are secrets; a URL is shown
 * with `***` in place of the password, never the password itself).
 */
import type { PostgresSettings, StorageSettings } from '../config/storage.js';
import type { PostgresConnection } from './postgres/connection.js';
import { eventsFile } from './storage-path.js';

/** A database URL without its password (userinfo and a `password` query parameter); `(a database URL)` when it does not parse. */
export function shownDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    const keys = [...u.searchParams.keys()].filter((k) => k.toLowerCase() === 'password');
    for (const k of keys) u.searchParams.set(k, '***');
    return u.toString();
  } catch {
    return '(a database URL)';
  }
}

/** The settings that say where the database is (DATABASE_URL, or the PG* variables). */
export type PostgresAddress = Pick<PostgresSettings, 'url' | 'host' | 'port' | 'user' | 'password' | 'database'>;

/** The connection a PostgreSQL log is reached by (DATABASE_URL, else the PG* fields), and where it is for messages. */
export function postgresConnection(pg: PostgresAddress): { connection: PostgresConnection; where: string } {
  if (pg.url !== undefined) return { connection: pg.url, where: shownDatabaseUrl(pg.url) };
  const connection = {
    ...(pg.host !== undefined ? { host: pg.host } : {}),
    ...(pg.port !== undefined ? { port: pg.port } : {}),
    ...(pg.user !== undefined ? { user: pg.user } : {}),
    ...(pg.password !== undefined ? { password: pg.password } : {}),
    ...(pg.database !== undefined ? { database: pg.database } : {}),
  };
  return { connection, where: `postgres://${pg.user ?? ''}@${pg.host ?? ''}:${pg.port ?? 5432}/${pg.database ?? ''}` };
}

/**
 * Where the configured log is (devshardctl's `storage_path` in the admin answers): the SQLite file,
 * or in postgres mode the database without its password.
 */
export function logWhere(config: { storage: StorageSettings; server: { storageDir: string } }): string {
  return config.storage.mode === 'postgres' ? postgresConnection(config.storage.postgres ?? {}).where : eventsFile(config.server.storageDir);
}
