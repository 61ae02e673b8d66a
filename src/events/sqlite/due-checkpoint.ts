/**
 * Projection checkpoints on the write path: a checkpoint row handed to the group commit waits for
 * the next batch (on the writer thread) or is written here when that batch cannot take it.
 */
import type Database from 'better-sqlite3';

/** A checkpoint row (name, position, state text, hash at position). */
export type CheckpointRow = [string, number, string, string];

/** A checkpoint to write with the next batch, and who waits for it. */
export interface DueCheckpoint {
  row: CheckpointRow;
  waiters: { resolve(): void; reject(error: unknown): void }[];
}

/**
 * Writes a due checkpoint in its own statement and tells its waiters. Never throws: it also runs
 * from the writer thread's answer, where a throw would end the process, and a checkpoint that
 * cannot be written (disk full) only means a longer catch-up at the next start.
 */
export function writeDueCheckpointRow(saveCheckpoint: Database.Statement, checkpoint: DueCheckpoint): void {
  try {
    saveCheckpoint.run(...checkpoint.row);
  } catch (error) {
    if (checkpoint.waiters.length > 0) for (const w of checkpoint.waiters) w.reject(error);
    else process.emitWarning(`projection checkpoint ${checkpoint.row[0]} not written: ${(error as Error).message}`, 'EventStoreWarning');
    return;
  }
  for (const w of checkpoint.waiters) w.resolve();
}
