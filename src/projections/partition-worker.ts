/**
 * A worker thread's partition of a split fold (partitioned-rebuild.ts starts it): its own
 * read-only connection, the partition's records, the fold, and its share posted back.
 */
import type { StoredRecord } from '../events/fold-read.js';
import { openFoldConnection, readPartition } from '../events/fold-partition.js';
import { foldPartition, type PartitionOutcome } from './partition-fold.js';
import type { PartitionJob } from './partitioned-rebuild.js';
import { Projections } from './projections.js';

/** Counts pages read in flag[1], so the waiting thread can tell a long fold from a lost worker. */
function* withProgress(records: Iterable<StoredRecord>, flag: Int32Array): Generator<StoredRecord> {
  let n = 0;
  for (const r of records) {
    if (++n === 2_000) {
      n = 0;
      Atomics.add(flag, 1, 1);
    }
    yield r;
  }
}

export function runPartitionJob(job: PartitionJob): void {
  let outcome: PartitionOutcome;
  try {
    const db = openFoldConnection(job.file);
    try {
      const p = job.checkpoint ? Projections.fromCheckpoint(job.checkpoint, job.options) : new Projections(job.options);
      outcome = p
        ? foldPartition(p, withProgress(readPartition(db, job.read), job.flag), new Set(job.read.skipStreams), false)
        : { ok: false, reason: 'checkpoint of another version' };
    } finally {
      db.close();
    }
  } catch (error) {
    // The caller folds in one piece, where the same error (if it is the fold's) is thrown again.
    outcome = { ok: false, reason: `worker: ${String((error as Error)?.stack ?? error)}` };
  }
  job.port.postMessage(outcome);
  Atomics.store(job.flag, 0, 1);
  Atomics.notify(job.flag, 0);
}
