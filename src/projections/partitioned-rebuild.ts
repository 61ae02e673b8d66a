/**
 * Folding a long stretch of the log on every core: the escrow streams are split into partitions
 * of about equal event counts; each partition is folded by its own thread from its own SQLite
 * connection (partition-fold.ts says what each folds and why its share is exact), this thread
 * folding the first; the shares are then merged into one Projections, equal to folding the
 * stretch in one piece (test/projections/partitioned-rebuild.test.ts).
 *
 * Why: folding from SQLite in one piece is bound by one thread (better-sqlite3 building rows
 * ~1.6 µs/event on a reader thread, JSON.parse and the fold on another: ~400k events/s). Escrow
 * streams are independent, and a soak's log is almost all per-request events of some tens of
 * escrows, so the work splits evenly: a partition thread spends ~3.2 µs per event it folds (~2 µs
 * SQLite and row building, skipped rows included; ~0.25 reading the request fields; ~0.9 the
 * fold, its garbage and its share), ~540k events/s with 2 threads.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import { parseStreamId } from '../events/catalog.js';
import { workerFile } from '../events/worker-file.js';
import { foldWeight, type PartitionableLog, type PartitionRead } from '../events/fold-partition.js';
import { foldPartition, PARTITIONED_TYPES, type PartitionOutcome, type PartitionResult } from './partition-fold.js';
import { Projections, type ProjectionsCheckpoint, type ProjectionsOptions } from './projections.js';

/** What a worker is given (structured-cloned). */
export interface PartitionJob {
  entry: string;
  file: string;
  read: PartitionRead;
  checkpoint: ProjectionsCheckpoint | undefined;
  options: ProjectionsOptions | undefined;
  port: MessagePort;
  /** [0] done, [1] pages read (progress). */
  flag: Int32Array;
}

/**
 * This thread's partition gets this many events more than each other: it starts folding at once,
 * while a worker first starts a thread and loads its modules, ~0.25 s on 2 busy cores (~70,000
 * events of folding). A count, not a share, since the head start does not grow with the log;
 * counted in events of one start or end (a log of InferencesRecorded: divided by foldWeight).
 * Measured on a 2M-event soak log: a lead of 40,000 left this thread waiting ~0.1 s for the worker
 * (73–207 ms), one of 100,000–120,000 ~35 ms (docs/lab/benchmarks-notebook.md, session 7).
 */
const THIS_THREAD_LEAD_EVENTS = 100_000;
const WORKER_YOUNG_GENERATION_MB = 192;
/** Without a page of progress for this long, a worker is taken for lost. */
const SILENT_WORKER_SECONDS = 120;

/** The compiled worker module next to this one (absent when running from TypeScript sources, e.g. under vitest). */
export function partitionWorker(): URL | undefined {
  const url = new URL('./partition-worker.js', import.meta.url);
  return existsSync(fileURLToPath(url)) ? url : undefined;
}

/**
 * Splits the escrow streams into `count` partitions of about equal event counts (largest first,
 * each to the lightest partition), the first getting `lead` events more. Returns,
 * per partition, the escrow streams it skips (the others'); every other stream is folded by every
 * partition.
 */
export function planPartitions(streams: [string, number][], count: number, lead = 0): string[][] {
  const escrows = streams.filter(([id]) => parseStreamId(id).kind === 'escrow').sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  const owned: string[][] = Array.from({ length: count }, () => []);
  const weight = new Array<number>(count).fill(0);
  weight[0] = -lead;
  for (const [id, version] of escrows) {
    let k = 0;
    for (let i = 1; i < count; i++) if (weight[i]! < weight[k]!) k = i;
    owned[k]!.push(id);
    weight[k]! += version + 1;
  }
  return owned.map((_, k) => owned.flatMap((ids, j) => (j === k ? [] : ids)));
}


interface Running {
  worker: Worker;
  port: MessagePort;
  flag: Int32Array;
}

function start(job: Omit<PartitionJob, 'port' | 'flag'>): Running {
  const { port1, port2 } = new MessageChannel();
  const flag = new Int32Array(new SharedArrayBuffer(8));
  const worker = new Worker(workerFile('partition-boot', import.meta.url), {
    workerData: { ...job, port: port2, flag },
    transferList: [port2],
    // A fold makes records that die young: a larger young generation scavenges less often (~3%).
    resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB },
  });
  worker.unref();
  return { worker, port: port1, flag };
}

/** Waits (blocking this thread) for a worker's outcome. */
function wait(r: Running): PartitionOutcome {
  let progress = Atomics.load(r.flag, 1);
  let quietSince = Date.now();
  while (Atomics.load(r.flag, 0) === 0) {
    Atomics.wait(r.flag, 0, 0, 1000);
    const now = Atomics.load(r.flag, 1);
    if (now !== progress) {
      progress = now;
      quietSince = Date.now();
    } else if (Date.now() - quietSince > SILENT_WORKER_SECONDS * 1000) return { ok: false, reason: `partition worker silent for ${SILENT_WORKER_SECONDS} s` };
  }
  const received = receiveMessageOnPort(r.port);
  return received ? (received.message as PartitionOutcome) : { ok: false, reason: 'partition worker ended without an answer' };
}

export interface PartitionedFoldOptions {
  /** Partitions (threads, this one included). */
  partitions: number;
  /** The worker module (partitionWorker()); false: every partition is folded on this thread (the same result, slower: for tests). */
  worker: URL | false;
  /** Events this thread's partition takes more than each other (default THIS_THREAD_LEAD_EVENTS with workers, else 0). */
  lead?: number;
}

/**
 * The projections after folding `source` from `checkpoint` (or from empty) up to `source.upTo`,
 * split over `partitions` threads; undefined when a partition gave up (partition-fold.ts), and the
 * caller then folds in one piece. Errors of the fold itself are thrown, as folding in one piece would.
 */
export function foldPartitioned(source: PartitionableLog, checkpoint: ProjectionsCheckpoint | undefined, options: ProjectionsOptions | undefined, opts: PartitionedFoldOptions): Projections | undefined {
  const begin = () => (checkpoint ? Projections.fromCheckpoint(checkpoint, options) : new Projections(options));
  const first = begin();
  if (!first) return undefined;
  const after = first.position;
  const entry = opts.worker || undefined;
  const skips = planPartitions(source.streams, Math.max(1, opts.partitions), opts.lead ?? (entry ? Math.round(THIS_THREAD_LEAD_EVENTS / foldWeight(source)) : 0));
  const reads: PartitionRead[] = skips.map((skipStreams) => ({ after, upTo: source.upTo, skipStreams, skipTypes: PARTITIONED_TYPES }));
  const running = entry ? reads.slice(1).map((read) => start({ entry: entry.href, file: source.file, read, checkpoint, options })) : [];
  try {
    const outcomes: PartitionOutcome[] = [foldPartition(first, source.read(reads[0]!), new Set(reads[0]!.skipStreams), true)];
    if (!outcomes[0]!.ok) return undefined;
    if (entry) for (const r of running) outcomes.push(wait(r));
    else for (const read of reads.slice(1)) outcomes.push(foldPartition(begin()!, source.read(read), new Set(read.skipStreams), false));
    const results: PartitionResult[] = [];
    for (const o of outcomes) {
      if (!o.ok) return undefined;
      results.push(o.result);
    }
    return merge(results, source.upTo, options);
  } finally {
    for (const r of running) {
      r.port.close();
      void r.worker.terminate();
    }
  }
}

/** One Projections from the partitions' shares (the first carries the shared state). */
function merge(results: PartitionResult[], position: number, options: ProjectionsOptions | undefined): Projections {
  const shared = results[0]!.shared!;
  const p = new Projections(options);
  p.settings.restore(shared.settings);
  p.rotation.restore(shared.rotation);
  p.pool.merge(shared.pool, results.map((r) => r.pool));
  p.position = position;
  return p;
}
