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
import type { RequestFields } from './request-data.js';

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

/** The stored metadata text of a position (read on demand). */
export type MetadataLoader = (position: number) => string;

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
  readonly time: string;
  /**
   * The stored metadata: its text (canonical JSON), or the loader that reads it by position when a
   * read leaves the column out (a partition of a rebuild labels only the entries it keeps).
   */
  readonly storedMetadata: string | MetadataLoader;
  /**
   * Of a per-request event whose data was left as text: the fields a fold reads, scanned from it
   * (request-data.ts). Undefined otherwise.
   */
  readonly request: RequestFields | undefined;
  #data: unknown;
  /** The data's JSON text until `data` is first read (set with `request`). */
  #dataText: string | undefined;
  #metadata: EventMetadata | undefined;
  #hashes: { prevHash: string; hash: string } | undefined;
  readonly #loadHashes: HashLoader;

  /** `request`: the scanned fields of `data`, then given as its JSON text, parsed on first read. */
  constructor(position: number, streamId: string, streamVersion: number, type: string, schemaVersion: number, data: unknown, metadata: string | MetadataLoader, time: string, loadHashes: HashLoader, request?: RequestFields) {
    this.position = position;
    this.streamId = streamId;
    this.streamVersion = streamVersion;
    this.type = type;
    this.schemaVersion = schemaVersion;
    this.time = time;
    this.storedMetadata = metadata;
    this.request = request;
    this.#data = request ? undefined : data;
    this.#dataText = request ? (data as string) : undefined;
    this.#loadHashes = loadHashes;
  }

  get data(): unknown {
    if (this.#dataText !== undefined) {
      this.#data = JSON.parse(this.#dataText);
      this.#dataText = undefined;
    }
    return this.#data;
  }

  /** The record of a FOLD_COLUMNS row (parses `data`). */
  static fromRow(row: FoldRow, loadHashes: HashLoader): StoredRecord {
    return new StoredRecord(row[0], row[1], row[2], row[3], row[4], JSON.parse(row[5]), row[6], row[7], loadHashes);
  }

  /** The stored metadata text (canonical JSON), for callers that want only a part of it. */
  get metadataJson(): string {
    const m = this.storedMetadata;
    return typeof m === 'string' ? m : m(this.position);
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
 * The stored metadata of a StoredRecord, unparsed (undefined for other records): a fold that keeps
 * metadata for later (the timeline's actor) keeps this and parses it only if it is read.
 */
export function storedMetadataOf(record: RecordedEvent): string | MetadataLoader | undefined {
  return record instanceof StoredRecord ? record.storedMetadata : undefined;
}

/** The scanned per-request fields of a StoredRecord (see StoredRecord.request); undefined for other records. */
export function requestFieldsOf(record: RecordedEvent): RequestFields | undefined {
  return record instanceof StoredRecord ? record.request : undefined;
}
