/**
 * An append before it reaches the log: checked and serialized up front (so bad input rejects only
 * its own caller), then sealed at its place in the log (position, version, hash chain).
 */
import { canonicalJsonByWalk, isCanonicalPlain } from '../canonical-json.js';
import type { EventMetadata, NewEvent, RecordedEvent } from '../envelope.js';
import { eventHash } from '../hash.js';
import type { EventRow } from '../rows.js';
import type { AppendResult, ExpectedVersion, Fence } from '../store.js';

/** An append validated and serialized up front, so bad input rejects only its own caller. */
export interface PreparedEvent {
  type: string;
  schemaVersion: number;
  dataJson: string;
  metadataJson: string;
  /**
   * The appended values themselves when their text parses back to an equal value (plain data in
   * canonical key order, as the request path builds them): the record shares them instead of
   * parsing the text again (two parses and ~1 KB of garbage per request). Appended events are not
   * changed afterwards by their callers, so sharing is safe.
   */
  data: unknown;
  metadata: EventMetadata | undefined;
}

export interface PendingAppend {
  streamId: string;
  expected: ExpectedVersion;
  events: PreparedEvent[];
  /** The lease it is written under (AppendOptions.fence); only a store with leases checks it. */
  fence?: Fence | undefined;
  resolve(result: AppendResult): void;
  reject(error: unknown): void;
}

/**
 * Seals one event at its place in the log: the hash-chained row to store, and the record callers
 * get, parsed back from the stored text so live records look exactly like replayed ones.
 */
export function seal(e: PreparedEvent, streamId: string, position: number, streamVersion: number, time: string, prevHash: string): { row: EventRow; record: RecordedEvent } {
  const hash = eventHash(prevHash, { position, streamId, streamVersion, type: e.type, schemaVersion: e.schemaVersion, dataJson: e.dataJson, metadataJson: e.metadataJson, time });
  return {
    row: [position, streamId, streamVersion, e.type, e.schemaVersion, e.dataJson, e.metadataJson, time, prevHash, hash],
    record: recordOf(e, streamId, position, streamVersion, time, prevHash, hash),
  };
}

export function recordOf(e: PreparedEvent, streamId: string, position: number, streamVersion: number, time: string, prevHash: string, hash: string): RecordedEvent {
  return {
    position,
    streamId,
    streamVersion,
    type: e.type,
    schemaVersion: e.schemaVersion,
    data: e.data !== undefined ? e.data : JSON.parse(e.dataJson),
    metadata: e.metadata !== undefined ? e.metadata : (JSON.parse(e.metadataJson) as EventMetadata),
    time,
    prevHash,
    hash,
  };
}

export function checkExpected(expected: ExpectedVersion): void {
  if (expected === 'any' || expected === 'no-stream') return;
  if (!Number.isInteger(expected) || expected < -1) {
    throw new TypeError(`expectedVersion must be an integer >= -1, 'no-stream' or 'any' (got ${String(expected)})`);
  }
}

export function versionMatches(expected: ExpectedVersion, actual: number): boolean {
  if (expected === 'any') return true;
  if (expected === 'no-stream') return actual === -1;
  return expected === actual;
}

export function prepareEvents(streamId: string, events: NewEvent[]): PreparedEvent[] {
  if (typeof streamId !== 'string' || streamId.length === 0) throw new TypeError('streamId must be a non-empty string');
  if (!Array.isArray(events)) throw new TypeError('events must be an array');
  return events.map((e, i) => {
    if (typeof e.type !== 'string' || e.type.length === 0) throw new TypeError(`event[${i}].type must be a non-empty string`);
    const schemaVersion = e.schemaVersion ?? 1;
    if (!Number.isInteger(schemaVersion) || schemaVersion < 1) {
      throw new TypeError(`event[${i}].schemaVersion must be an integer >= 1`);
    }
    if (e.metadata === null || typeof e.metadata !== 'object') throw new TypeError(`event[${i}].metadata must be an object`);
    const plainData = isCanonicalPlain(e.data);
    const plainMetadata = isCanonicalPlain(e.metadata);
    return {
      type: e.type,
      schemaVersion,
      dataJson: plainData ? JSON.stringify(e.data) : canonicalJsonByWalk(e.data, `event[${i}].data`),
      metadataJson: plainMetadata ? JSON.stringify(e.metadata) : canonicalJsonByWalk(e.metadata, `event[${i}].metadata`),
      data: plainData ? e.data : undefined,
      metadata: plainMetadata ? e.metadata : undefined,
    };
  });
}
