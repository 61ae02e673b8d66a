import type { Observable } from 'rxjs';
import type { NewEvent, RecordedEvent } from './envelope.js';

/**
 * `expectedVersion`:
 *  - a number: the stream's current last version must equal it (-1 = the stream must not exist);
 *  - 'no-stream': same as -1;
 *  - 'any': no check.
 */
export type ExpectedVersion = number | 'no-stream' | 'any';

export interface AppendOptions {
  expectedVersion: ExpectedVersion;
  /**
   * Milliseconds this append may wait for a commit of its own (> 0): any other append's commit
   * takes it sooner. For records no caller waits on, so that several share one commit. A store
   * without group commit ignores it.
   */
  withinMs?: number;
}

export interface AppendResult {
  /** Stream version of the last appended event. */
  nextExpectedVersion: number;
  /** Global positions of the appended events, in order. */
  positions: number[];
  records: RecordedEvent[];
}

/**
 * The log. The SQLite implementation is synchronous underneath, but the interface is async so a
 * shared PostgreSQL backend can implement it later (docs/architecture.md, "Designed for later").
 *
 * Group commit: appends issued while a commit is pending are written together in the next single
 * transaction (one fsync); every caller's promise resolves only after its own commit.
 */
export interface EventStore {
  append(streamId: string, events: NewEvent[], options: AppendOptions): Promise<AppendResult>;
  /** A stream's events from `fromVersion` on, in order; at most `limit` of them (default: all). */
  readStream(streamId: string, fromVersion?: number, limit?: number): RecordedEvent[];
  /** Events with position > `afterPosition` (exclusive), in order. */
  readAll(afterPosition?: number, limit?: number): Iterable<RecordedEvent>;
  /** Last global position (0 when empty). */
  lastPosition(): number;
  /** Current last version of a stream, -1 when absent. */
  streamVersion(streamId: string): number;
  /**
   * Catch up from `afterPosition` (exclusive) then go live: every committed event, in order, once.
   */
  subscribe(afterPosition?: number): Observable<RecordedEvent>;
  /** Waits for pending commits, then closes the database. */
  close(): Promise<void>;
}
