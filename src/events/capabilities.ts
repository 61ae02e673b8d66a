import type { RecordedEvent } from './envelope.js';

/**
 * What the store offers beyond the EventStore contract, as interfaces, so projections depend on
 * these rather than on the SQLite class (a PostgreSQL store can implement them too).
 */

/** Runs synchronously right after each commit, with its events in position order. */
export type CommitListener = (records: RecordedEvent[]) => void;

export interface CommitNotifier {
  /** Returns an unsubscribe function. */
  onCommit(listener: CommitListener): () => void;
}

export interface Checkpoint<S = unknown> {
  name: string;
  /** Last global position folded into `state`. */
  position: number;
  state: S;
  /** Hash of the event at `position` ("" at 0): ties the checkpoint to this exact log. */
  hash: string;
}

export interface CheckpointStore {
  saveCheckpoint(name: string, position: number, state: unknown): void;
  /** Undefined when absent or when the checkpoint does not match this log. */
  loadCheckpoint<S = unknown>(name: string): Checkpoint<S> | undefined;
}
