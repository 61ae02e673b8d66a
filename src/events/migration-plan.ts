/**
 * Which schema migrations a database needs, for both logs (migrations.ts on SQLite, postgres/schema.ts
 * on PostgreSQL). Each runner keeps its own I/O (how it reads the version, its transactions); the
 * decision and the refusal of a newer database are made here, once.
 */
import { UnsupportedSchemaError } from './errors.js';

/** The steps to apply, in order, to bring a database at `current` up to `target` (default: the last step). */
export function pendingMigrations<M extends { version: number }>(migrations: readonly M[], current: number, target?: number): M[] {
  const latest = migrations[migrations.length - 1]?.version ?? 0;
  // A database newer than this build has a layout it does not know: refuse rather than guess.
  if (current > latest) throw new UnsupportedSchemaError(current, latest);
  return migrations.filter((m) => m.version > current && m.version <= (target ?? latest));
}
