/**
 * The read path for folding the whole log (projection rebuild, catch-up): the same records as
 * `readAll`, made cheaper where a fold does not look.
 *
 * Measured over a 2M-event soak-shaped log (bench/rebuild-bench.ts): better-sqlite3 building the
 * ten-column row was ~2.3 µs/event, JSON.parse of data ~0.9 µs and of metadata ~0.85 µs, out of
 * ~7 µs per rebuilt event. A fold reads `data` of every event but `metadata` of almost none, and
 * `prevHash`/`hash` never. So:
 *  - the SELECT leaves out prev_hash and hash (loaded by position if a caller asks);
 *  - metadata stays JSON text until first read;
 *  - reads go through their own read-only connection with the file memory-mapped (no pread
 *    syscall per page), so the writing connection is left as it is.
 */
import type { EventMetadata, RecordedEvent } from './envelope.js';
import type { EntryFields, RequestFields } from './request-data.js';

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

/** The columns a read may leave in the table, of one event. */
export interface DeferredRow {
  streamVersion: number;
  time: string;
  /** Stored metadata text (canonical JSON). */
  metadata: string;
}

/**
 * Columns a read left in the table (a partition of a rebuild reads neither time, metadata nor
 * stream version of the events it folds), loaded by position when a record's are read.
 */
export interface DeferredColumns {
  load(position: number): DeferredRow;
}

/**
 * A recorded event whose `metadata` is parsed on first read and whose `prevHash`/`hash` are loaded
 * on first read; a read may also leave `time`, `streamVersion` and the metadata text in the table
 * (`deferred`), and the data of a per-request event as text (`request`). They are prototype
 * getters (an own accessor per record costs ~0.7 µs: V8 gives such objects dictionary
 * properties), so an object spread of a StoredRecord does not carry them; `toJSON` and
 * `toRecord()` do. Use these records for folding, `readAll` for anything else.
 */
export class StoredRecord implements RecordedEvent {
  readonly position: number;
  readonly streamId: string;
  readonly type: string;
  readonly schemaVersion: number;
  /** Where `streamVersion`, `time` and the metadata text are loaded from when the read left them out. */
  readonly deferred: DeferredColumns | undefined;
  /**
   * Of a per-request event whose data was left as text: the fields a fold reads, scanned from it
   * (request-data.ts); of InferencesRecorded, those of each entry. Undefined otherwise.
   */
  readonly request: RequestFields | readonly EntryFields[] | undefined;
  #streamVersion: number | undefined;
  #time: string | undefined;
  #metadataText: string | undefined;
  #data: unknown;
  /** The data's JSON text until `data` is first read (set with `request`). */
  #dataText: string | undefined;
  #metadata: EventMetadata | undefined;
  #hashes: { prevHash: string; hash: string } | undefined;
  readonly #loadHashes: HashLoader;

  /**
   * `streamVersion`, `metadata` (text) and `time` undefined: loaded from `deferred`. `request`: the
   * scanned fields of `data`, then given as its JSON text, parsed on first read.
   */
  constructor(
    position: number,
    streamId: string,
    streamVersion: number | undefined,
    type: string,
    schemaVersion: number,
    data: unknown,
    metadata: string | undefined,
    time: string | undefined,
    loadHashes: HashLoader,
    deferred?: DeferredColumns,
    request?: RequestFields | readonly EntryFields[],
  ) {
    this.position = position;
    this.streamId = streamId;
    this.type = type;
    this.schemaVersion = schemaVersion;
    this.deferred = deferred;
    this.request = request;
    this.#streamVersion = streamVersion;
    this.#time = time;
    this.#metadataText = metadata;
    this.#data = request ? undefined : data;
    this.#dataText = request ? (data as string) : undefined;
    this.#loadHashes = loadHashes;
  }

  /** The record of a FOLD_COLUMNS row (parses `data`). */
  static fromRow(row: FoldRow, loadHashes: HashLoader): StoredRecord {
    return new StoredRecord(row[0], row[1], row[2], row[3], row[4], JSON.parse(row[5]), row[6], row[7], loadHashes);
  }

  #load(): DeferredRow {
    const row = this.deferred!.load(this.position);
    this.#streamVersion = row.streamVersion;
    this.#time = row.time;
    this.#metadataText = row.metadata;
    return row;
  }

  get streamVersion(): number {
    return this.#streamVersion ?? this.#load().streamVersion;
  }

  get time(): string {
    return this.#time ?? this.#load().time;
  }

  get data(): unknown {
    if (this.#dataText !== undefined) {
      this.#data = JSON.parse(this.#dataText);
      this.#dataText = undefined;
    }
    return this.#data;
  }

  /** The stored metadata text (canonical JSON), for callers that want only a part of it. */
  get metadataJson(): string {
    return this.#metadataText ?? this.#load().metadata;
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

/** Whether scanned fields are InferencesRecorded's entries (not one request event's fields). */
export const isEntryList = (fields: RequestFields | readonly EntryFields[]): fields is readonly EntryFields[] => Array.isArray(fields);

/** The scanned per-request fields of a StoredRecord (see StoredRecord.request); undefined for other records. */
export function requestFieldsOf(record: RecordedEvent): RequestFields | readonly EntryFields[] | undefined {
  return record instanceof StoredRecord ? record.request : undefined;
}
