/**
 * Projections built from a store: rebuilt from position 0, caught up from a checkpoint, or
 * followed commit by commit (what a serving gateway does). A long catch-up is split by stream over
 * threads (partitioned-rebuild.ts); this module sits above both, so the Projections class and the
 * partitioned fold do not import each other.
 */
import { availableParallelism } from 'node:os';
import { foldWeight } from '../events/fold-partition.js';
import { foldPartitioned, partitionWorker } from './partitioned-rebuild.js';
import { PROJECTIONS_CHECKPOINT, Projections, type CheckpointingStore, type ProjectionsCheckpoint, type ProjectionsOptions, type ProjectionsState } from './projections.js';

/** Below this many events to fold, starting threads (~0.1 s) does not pay: one piece. */
const PARTITION_MIN_EVENTS = 200_000;
/** At most this many threads fold a split log. */
const MAX_PARTITIONS = 8;

type ReadableStore = Pick<CheckpointingStore, 'readAll' | 'readAllForFold' | 'foldPartitions'>;

/**
 * Rebuilt from a store's whole log: split by stream over the cores when the store offers it and
 * the log is long (partitioned-rebuild.ts), else in one piece through its fold read path.
 */
export function rebuildProjectionsFrom(store: ReadableStore, options?: ProjectionsOptions): Projections {
  return catchUpProjections(store, undefined, options);
}

/**
 * The projections as of `checkpoint` (or empty) folded to the end of the store's log; how, as
 * in `rebuildProjectionsFrom`. `split` overrides when and how the fold is split (tests, benchmarks).
 */
export function catchUpProjections(
  store: ReadableStore,
  checkpoint: ProjectionsCheckpoint | undefined,
  options?: ProjectionsOptions,
  split: { minEvents?: number; partitions?: number; worker?: URL | false } = {},
): Projections {
  const restored = checkpoint && Projections.fromCheckpoint(checkpoint, options);
  const from = restored ? restored.position : 0;
  const partitions = split.partitions ?? Math.min(availableParallelism(), MAX_PARTITIONS);
  // Without the compiled worker (running from TypeScript sources) only an explicit `worker: false` splits.
  const worker = split.worker ?? partitionWorker();
  const log = partitions > 1 && worker !== undefined ? store.foldPartitions?.() : undefined;
  // Counted in events of one start or end: a log of InferencesRecorded holds many per event.
  if (log && worker !== undefined && (log.upTo - from) * foldWeight(log) >= (split.minEvents ?? PARTITION_MIN_EVENTS) && log.upTo > from) {
    const folded = foldPartitioned(log, restored ? checkpoint : undefined, options, { partitions, worker });
    if (folded) return folded;
  }
  const p = restored || new Projections(options);
  return p.foldAll(store.readAllForFold ? store.readAllForFold(p.position) : store.readAll(p.position));
}

/**
 * Restores the store's checkpoint (or starts empty), catches up (`catchUpProjections`), then
 * follows every commit. Catch-up and attach happen in one synchronous stretch, so no commit slips
 * between them.
 * @returns the projections and a `detach` function
 */
export function followProjections(store: CheckpointingStore, options?: ProjectionsOptions): { projections: Projections; detach: () => void } {
  const cp = store.loadCheckpoint<ProjectionsState>(PROJECTIONS_CHECKPOINT);
  const projections = catchUpProjections(store, cp, options);
  const detach = store.onCommit((records) => projections.applyAll(records));
  return { projections, detach };
}
