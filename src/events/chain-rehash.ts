/**
 * The re-hash of a run of the hash chain, over rows a backend read (SQLite iterates them, PostgreSQL
 * pages them): the anchor's start check and its background prefix check share it.
 */
import { eventHash } from './hash.js';
import type { StartCheckFailure } from './log-anchor-verdict.js';
import type { EventRow } from './rows.js';

/** A run that re-hashed clean: its last position and hash (`after`/`prevHash` when empty). */
export interface ChainRun {
  ok: true;
  position: number;
  hash: string;
  checked: number;
}

/**
 * Re-hashes `rows`, which must follow position `after` (whose hash is `prevHash`) in order.
 * Returns the first bad position; stops reading there (an iterator is closed by the early return).
 */
export function rehashRows(rows: Iterable<EventRow>, after: number, prevHash: string): ChainRun | StartCheckFailure {
  let expected = after + 1;
  let prev = prevHash;
  for (const [position, streamId, streamVersion, type, schemaVersion, dataJson, metadataJson, time, storedPrev, hash] of rows) {
    if (position !== expected) return { ok: false, position, reason: `gap: position ${expected} is missing` };
    if (storedPrev !== prev) return { ok: false, position, reason: 'prev_hash does not match the previous event hash' };
    if (eventHash(prev, { position, streamId, streamVersion, type, schemaVersion, dataJson, metadataJson, time }) !== hash) {
      return { ok: false, position, reason: `hash mismatch: the event (${type} in ${streamId}) was altered after it was written` };
    }
    prev = hash;
    expected++;
  }
  return { ok: true, position: expected - 1, hash: prev, checked: expected - 1 - after };
}
