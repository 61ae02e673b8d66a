/**
 * Projections built from a store: rebuilt from position 0, caught up from a checkpoint, or
 * followed commit by commit (what a serving gateway does). A long catch-up is split by stream over
 * threads (partitioned-rebuild.ts); this module sits above both, so the Projections class and the
 * partitioned fold do not import each other.
 */
import { availableParallelism } from 'node:os';
import type { RecordedEvent } from '../events/envelope.js';
import { foldWeight, type PartitionableLog } from '../events/fold-partition.js';
import { foldPartitioned, partitionWorker } from './partitioned-rebuild.js';
import { PROJECTIONS_CHECKPOINT, Projections, type CheckpointingStore, type ProjectionsCheckpoint, type ProjectionsOptions, type ProjectionsState } from './projections.js';

/** Below this many events to fold, starting threads (~0.1 s) does not pay: one piece. */
const PARTITION_MIN_EVENTS = 200_000;
/** At most this many threads fold a split log. */
const MAX_PARTITIONS = 8;

/** A log read where it lives (SQLite's file): its reads answer at once, so a fold is one stretch. */
export interface LocalLog {
  readAll(afterPosition?: number): Iterable<RecordedEvent>;
  readAllForFold?(afterPosition?: number): Iterable<RecordedEvent>;
  foldPartitions?(): PartitionableLog | undefined;
}
type ReadableStore = LocalLog;

/** Events folded per batch while catching up from a store whose reads are asynchronous. */
const ASYNC_PAGE = 5_000;

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
 * follows every commit. With a local log, catch-up and attach happen in one synchronous stretch,
 * so no commit slips between them. With a store whose reads are asynchronous (a server database),
 * the listener is attached first and holds what commits during the catch-up, which then folds
 * page by page; the held records past the caught-up position follow, then the listener folds
 * directly: every event once, in order.
 * @returns the projections and a `detach` function
 */
export async function followProjections(store: CheckpointingStore, options?: ProjectionsOptions): Promise<{ projections: Projections; detach: () => void }> {
  const cp = await store.loadCheckpoint<ProjectionsState>(PROJECTIONS_CHECKPOINT);
  if (isLocalLog(store)) {
    const projections = catchUpProjections(store, cp, options);
    const detach = store.onCommit((records) => projections.applyAll(records));
    return { projections, detach };
  }
  const projections = (cp && Projections.fromCheckpoint(cp, options)) || new Projections(options);
  let held: RecordedEvent[] | undefined = [];
  const detach = store.onCommit((records) => {
    if (held) held.push(...records);
    else projections.applyAll(records);
  });
  try {
    for (;;) {
      const page: RecordedEvent[] = [];
      for await (const r of store.readAll(projections.position, ASYNC_PAGE)) page.push(r);
      if (page.length === 0) break;
      projections.foldAll(page);
    }
    const rest = held.filter((r) => r.position > projections.position);
    held = undefined;
    projections.applyAll(rest);
  } catch (err) {
    detach();
    throw err;
  }
  return { projections, detach };
}

/** Whether the store's reads answer at once (SQLite): its readAll is a plain iterable. */
function isLocalLog(store: CheckpointingStore): store is CheckpointingStore & LocalLog {
  if (store.readAllForFold) return true;
  const probe = store.readAll(Number.MAX_SAFE_INTEGER, 0);
  return typeof (probe as Partial<Iterable<RecordedEvent>>)[Symbol.iterator] === 'function';
}
