import type { Database } from 'better-sqlite3';
import { EVENT_GUARDS, V2_GUARDS } from './guards.js';
import { pendingMigrations } from './migration-plan.js';

/**
 * Schema migrations, tracked in `pragma user_version`. Each step runs in its own transaction and
 * only ever adds: opening an older file upgrades it in place without touching stored events.
 * Never edit a released step; add a new one.
 */
export interface Migration {
  version: number;
  description: string;
  up(db: Database): void;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'events table (append-only), stream heads',
    up(db) {
      db.exec(`
        CREATE TABLE events (
          position       INTEGER PRIMARY KEY,
          stream_id      TEXT    NOT NULL,
          stream_version INTEGER NOT NULL,
          type           TEXT    NOT NULL,
          schema_version INTEGER NOT NULL,
          data           TEXT    NOT NULL,
          metadata       TEXT    NOT NULL,
          time           TEXT    NOT NULL,
          prev_hash      TEXT    NOT NULL,
          hash           TEXT    NOT NULL,
          UNIQUE (stream_id, stream_version)
        ) STRICT;
        CREATE TABLE streams (
          stream_id TEXT PRIMARY KEY,
          version   INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID;
      `);
      for (const ddl of Object.values(EVENT_GUARDS)) db.exec(ddl);
    },
  },
  {
    version: 2,
    description: 'projection checkpoints; forward-only stream heads',
    up(db) {
      db.exec(`
        CREATE TABLE checkpoints (
          name     TEXT PRIMARY KEY,
          position INTEGER NOT NULL,
          state    TEXT    NOT NULL,
          hash     TEXT    NOT NULL
        ) STRICT;
      `);
      for (const ddl of Object.values(V2_GUARDS)) db.exec(ddl);
    },
  },
];

export const LATEST_SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

export function schemaVersion(db: Database): number {
  return db.pragma('user_version', { simple: true }) as number;
}

/**
 * Brings `db` up to `target` (default: latest). Returns the versions applied.
 * Refuses a file newer than this build rather than guessing at its layout.
 */
export function migrate(db: Database, target: number = LATEST_SCHEMA_VERSION): number[] {
  const applied: number[] = [];
  for (const m of pendingMigrations(MIGRATIONS, schemaVersion(db), target)) {
    db.transaction(() => {
      m.up(db);
      db.pragma(`user_version = ${m.version}`);
    }).immediate();
    applied.push(m.version);
  }
  return applied;
}
