/**
 * Rebuild-from-SQLite benchmark (not a test; `node dist/bench/rebuild-bench.js [events] [repeats]`).
 *
 * Writes (once; cached under the OS temp dir) a SQLite event log shaped like the gateway soak's —
 * mostly InferenceStarted / InferenceFinished with `req-<uuid>` request ids, nonces reserved in
 * blocks (NoncesReserved), SOAK_SHAPE escrows of one model all taking requests at once with about
 * one request in flight each (the soak: 53 escrows, 64 connections; bench/soak-log.ts writes a
 * real one), written through the real store with group commit — then times, interleaved in each repeat so the ratios come from
 * the same moment of a shared machine:
 *
 *  - `rebuildFrom`: `rebuildProjectionsFrom(store)`, what the gateway bench's soak measures: the
 *    fold split by stream over the cores (projections/partitioned-rebuild.ts);
 *  - `rebuildFrom (one piece)`: the same without the split (readAllForFold on a reader thread,
 *    one fold), what rebuildFrom did before the split;
 *  - `readAll`: `store.readAll()` alone (rows decoded into records);
 *  - `readAll + rebuild`: `Projections.rebuild(store.readAll())`;
 *  - `readAllForFold…`: the fold read path alone and with a rebuild, on this thread or a reader thread.
 *
 * Each in events/s (wall clock) and per CPU-second of this process.
 */
import { existsSync, mkdirSync, rmSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { openSqliteEventStore, type SqliteEventStore } from '../src/events/sqlite-store.js';
import { catchUpProjections, Projections, rebuildProjectionsFrom } from '../src/projections/index.js';
import { generateEvents } from './projections-bench.js';

export interface RebuildBenchOptions {
  /** Events in the log (default 2,000,000, about the soak's 2.09M). */
  events?: number;
  /** Timed repeats of every measurement (default 3). */
  repeats?: number;
  /** Log file (default `<tmp>/shardgate-rebuild-bench/soak-shaped-<events>.sqlite`, reused when complete). */
  file?: string;
  /** Measurements to run (default all), by name. */
  only?: string[];
  log?: (line: string) => void;
}

export interface Measurement {
  name: string;
  events: number;
  seconds: number;
  eventsPerSec: number;
  cpuEventsPerSec: number;
}

export interface RebuildBenchResult {
  events: number;
  fileBytes: number;
  /** Per measurement, every repeat in order. */
  runs: Record<string, Measurement[]>;
  /** Per measurement, the fastest repeat. */
  best: Record<string, Measurement>;
  load: { start: number; end: number };
}

/**
 * The soak's shape (bench/soak-log.ts, 1,000,000 requests): its escrows are all created before the
 * load and share it, ~19,000 requests each, none reaching the routing stop; a request's end comes
 * ~100 events after its start.
 */
export const SOAK_SHAPE = { models: 1, escrowsPerModel: 52, inFlight: 1 } as const;

/** Deterministic `req-<uuid>`-shaped ids (the gateway's genReqId makes `req-${randomUUID()}`). */
function uuidLike(n: number): string {
  let h = (Math.imul(n, 0x9e3779b1) ^ 0x5bd1e995) >>> 0;
  const hex = (): string => {
    h ^= h << 13;
    h ^= h >>> 17;
    h ^= h << 5;
    h >>>= 0;
    return h.toString(16).padStart(8, '0');
  };
  const a = hex();
  const b = hex();
  const c = hex();
  const d = hex();
  return `req-${a}-${b.slice(0, 4)}-4${b.slice(5, 8)}-a${c.slice(1, 4)}-${c.slice(4)}${d}`;
}

/** Writes the log through the real store (group commit, bursts of 1000 appends) unless the file already holds it. */
export async function ensureLog(file: string, events: number, log: (line: string) => void): Promise<void> {
  if (existsSync(file)) {
    const store = openSqliteEventStore(file, { writerThread: false });
    const last = store.lastPosition();
    await store.close();
    if (last === events) return;
    log(`${file} holds ${last} events, not ${events}: rewriting`);
    for (const suffix of ['', '-wal', '-shm']) rmSync(file + suffix, { force: true });
  }
  mkdirSync(join(file, '..'), { recursive: true });
  const t0 = process.hrtime.bigint();
  const store = openSqliteEventStore(file);
  try {
    const burst = 1_000;
    let acks: Promise<unknown>[] = [];
    let written = 0;
    for (const { streamId, event, metadata } of generateEvents(events, { ...SOAK_SHAPE, requestId: uuidLike, keyId: 'ck_7f3a9c21' })) {
      acks.push(store.append(streamId, [{ type: event.type, data: event.data, metadata }], { expectedVersion: 'any' }));
      if (acks.length === burst) {
        await Promise.all(acks);
        acks = [];
        written += burst;
        if (written % 200_000 === 0) log(`  wrote ${written.toLocaleString('en')} events`);
      }
    }
    await Promise.all(acks);
  } finally {
    await store.close();
  }
  log(`wrote ${events.toLocaleString('en')} events to ${file} in ${(Number(process.hrtime.bigint() - t0) / 1e9).toFixed(1)} s`);
}

type Run = (store: SqliteEventStore) => number;

/** What is timed; each returns the number of events it went through. */
export const MEASUREMENTS: Record<string, Run> = {
  rebuildFrom: (store) => rebuildProjectionsFrom(store).position,
  'rebuildFrom (one piece)': (store) => catchUpProjections(store, undefined, undefined, { partitions: 1 }).position,
  readAll: (store) => {
    let n = 0;
    for (const _ of store.readAll()) n++;
    return n;
  },
  'readAll + rebuild': (store) => Projections.rebuild(store.readAll()).position,
  readAllForFold: (store) => {
    let n = 0;
    for (const _ of store.readAllForFold(0, { thread: false })) n++;
    return n;
  },
  'readAllForFold + rebuild': (store) => Projections.rebuild(store.readAllForFold(0, { thread: false })).position,
  'readAllForFold(thread)': (store) => {
    let n = 0;
    for (const _ of store.readAllForFold(0, { thread: true })) n++;
    return n;
  },
  'readAllForFold(thread) + rebuild': (store) => Projections.rebuild(store.readAllForFold(0, { thread: true })).position,
};

function time(name: string, run: Run, store: SqliteEventStore): Measurement {
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const events = run(store);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  return { name, events, seconds, eventsPerSec: Math.round(events / seconds), cpuEventsPerSec: Math.round(events / ((cpu.user + cpu.system) / 1e6)) };
}

export async function benchRebuild(opts: RebuildBenchOptions = {}): Promise<RebuildBenchResult> {
  const events = opts.events ?? 2_000_000;
  const repeats = opts.repeats ?? 3;
  const log = opts.log ?? (() => {});
  // The name changes with the shape, so a log cached in an older shape is not reused.
  const file = opts.file ?? join(tmpdir(), 'shardgate-rebuild-bench', `soak-shaped-${events}.sqlite`);
  await ensureLog(file, events, log);
  const fileBytes = statSync(file).size;
  log(`log: ${events.toLocaleString('en')} events, ${(fileBytes / 2 ** 20).toFixed(1)} MiB (${Math.round(fileBytes / events)} bytes/event)`);
  const names = opts.only ?? Object.keys(MEASUREMENTS);
  const start = loadavg()[0]!;
  const store = openSqliteEventStore(file, { writerThread: false });
  const runs: Record<string, Measurement[]> = {};
  try {
    for (let r = 0; r < repeats; r++) {
      for (const name of names) {
        const run = MEASUREMENTS[name];
        if (!run) throw new Error(`unknown measurement ${name}`);
        const m = time(name, run, store);
        if (m.events !== events) throw new Error(`${name}: went through ${m.events} events, expected ${events}`);
        (runs[name] ??= []).push(m);
        log(`  #${r + 1} ${name.padEnd(32)} ${m.seconds.toFixed(2)} s  ${m.eventsPerSec.toLocaleString('en').padStart(9)} events/s  ${m.cpuEventsPerSec.toLocaleString('en').padStart(9)} per CPU-s`);
      }
    }
  } finally {
    await store.close();
  }
  const best: Record<string, Measurement> = {};
  for (const [name, ms] of Object.entries(runs)) best[name] = ms.reduce((a, b) => (b.eventsPerSec > a.eventsPerSec ? b : a));
  const end = loadavg()[0]!;
  log(`load average ${start.toFixed(2)} → ${end.toFixed(2)}; best and median of ${repeats}:`);
  for (const [name, m] of Object.entries(best)) {
    const sorted = runs[name]!.map((r) => r.eventsPerSec).sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)]!;
    log(`  ${m.name.padEnd(28)} ${m.eventsPerSec.toLocaleString('en').padStart(9)} events/s (median ${median.toLocaleString('en')})  ${m.cpuEventsPerSec.toLocaleString('en').padStart(9)} per CPU-s`);
  }
  return { events, fileBytes, runs, best, load: { start, end } };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [events, repeats, ...only] = process.argv.slice(2);
  await benchRebuild({
    events: events ? Number(events) : undefined,
    repeats: repeats ? Number(repeats) : undefined,
    only: only.length ? only : undefined,
    log: (line) => console.log(line),
  });
}
