/**
 * One partition of a fold split by stream (partitioned-rebuild.ts). A partition folds, with the
 * ordinary Projections, every event of the log except the per-request events and nonce
 * reservations (PARTITIONED_TYPES) of the escrow streams other partitions own. What it hands back
 * is exact for what it owns and for what every partition shares:
 *
 *  - its own escrow streams: every one of their events is folded, in log order, and the only thing
 *    an escrow stream takes from outside is, at its first event, a creation intent — shared;
 *  - shared state (creation intents, settings, rotation debug): per-request events and nonce
 *    reservations of an escrow stream reach none of it; another stream's events reach it only
 *    through (a) its first event (EscrowCreated takes over an intent: folded here too, it starts
 *    from the same intent state) and (b) EscrowSettled/EscrowSettleFailed for rotation debug,
 *    which reads only the record.
 *
 * So the fold needs that another partition's escrow stream takes over an intent only at its
 * first event (version 0). An EscrowCreated later in such a stream would depend on requests this
 * partition did not fold: the partition then gives up, and the caller folds the log in one piece.
 */
import { escrowStream } from '../events/catalog.js';
import type { RecordedEvent } from '../events/envelope.js';
import { REQUEST_TYPES } from '../events/request-data.js';
import { streamRefs, type PoolPart, type PoolShared } from './escrow-pool.js';
import type { Projections } from './projections.js';
import type { RotationDebugState } from './rotation-debug.js';
import type { SettingsState } from './settings.js';

/**
 * Event types a partition reads only for the escrow streams it owns: the per-request ones (almost
 * all of a busy log) and NoncesReserved (one per 256 requests of an escrow; read for another
 * partition's stream, each cost a lookup of its stream version, ~40 µs).
 */
export const PARTITIONED_TYPES: readonly string[] = [...REQUEST_TYPES, 'InferencesRecorded', 'NoncesReserved'];

/** What every partition has alike (taken from one of them). */
export interface PartitionShared {
  pool: PoolShared;
  settings: SettingsState;
  rotation: RotationDebugState;
}

/** A partition's share of the projections: its own escrows, and from one partition the shared state. */
export interface PartitionResult {
  pool: PoolPart;
  shared?: PartitionShared;
}

export type PartitionOutcome = { ok: true; result: PartitionResult } | { ok: false; reason: string };

/**
 * Folds one partition's records (every record of the log in the range but the PARTITIONED_TYPES
 * events of `skipStreams`) into `projections`, and hands back its share (`withShared`: with the
 * shared state).
 */
export function foldPartition(projections: Projections, records: Iterable<RecordedEvent>, skipStreams: ReadonlySet<string>, withShared: boolean): PartitionOutcome {
  const p = projections;
  const refOf = streamRefs();
  p.pool.beginBatch();
  try {
    for (const record of records) {
      if (record.position <= p.position) continue;
      const stream = refOf(record.streamId);
      if (stream.kind === 'escrow' && skipStreams.has(record.streamId) && record.streamVersion !== 0) {
        // Another partition's escrow stream after its first event: this partition's state of it is
        // not the log's (requests were skipped), so only what reads the record alone is folded.
        if (record.type === 'EscrowCreated') return { ok: false, reason: `EscrowCreated at version ${record.streamVersion} of ${record.streamId}` };
        p.rotation.apply(record, stream);
        p.position = record.position;
        continue;
      }
      p.foldOne(record, stream);
    }
  } finally {
    p.pool.endBatch();
  }
  const owns = (escrowId: string) => !skipStreams.has(escrowStream(escrowId));
  return {
    ok: true,
    result: {
      pool: p.pool.part(owns),
      shared: withShared ? { pool: p.pool.shared(), settings: p.settings.snapshot(), rotation: p.rotation.snapshot() } : undefined,
    },
  };
}
