/**
 * All projections behind one `apply(record)`: the gateway applies each committed record right after
 * its commit (store.onCommit), checkpoints now and then, and on start restores the checkpoint and
 * catches up from its position. Rebuilding from position 0 gives the same snapshot as live.
 */
import { parseStreamId } from '../events/catalog.js';
import type { RecordedEvent } from '../events/envelope.js';
import type { PartitionableLog } from '../events/fold-partition.js';
import type { EventStore } from '../events/store.js';
import type { EscrowInput } from '../machines/index.js';
import { EscrowPoolProjection, streamRefs, type EscrowPoolState, type StreamRef } from './escrow-pool.js';
import { RotationDebugProjection, type RotationDebugState } from './rotation-debug.js';
import { SettingsProjection, type SettingsState } from './settings.js';
import { StatusProjection } from './status.js';

/** Bump when the checkpoint shape or a fold changes: an old checkpoint is then ignored (rebuild). */
export const PROJECTIONS_CHECKPOINT_VERSION = 5;
/** Checkpoint name in the store. */
export const PROJECTIONS_CHECKPOINT = 'projections';

export interface ProjectionsState {
  version: number;
  pool: EscrowPoolState;
  settings: SettingsState;
  rotation: RotationDebugState;
}

/** A checkpoint: the last folded position and the state after it. */
export interface ProjectionsCheckpoint {
  position: number;
  state: ProjectionsState;
}

export interface ProjectionsOptions {
  escrow?: EscrowInput;
}

/**
 * The part of the store port the projections use, and the fold read path a local store may offer
 * besides (SqliteEventStore: cheaper records, a split over threads). Structural, so tests can fake it.
 */
export interface CheckpointingStore extends Pick<EventStore, 'readAll' | 'onCommit' | 'saveCheckpoint' | 'loadCheckpoint'> {
  /** The same events as readAll, cheaper to fold (SqliteEventStore.readAllForFold); used for catch-up when present. */
  readAllForFold?(afterPosition?: number): Iterable<RecordedEvent>;
  /** The log for a fold split by stream over threads (SqliteEventStore on a file); used for long catch-ups when present. */
  foldPartitions?(): PartitionableLog | undefined;
}

/** Every projection, applied together. */
export class Projections {
  /** Last applied global position (0 = nothing). */
  position = 0;
  readonly pool: EscrowPoolProjection;
  readonly settings = new SettingsProjection();
  readonly status: StatusProjection;
  readonly rotation = new RotationDebugProjection();

  constructor(options: ProjectionsOptions = {}) {
    this.pool = new EscrowPoolProjection(options.escrow);
    this.status = new StatusProjection(this.pool, this.settings);
  }

  /** Folds one committed record into every projection; records at or before `position` are skipped. */
  apply(record: RecordedEvent): void {
    if (record.position <= this.position) return;
    const stream = parseStreamId(record.streamId);
    this.pool.apply(record, stream);
    this.settings.apply(record);
    this.rotation.apply(record, stream);
    this.position = record.position;
  }

  /** Folds records in order. */
  applyAll(records: Iterable<RecordedEvent>): this {
    for (const r of records) this.apply(r);
    return this;
  }

  /**
   * `applyAll` for many records read back from the log (rebuild, catch-up): the same state, with
   * the escrow pool folding inference events in runs (EscrowPoolProjection.beginBatch).
   */
  foldAll(records: Iterable<RecordedEvent>): this {
    this.pool.beginBatch();
    try {
      const refOf = streamRefs();
      for (const record of records) if (record.position > this.position) this.foldOne(record, refOf(record.streamId));
    } finally {
      this.pool.endBatch();
    }
    return this;
  }

  /** `apply` inside a pool batch (foldAll, partition folds); the caller skips records already folded. */
  foldOne(record: RecordedEvent, stream: StreamRef): void {
    this.pool.fold(record, stream);
    this.settings.apply(record);
    this.rotation.apply(record, stream);
    this.position = record.position;
  }

  /** Deep, JSON-safe snapshot of every projection (what rebuild == live compares). */
  snapshot(): { position: number; pool: EscrowPoolState; settings: ReturnType<SettingsProjection['effective']>; status: ReturnType<StatusProjection['snapshot']>; rotation: RotationDebugState } {
    return {
      position: this.position,
      pool: this.pool.snapshot(),
      settings: this.settings.effective(),
      status: this.status.snapshot(),
      rotation: this.rotation.snapshot(),
    };
  }

  toCheckpoint(): ProjectionsCheckpoint {
    return {
      position: this.position,
      state: {
        version: PROJECTIONS_CHECKPOINT_VERSION,
        pool: this.pool.snapshot(),
        settings: this.settings.snapshot(),
        rotation: this.rotation.snapshot(),
      },
    };
  }

  /** Projections as of a checkpoint; undefined when it has another format version. */
  static fromCheckpoint(checkpoint: ProjectionsCheckpoint, options?: ProjectionsOptions): Projections | undefined {
    if (checkpoint.state?.version !== PROJECTIONS_CHECKPOINT_VERSION) return undefined;
    const p = new Projections(options);
    p.pool.restore(checkpoint.state.pool);
    p.settings.restore(checkpoint.state.settings);
    p.rotation.restore(checkpoint.state.rotation);
    p.position = checkpoint.position;
    return p;
  }

  /**
   * Rebuilt from the whole log (position 0). For a SQLite store pass `store.readAllForFold()`
   * (or use `rebuildProjectionsFrom`, from-store.ts): the same records, read at less cost.
   */
  static rebuild(records: Iterable<RecordedEvent>, options?: ProjectionsOptions): Projections {
    return new Projections(options).foldAll(records);
  }

  /**
   * Saves a checkpoint at the current position (nothing at position 0); settles once it is written.
   * `soon`: let the store write it off the event loop with its next commit (the periodic checkpoint
   * of a serving gateway).
   */
  checkpoint(store: Pick<EventStore, 'saveCheckpoint'>, options: { soon?: boolean } = {}): Promise<void> {
    if (this.position === 0) return Promise.resolve();
    const cp = this.toCheckpoint();
    return store.saveCheckpoint(PROJECTIONS_CHECKPOINT, cp.position, cp.state, options.soon ? { soon: true } : {});
  }
}
