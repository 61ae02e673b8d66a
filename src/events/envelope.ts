/**
 * The shapes every stored event has, independent of what it means.
 * The catalog (catalog.ts) says which `type`s exist and what their `data` holds.
 */

/** Who caused an event. Recorded so an operator can audit every transition. */
export type Actor =
  | { kind: 'admin' }
  | { kind: 'client'; keyId: string }
  | { kind: 'rotation-task' }
  | { kind: 'depletion-check' }
  | { kind: 'startup' }
  | { kind: 'shutdown' }
  | { kind: 'reconciler' }
  /** v5 idle heartbeat spans (gateway/workers/heartbeats.ts). */
  | { kind: 'heartbeat-task' }
  /** Chat requests recorded together (InferencesRecorded): each entry names its request, a start its client key (null: admin). */
  | { kind: 'chat' };

export interface EventMetadata {
  actor: Actor;
  /** Id of the request or task run that started the chain of events. */
  correlationId?: string;
  /** Id (or global position, as a string) of the event or command that directly caused this one. */
  causationId?: string;
  /** HTTP request id, when the event came from a request. */
  requestId?: string;
}

/** What a caller hands to `append`. */
export interface NewEvent<T extends string = string, D = unknown> {
  type: T;
  /** Schema version of `data`; upcasters in the catalog bring old versions forward. */
  schemaVersion?: number;
  data: D;
  metadata: EventMetadata;
}

/** What the store gives back: the event plus where and when it was recorded. */
export interface RecordedEvent<T extends string = string, D = unknown> {
  /** Global position, 1-based, gapless (SQLite rowid). */
  position: number;
  streamId: string;
  /** 0-based, gapless within the stream. */
  streamVersion: number;
  type: T;
  schemaVersion: number;
  data: D;
  metadata: EventMetadata;
  /** ISO-8601 time of the commit. */
  time: string;
  /** Hex sha256 of the previous event's hash + this event's canonical JSON ("" before position 1). */
  prevHash: string;
  hash: string;
}
