/** A batch on the writer thread: sealed here without hashes, chained once the writer answers. */
import type { RecordedEvent } from '../envelope.js';
import type { SealedBatch } from './batch.js';
import type { DueCheckpoint } from './due-checkpoint.js';
import type { PendingAppend } from './prepare.js';

/** A batch prepared on the main thread and being written by the writer thread. */
export interface InFlightBatch extends SealedBatch {
  id: number;
  batch: PendingAppend[];
  checkpoint?: DueCheckpoint;
}

/**
 * Fills in the hash chain as the writer computed and stored it, in position order, after the
 * log's last hash; returns the new last hash.
 */
export function chainWrittenHashes(committed: RecordedEvent[], lastHash: string, hashes: string[]): string {
  let prev = lastHash;
  for (let i = 0; i < committed.length; i++) {
    const r = committed[i]!;
    r.prevHash = prev;
    prev = r.hash = hashes[i]!;
  }
  return prev;
}
