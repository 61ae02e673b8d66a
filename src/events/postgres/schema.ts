/**
 * The PostgreSQL log's schema, migrated in order and tracked in `shardgate_schema`. Like the
 * SQLite migrations (../migrations.ts), each step only ever adds; never edit a released step.
 *
 * - `events`: one row per event, the same columns as SQLite's. `data` and `metadata` are TEXT,
 *   not JSONB: the hash covers the exact canonical JSON text, and JSONB would reformat it.
 * - `streams`: each stream's head (last version), moved forward only.
 * - `log_head`: one row, the log's tail (position, hash). Every commit locks it FOR UPDATE first;
 *   that lock is what serializes writers (writer.ts says why it closes the sequence gap).
 * - `checkpoints`: projection checkpoints, tied to the log by the hash at their position.
 * - `log_anchor`: the start check's anchor (log-anchor.ts; ../log-anchor.ts for SQLite).
 * - `leases`, `instances` (step 2): escrow and leader leases, instance heartbeats (leases.ts).
 *
 * The database itself refuses UPDATE, DELETE and TRUNCATE of events (triggers, and the privileges
 * revoked from PUBLIC and from the role that created the table), and moves stream heads and the
 * log head only forward. A superuser can still drop the triggers; `verify` catches what follows.
 */
import type pg from 'pg';
import { pendingMigrations } from '../migration-plan.js';

export interface PgMigration {
  version: number;
  description: string;
  sql: string;
}

/** Trigger functions and triggers that keep the log append-only (names are checked by verify). */
export const PG_GUARD_TRIGGERS = ['events_no_update', 'events_no_delete', 'events_no_truncate', 'streams_forward_only', 'streams_no_delete', 'log_head_forward_only', 'log_head_no_delete'] as const;

export const PG_MIGRATIONS: readonly PgMigration[] = [
  {
    version: 1,
    description: 'events (append-only), stream heads, the log head, projection checkpoints',
    sql: `
      CREATE TABLE events (
        position       BIGINT  PRIMARY KEY CHECK (position > 0),
        stream_id      TEXT    NOT NULL,
        stream_version INTEGER NOT NULL CHECK (stream_version >= 0),
        type           TEXT    NOT NULL,
        schema_version INTEGER NOT NULL,
        data           TEXT    NOT NULL,
        metadata       TEXT    NOT NULL,
        time           TEXT    NOT NULL,
        prev_hash      TEXT    NOT NULL,
        hash           TEXT    NOT NULL,
        UNIQUE (stream_id, stream_version)
      );
      CREATE TABLE streams (
        stream_id TEXT    PRIMARY KEY,
        version   INTEGER NOT NULL
      );
      CREATE TABLE log_head (
        id       INTEGER PRIMARY KEY CHECK (id = 1),
        position BIGINT  NOT NULL,
        hash     TEXT    NOT NULL
      );
      INSERT INTO log_head (id, position, hash) VALUES (1, 0, '');
      CREATE TABLE checkpoints (
        name     TEXT   PRIMARY KEY,
        position BIGINT NOT NULL,
        state    TEXT   NOT NULL,
        hash     TEXT   NOT NULL
      );
      CREATE TABLE log_anchor (
        id       INTEGER PRIMARY KEY CHECK (id = 1),
        position BIGINT  NOT NULL,
        hash     TEXT    NOT NULL,
        mac      TEXT
      );

      CREATE FUNCTION shardgate_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION 'events are append-only: % is forbidden', TG_OP USING ERRCODE = 'restrict_violation';
      END $$;
      CREATE TRIGGER events_no_update BEFORE UPDATE ON events FOR EACH ROW EXECUTE FUNCTION shardgate_events_append_only();
      CREATE TRIGGER events_no_delete BEFORE DELETE ON events FOR EACH ROW EXECUTE FUNCTION shardgate_events_append_only();
      CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events FOR EACH STATEMENT EXECUTE FUNCTION shardgate_events_append_only();

      CREATE FUNCTION shardgate_no_delete() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION '% rows cannot be deleted', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
      END $$;
      CREATE FUNCTION shardgate_stream_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.stream_id IS DISTINCT FROM OLD.stream_id OR NEW.version <= OLD.version THEN
          RAISE EXCEPTION 'stream versions only move forward' USING ERRCODE = 'restrict_violation';
        END IF;
        RETURN NEW;
      END $$;
      CREATE FUNCTION shardgate_head_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.id IS DISTINCT FROM OLD.id OR NEW.position <= OLD.position THEN
          RAISE EXCEPTION 'the log head only moves forward' USING ERRCODE = 'restrict_violation';
        END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER streams_forward_only BEFORE UPDATE ON streams FOR EACH ROW EXECUTE FUNCTION shardgate_stream_forward_only();
      CREATE TRIGGER streams_no_delete BEFORE DELETE ON streams FOR EACH ROW EXECUTE FUNCTION shardgate_no_delete();
      CREATE TRIGGER log_head_forward_only BEFORE UPDATE ON log_head FOR EACH ROW EXECUTE FUNCTION shardgate_head_forward_only();
      CREATE TRIGGER log_head_no_delete BEFORE DELETE ON log_head FOR EACH ROW EXECUTE FUNCTION shardgate_no_delete();

      REVOKE UPDATE, DELETE, TRUNCATE ON events FROM PUBLIC, CURRENT_USER;
      REVOKE DELETE, TRUNCATE ON streams, log_head FROM PUBLIC, CURRENT_USER;
    `,
  },
  {
    version: 2,
    // State, not events: the lease rows change in place, so they sit beside the log (leases.ts).
    // IF NOT EXISTS: a database opened by an earlier build has them already (it created them at open).
    description: 'leases and instances (several instances on one log)',
    sql: `
      CREATE TABLE IF NOT EXISTS leases (
        name       TEXT        PRIMARY KEY,
        owner      TEXT,
        token      BIGINT      NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL,
        wanted_by  TEXT
      );
      CREATE TABLE IF NOT EXISTS instances (
        name       TEXT        PRIMARY KEY,
        url        TEXT,
        started_at TIMESTAMPTZ NOT NULL,
        seen_at    TIMESTAMPTZ NOT NULL,
        stopping   BOOLEAN     NOT NULL DEFAULT false
      );
    `,
  },
];

export const PG_LATEST_SCHEMA_VERSION = PG_MIGRATIONS[PG_MIGRATIONS.length - 1]!.version;

/** Serializes migrations of concurrent starts on one database (transaction-scoped advisory lock). */
const MIGRATE_LOCK_SQL = `SELECT pg_advisory_xact_lock(hashtext('shardgate.migrate'))`;

/**
 * Brings the database's log schema up to date, each step in its own transaction under an advisory
 * lock (several instances starting at once migrate once). Refuses a schema newer than this build.
 * Returns the versions applied.
 */
export async function migratePostgres(pool: pg.Pool): Promise<number[]> {
  const client = await pool.connect();
  const applied: number[] = [];
  try {
    await client.query(`CREATE TABLE IF NOT EXISTS shardgate_schema (
      version     INTEGER PRIMARY KEY,
      description TEXT NOT NULL,
      applied_at  TIMESTAMPTZ NOT NULL DEFAULT now()
    )`).catch(async (error: unknown) => {
      // Two starts creating it at once: one wins, the other sees a duplicate; the table is there.
      if ((error as { code?: string }).code !== '23505' && (error as { code?: string }).code !== '42P07') throw error;
    });
    for (const m of PG_MIGRATIONS) {
      await client.query('BEGIN');
      try {
        await client.query(MIGRATE_LOCK_SQL);
        // Read again under the lock each step: another start may have applied it meanwhile.
        const current = (await client.query<{ v: number | null }>('SELECT max(version) AS v FROM shardgate_schema')).rows[0]?.v ?? 0;
        if (!pendingMigrations(PG_MIGRATIONS, current).includes(m)) {
          await client.query('COMMIT');
          continue;
        }
        await client.query(m.sql);
        await client.query('INSERT INTO shardgate_schema (version, description) VALUES ($1, $2)', [m.version, m.description]);
        await client.query('COMMIT');
        applied.push(m.version);
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
    }
  } finally {
    client.release();
  }
  return applied;
}

/** Guard triggers missing from the database (verify reports them as a warning). */
export async function missingPgGuards(pool: Pick<pg.Client, 'query'>): Promise<string[]> {
  const present = new Set(
    (await pool.query<{ tgname: string }>(`SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgenabled <> 'D'`)).rows.map((r) => r.tgname),
  );
  return PG_GUARD_TRIGGERS.filter((name) => !present.has(name));
}
