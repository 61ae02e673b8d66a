/**
 * Projection checkpoints in the SQLite log's file (not events): each tied to the log by the hash of
 * the event at its position, so a checkpoint of another log (or of a log rewritten since) is ignored.
 */
import type Database from 'better-sqlite3';
import { canonicalJson } from '../canonical-json.js';
import { EventStoreClosedError } from '../errors.js';
import type { Checkpoint } from '../store.js';
import type { CheckpointRow, SqliteGroupCommit } from './group-commit.js';

export class SqliteCheckpoints {
  private readonly load: Database.Statement;
  private readonly hashAtStmt: Database.Statement;

  constructor(
    db: Database.Database,
    private readonly writes: SqliteGroupCommit,
  ) {
    this.load = db.prepare('SELECT name, position, state, hash FROM checkpoints WHERE name = ?').raw();
    this.hashAtStmt = db.prepare('SELECT hash FROM events WHERE position = ?').pluck();
  }

  /** Written at once, in place. Throws if `position` is beyond the log. */
  saveNow(name: string, position: number, state: unknown): void {
    const row = this.row(name, position);
    row[2] = canonicalJson(state, `checkpoint ${name}`);
    this.writes.writeCheckpointNow(row);
  }

  /**
   * For a running server: the state is serialized here (JSON.stringify, a few times faster than
   * canonical JSON on megabytes; readers parse it either way) and written by the writer thread
   * with the next batch, so neither the canonical walk nor the fsync blocks the event loop
   * (measured 20–30 ms per checkpoint in place, ~3 ms this way). Without a writer thread it is
   * saveNow. Throws (synchronously) if `position` is beyond the log; the promise settles once written.
   */
  saveSoon(name: string, position: number, state: unknown): Promise<void> {
    if (!this.writes.hasWriterThread) {
      this.saveNow(name, position, state);
      return Promise.resolve();
    }
    const row = this.row(name, position);
    row[2] = JSON.stringify(state);
    return this.writes.checkpointSoon(row);
  }

  /**
   * The checkpoint of that name, or undefined when absent or when it does not belong to this
   * log (the event at its position has another hash): the projection then rebuilds from 0.
   */
  get<S = unknown>(name: string): Checkpoint<S> | undefined {
    const row = this.load.get(name) as CheckpointRow | undefined;
    if (!row) return undefined;
    if (this.hashAt(row[1]) !== row[3]) return undefined;
    return { name: row[0], position: row[1], state: JSON.parse(row[2]) as S, hash: row[3] };
  }

  /** The row to write, its state text still to fill in; throws when closed or beyond the log. */
  private row(name: string, position: number): CheckpointRow {
    if (this.writes.closed) throw new EventStoreClosedError();
    const hash = this.hashAt(position);
    if (hash === undefined) throw new RangeError(`checkpoint ${name}: no event at position ${position}`);
    return [name, position, '', hash];
  }

  private hashAt(position: number): string | undefined {
    if (position === 0) return '';
    return this.hashAtStmt.get(position) as string | undefined;
  }
}
