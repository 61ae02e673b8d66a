/**
 * Reading the log for a fold split by stream (projections/partitioned-rebuild.ts): each partition
 * reads, on its own read-only connection, every event except the events of some types (the
 * per-request ones and nonce reservations) in the streams another partition folds. SQLite skips
 * those rows itself (~0.3 µs each: it still decodes their type and stream id), so better-sqlite3
 * builds rows only for the events the partition folds: ~2 µs per folded event in all, with 2
 * partitions, over the soak-shaped log (bench/rebuild-bench.ts).
 *
 * Time, metadata and stream version are left out of the read (~0.3 µs per event): a fold reads
 * them of almost no event; records load them by position when asked. The data of per-request
 * events (and of each entry of InferencesRecorded) is scanned for the fields a fold reads
 * (request-data.ts) and parsed only if read.
 */
import Database from 'better-sqlite3';
import { StoredRecord, type DeferredColumns, type HashLoader } from './fold-read.js';
import { isRequestType, scanRecordedEntries, scanRequestData } from './request-data.js';

/** Rows per page (as readAllForFold). */
const PAGE_SIZE = 2_000;
/** Bytes of the file a fold connection maps (SQLite caps it at its compile-time maximum, ~2 GiB). */
export const FOLD_MMAP_BYTES = 2 ** 31;

/** What one partition reads: events in (after, upTo], except events of `skipTypes` in `skipStreams`. */
export interface PartitionRead {
  after: number;
  upTo: number;
  skipStreams: readonly string[];
  skipTypes: readonly string[];
}

/** The log's last position and its streams with their head versions, read in one transaction. */
export interface FoldSource {
  upTo: number;
  streams: [streamId: string, version: number][];
  /** The log file's size (pages × page size): with `upTo`, how heavy its events are (foldWeight). */
  bytes?: number;
}

/**
 * Bytes a log holds per event when each request start and end is its own event (~620 in the
 * soak's log of 2M events: data, metadata, hashes and index entries).
 */
const SINGLE_EVENT_BYTES = 600;

/**
 * What one event of the log weighs in a fold, in events of one request start or end (at least 1),
 * estimated from the log's bytes per event: an InferencesRecorded holds many starts and ends, and
 * its fold costs about what folding them one by one would (scanning them is most of it). Split
 * thresholds and head starts are counted in those events.
 */
export function foldWeight(source: FoldSource): number {
  return source.bytes && source.upTo > 0 ? Math.max(1, source.bytes / source.upTo / SINGLE_EVENT_BYTES) : 1;
}

/** A log a fold can be split over: what planning needs, and a reader for the calling thread's partition. */
export interface PartitionableLog extends FoldSource {
  /** The SQLite file (each worker opens its own read-only connection). */
  file: string;
  /** One partition's records, read on the calling thread. */
  read(read: PartitionRead): Iterable<StoredRecord>;
}

/** A read-only, memory-mapped connection for folds (its own, so a writer is left alone). */
export function openFoldConnection(file: string): Database.Database {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  db.pragma(`mmap_size = ${FOLD_MMAP_BYTES}`);
  return db;
}

/** The last position and the streams of the log (what planning partitions needs). */
export function readFoldSource(db: Database.Database): FoldSource {
  return db.transaction(() => ({
    upTo: (db.prepare('SELECT max(position) FROM events').pluck().get() as number | null) ?? 0,
    streams: db.prepare('SELECT stream_id, version FROM streams').raw().all() as [string, number][],
    bytes: (db.pragma('page_count', { simple: true }) as number) * (db.pragma('page_size', { simple: true }) as number),
  }))();
}

/** prev_hash/hash of a position, read on demand from `db`. */
export function hashesOn(db: Database.Database): HashLoader {
  const hashAt = db.prepare('SELECT prev_hash, hash FROM events WHERE position = ?').raw();
  return (position) => {
    const row = hashAt.get(position) as [string, string] | undefined;
    if (!row) throw new Error(`no event at position ${position}`);
    return { prevHash: row[0], hash: row[1] };
  };
}

/** The columns a partition read leaves in the table, loaded from `db` by position. */
export function deferredOn(db: Database.Database): DeferredColumns {
  const one = db.prepare('SELECT stream_version, time, metadata FROM events WHERE position = ?').raw();
  return {
    load(position) {
      const r = one.get(position) as [number, string, string] | undefined;
      if (!r) throw new Error(`no event at position ${position}`);
      return { streamVersion: r[0], time: r[1], metadata: r[2] };
    },
  };
}

/** The internalized copy of a string (what V8 uses for property keys). */
const internalized = (s: string): string => Object.keys({ [s]: 0 })[0]!;

/** The events of one partition, in position order, as StoredRecords whose metadata loads on demand. */
export function* readPartition(db: Database.Database, read: PartitionRead): Generator<StoredRecord> {
  const hashes = hashesOn(db);
  const deferred = deferredOn(db);
  const types = read.skipTypes.map(() => '?').join(', ');
  const page = db
    .prepare(
      'SELECT position, stream_id, type, schema_version, data FROM events ' +
        `WHERE position > ? AND position <= ? AND NOT (type IN (${types}) AND stream_id IN (SELECT value FROM json_each(?))) ` +
        'ORDER BY position LIMIT ?',
    )
    .raw();
  const skip = JSON.stringify(read.skipStreams);
  // One internalized string per event type: the fold looks types up as property keys and in sets,
  // which a fresh string from SQLite makes V8 hash (and internalize) every time.
  const typeNames = new Map<string, string>();
  let after = read.after;
  for (;;) {
    const rows = page.all(after, read.upTo, ...read.skipTypes, skip, PAGE_SIZE) as [number, string, string, number, string][];
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i]!;
      let type = typeNames.get(r[2]);
      if (type === undefined) typeNames.set(r[2], (type = internalized(r[2])));
      const request = isRequestType(type) ? scanRequestData(type, r[4]) : type === 'InferencesRecorded' ? scanRecordedEntries(r[4]) : undefined;
      yield new StoredRecord(r[0], r[1], undefined, type, r[3], request ? r[4] : JSON.parse(r[4]), undefined, undefined, hashes, deferred, request);
    }
    if (rows.length < PAGE_SIZE) return;
    after = rows[rows.length - 1]![0];
  }
}
