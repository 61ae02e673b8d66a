import type { RecordedEvent } from './envelope.js';
import type { FoldRow } from './fold-read.js';

/** Column order of every event SELECT; rows are read with `.raw()` as arrays in this order. */
export const EVENT_COLUMNS =
  'position, stream_id, stream_version, type, schema_version, data, metadata, time, prev_hash, hash';

/** A fold row (fold-read.ts) plus the hash-chain columns. */
export type EventRow = [...FoldRow, prevHash: string, hash: string];

/** Array rows decode faster than better-sqlite3's per-row objects; this is the rebuild hot path. */
export function decodeRow(r: EventRow): RecordedEvent {
  return {
    position: r[0],
    streamId: r[1],
    streamVersion: r[2],
    type: r[3],
    schemaVersion: r[4],
    data: JSON.parse(r[5]),
    metadata: JSON.parse(r[6]),
    time: r[7],
    prevHash: r[8],
    hash: r[9],
  };
}
