/**
 * What the console reads of the event log: a stream page by version, the log after a position,
 * the live subscription, and the heads the store keeps in memory. The gateway's `EventStore`
 * (src/events/store.ts) is one, whichever database holds it.
 */
import type { Observable } from 'rxjs';
import type { RecordedEvent } from '../events/envelope.js';
import type { Awaitable } from '../events/store.js';

export interface ConsoleLog {
  /** A stream's events from `fromVersion` on, in order; at most `limit`. */
  readStream(streamId: string, fromVersion?: number, limit?: number): Awaitable<RecordedEvent[]>;
  /** Events with position > `afterPosition`, in order. */
  readAll(afterPosition?: number, limit?: number): Iterable<RecordedEvent> | AsyncIterable<RecordedEvent>;
  /** Catch-up from `afterPosition`, then every committed event, once, in order. */
  subscribe(afterPosition?: number): Observable<RecordedEvent>;
  /** Last committed position (in memory). */
  lastPosition(): number;
  /** A stream's last version, -1 when absent (in memory). */
  streamVersion(streamId: string): number;
}
