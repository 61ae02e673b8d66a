/**
 * The read path for folding the whole log (projection rebuild, catch-up): the same records as
 * `readAll`, made cheaper where a fold does not look.
 *
 * Measured over a 2M-event soak-shaped log (bench/rebuild-bench.ts): better-sqlite3 building the
 * ten-column row was ~2.3 µs/event, JSON.parse of data ~0.9 µs and of metadata ~0.85 µs, out of
 * ~7 µs per rebuilt event. A fold reads `data` of every event but `metadata` of almost none (the
 * timeline labels its newest entries when asked), and `prevHash`/`hash` never. So:
 *  - the SELECT leaves out prev_hash and hash (loaded by position if a caller asks);
 *  - metadata stays JSON text until first read;
 *  - reads go through their own read-only connection with the file memory-mapped (no pread
 *    syscall per page), so the writing connection is left as it is.
 */
import type { EventMetadata, RecordedEvent } from './envelope.js';

/** Columns of the fold SELECT, in FoldRow order. */
export const FOLD_COLUMNS = 'position, stream_id, stream_version, type, schema_version, data, metadata, time';

export type FoldRow = [
  position: number,
  streamId: string,
  streamVersion: number,
  type: string,
  schemaVersion: number,
  data: string,
  metadata: string,
  time: string,
];

/** prev_hash and hash of a position (read on demand). */
export type HashLoader = (position: number) => { prevHash: string; hash: string };

/**
 * A recorded event whose `metadata` is parsed on first read and whose `prevHash`/`hash` are loaded
 * on first read. They are prototype getters (an own accessor per record costs ~0.7 µs: V8 gives
 * such objects dictionary properties), so an object spread of a StoredRecord does not carry them;
 * `toJSON` and `toRecord()` do. Use these records for folding, `readAll` for anything else.
 */
export class StoredRecord implements RecordedEvent {
  readonly position: number;
  readonly streamId: string;
  readonly streamVersion: number;
  readonly type: string;
  readonly schemaVersion: number;
  readonly data: unknown;
  readonly time: string;
  /** The stored metadata text (canonical JSON), for callers that want only a part of it. */
  readonly metadataJson: string;
  #metadata: EventMetadata | undefined;
  #hashes: { prevHash: string; hash: string } | undefined;
  readonly #loadHashes: HashLoader;

  constructor(position: number, streamId: string, streamVersion: number, type: string, schemaVersion: number, data: unknown, metadataJson: string, time: string, loadHashes: HashLoader) {
    this.position = position;
    this.streamId = streamId;
    this.streamVersion = streamVersion;
    this.type = type;
    this.schemaVersion = schemaVersion;
    this.data = data;
    this.time = time;
    this.metadataJson = metadataJson;
    this.#loadHashes = loadHashes;
  }

  /** The record of a FOLD_COLUMNS row (parses `data`). */
  static fromRow(row: FoldRow, loadHashes: HashLoader): StoredRecord {
    return new StoredRecord(row[0], row[1], row[2], row[3], row[4], JSON.parse(row[5]), row[6], row[7], loadHashes);
  }

  get metadata(): EventMetadata {
    return (this.#metadata ??= JSON.parse(this.metadataJson) as EventMetadata);
  }

  get prevHash(): string {
    return (this.#hashes ??= this.#loadHashes(this.position)).prevHash;
  }

  get hash(): string {
    return (this.#hashes ??= this.#loadHashes(this.position)).hash;
  }

  /** A plain RecordedEvent (what `readAll` yields for this position). */
  toRecord(): RecordedEvent {
    return {
      position: this.position,
      streamId: this.streamId,
      streamVersion: this.streamVersion,
      type: this.type,
      schemaVersion: this.schemaVersion,
      data: this.data,
      metadata: this.metadata,
      time: this.time,
      prevHash: this.prevHash,
      hash: this.hash,
    };
  }

  toJSON(): RecordedEvent {
    return this.toRecord();
  }
}

/**
 * The stored metadata text of a StoredRecord (undefined for other records): a fold that keeps
 * metadata for later (the timeline's actor) keeps the text and parses it only if it is read.
 */
export function metadataJsonOf(record: RecordedEvent): string | undefined {
  return record instanceof StoredRecord ? record.metadataJson : undefined;
}
