/**
 * Forming a group commit's batch: each append's expected version checked against the stream's
 * head (as committed, or as an earlier append of the same batch left it), then positions,
 * versions and, in-thread, the hash chain after the log's tail. Pure: the write path (group-commit.ts)
 * writes the rows and publishes the outcome once committed.
 */
import type { RecordedEvent } from '../envelope.js';
import { WrongExpectedVersionError } from '../errors.js';
import type { EventRow } from '../rows.js';
import type { AppendResult } from '../store.js';
import { seal, versionMatches, type PendingAppend, type PreparedEvent } from './prepare.js';

/** The log as the batch finds it: last position and hash, the commit's time, committed stream heads. */
export interface LogTail {
  pos: number;
  hash: string;
  time: string;
  versionOf(streamId: string): number;
  /** Refuses an append before its version is checked (a stale lease: LeaseLostError); nothing of it is written. */
  refuse?(append: PendingAppend): Error | undefined;
}

/** A batch sealed after the log's tail: the appends' outcomes, their records, stream heads, new tail. */
export interface SealedBatch {
  outcomes: (AppendResult | Error)[];
  committed: RecordedEvent[];
  heads: Map<string, number>;
  pos: number;
  hash: string;
}

/**
 * Decides versions and seals every append of the batch after the tail: positions, versions, hash
 * chain, records. `row` gets each sealed row with the index of its append, in order. The in-thread
 * commit path; the writer-thread path leaves the chain to the writer (decideBatch alone).
 */
export function sealBatch(batch: PendingAppend[], tail: LogTail, row: (row: EventRow, appendIndex: number) => void): SealedBatch {
  return decideBatch(batch, tail, (e, streamId, pos, version, time, prevHash, i) => {
    const sealed = seal(e, streamId, pos, version, time, prevHash);
    row(sealed.row, i);
    return sealed.record;
  });
}

/**
 * Decides versions and positions of every append of the batch after the tail; `make` turns each
 * event into its record (given the previous record's hash, "" when the chain is left to the
 * writer thread) and emits its row.
 */
export function decideBatch(
  batch: PendingAppend[],
  tail: LogTail,
  make: (e: PreparedEvent, streamId: string, pos: number, version: number, time: string, prevHash: string, appendIndex: number) => RecordedEvent,
): SealedBatch {
  const outcomes: (AppendResult | Error)[] = [];
  const committed: RecordedEvent[] = [];
  const heads = new Map<string, number>();
  let pos = tail.pos;
  let hash = tail.hash;
  for (let i = 0; i < batch.length; i++) {
    const item = batch[i]!;
    const refused = tail.refuse?.(item);
    if (refused) {
      outcomes.push(refused);
      continue;
    }
    const actual = heads.get(item.streamId) ?? tail.versionOf(item.streamId);
    if (!versionMatches(item.expected, actual)) {
      outcomes.push(new WrongExpectedVersionError(item.streamId, item.expected, actual));
      continue;
    }
    const records: RecordedEvent[] = [];
    let version = actual;
    for (const e of item.events) {
      version++;
      pos++;
      const record = make(e, item.streamId, pos, version, tail.time, hash, i);
      hash = record.hash;
      records.push(record);
    }
    if (version !== actual) heads.set(item.streamId, version);
    committed.push(...records);
    outcomes.push({ nextExpectedVersion: version, positions: records.map((r) => r.position), records });
  }
  return { outcomes, committed, heads, pos, hash };
}
