import type { Database } from 'better-sqlite3';

/**
 * Triggers that make the log append-only inside SQLite itself, so a bug (or a careless sqlite3
 * shell session) cannot rewrite history without first dropping them; `verify` catches the rest.
 * Keyed by name; each is `CREATE TRIGGER IF NOT EXISTS` so re-applying is harmless.
 */
export const EVENT_GUARDS = {
  events_no_update: `CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE is forbidden'); END`,
  events_no_delete: `CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only: DELETE is forbidden'); END`,
} as const;

/**
 * Added by schema v2: stream heads only move forward.
 * (No BEFORE INSERT guard on events: it halved insert throughput. INSERT OR REPLACE, which
 * deletes without firing DELETE triggers, is left to `verify`, which reports it as a broken chain.)
 */
export const V2_GUARDS = {
  streams_forward_only: `CREATE TRIGGER IF NOT EXISTS streams_forward_only BEFORE UPDATE ON streams
    WHEN NEW.stream_id IS NOT OLD.stream_id OR NEW.version <= OLD.version
    BEGIN SELECT RAISE(ABORT, 'stream versions only move forward'); END`,
  streams_no_delete: `CREATE TRIGGER IF NOT EXISTS streams_no_delete BEFORE DELETE ON streams
    BEGIN SELECT RAISE(ABORT, 'streams cannot be deleted'); END`,
} as const;

export const ALL_GUARDS: Record<string, string> = { ...EVENT_GUARDS, ...V2_GUARDS };

/** Re-creates any guard trigger that is missing (e.g. dropped by hand). Returns the names restored. */
export function ensureGuards(db: Database): string[] {
  const present = new Set(
    (db.prepare(`SELECT name FROM sqlite_master WHERE type = 'trigger'`).pluck().all() as string[]),
  );
  const restored: string[] = [];
  for (const [name, ddl] of Object.entries(ALL_GUARDS)) {
    if (present.has(name)) continue;
    db.exec(ddl);
    restored.push(name);
  }
  return restored;
}

/** Names of guard triggers missing from a database (used by verify as a warning). */
export function missingGuards(db: Database): string[] {
  const present = new Set(
    (db.prepare(`SELECT name FROM sqlite_master WHERE type = 'trigger'`).pluck().all() as string[]),
  );
  return Object.keys(ALL_GUARDS).filter((name) => !present.has(name));
}
