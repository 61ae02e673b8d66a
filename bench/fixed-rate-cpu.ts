/**
 * CPU time per request of target processes at one fixed request rate (issue 31 (c)).
 *
 * A closed-loop run (wrk at c=8) makes CPU per request depend on the throughput: the faster a
 * target answers, the more requests share each event-loop turn, each store commit and each
 * syscall batch, so the figure moved with the machine's load. Here every target gets the same
 * open-loop rate from the load generator in its own process (bench/load-worker.ts, `fixed-rate`),
 * in interleaved rounds; per round the target's CPU (/proc/<pid>/stat: user + system, all threads)
 * over the round is divided by the requests it answered. The figure is the median round.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { LoadWorker } from './gateway-bench.js';
import type { FixedRateSummary } from './load-worker.js';
import { processCpuSeconds } from './target-process.js';

/**
 * CPU seconds by thread (the main one, the others by name; /proc/<pid>/task/<tid>: comm and stat
 * utime+stime); Linux only. `names`: labels of known thread ids (the gateway's log writer).
 */
export function threadCpu(pid: number, names: Readonly<Record<string, string>> = {}): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      // Node's threads are all named "node" (V8's GC and compiler helpers, libuv's pool, worker
      // threads): the main thread is told apart by its id (= pid), the labelled ones by theirs.
      const comm = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const name = tid === String(pid) ? 'main' : (names[tid] ?? (comm === 'node' ? 'other' : comm));
      const f = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      out.set(name, (out.get(name) ?? 0) + (Number(f[11]) + Number(f[12])) / 100);
    } catch {
      /* the thread ended */
    }
  }
  return out;
}

export interface CpuTarget {
  /** Printed name. */
  name: string;
  pid: number;
  url: string;
  headers: Record<string, string>;
  body: string;
  /** Labels of the process's known threads by Linux thread id (the gateway's log writer). */
  threadNames?: Record<string, string>;
}

export interface FixedRateCpuRound {
  requests: number;
  achievedRate: number;
  p99Ms: number;
  cpuMicrosPerRequest: number;
  mainThreadMicrosPerRequest: number;
}

export interface FixedRateCpu {
  target: string;
  /** The rate asked of every target (req/s) and the seconds of each round. */
  rate: number;
  seconds: number;
  rounds: FixedRateCpuRound[];
  /** Median over rounds: whole process (all threads), and its main thread. */
  cpuMicrosPerRequest: number;
  mainThreadMicrosPerRequest: number;
  /** Over all rounds, µs per request by thread (main, the labelled and named threads, other), largest first. */
  byThread: [string, number][];
  /** The process's CPU with no load (share of a core), measured just before its first round. */
  idleCpuShare: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * `rounds` interleaved rounds of `seconds` at `rate` req/s on each target, after a 1 s warm-up at
 * the rate and an idle reading of 2 s. Throws when a round has errors.
 */
export async function fixedRateCpu(
  worker: LoadWorker,
  targets: CpuTarget[],
  opts: { rate: number; seconds: number; rounds: number; connections?: number; log?: (l: string) => void },
): Promise<FixedRateCpu[]> {
  const rate = Math.max(1, Math.round(opts.rate));
  const connections = opts.connections ?? 64;
  const log = opts.log ?? (() => {});
  const job = (t: CpuTarget, seconds: number) => ({ kind: 'fixed-rate' as const, url: t.url, headers: t.headers, body: t.body, rate, seconds, connections });
  const idle = new Map<string, number>();
  for (const t of targets) {
    // What the process burns with no request at all (timers, a chain follower, GC), per second.
    const idle0 = processCpuSeconds(t.pid);
    const t0 = Date.now();
    await new Promise((r) => setTimeout(r, 2_000));
    idle.set(t.name, (processCpuSeconds(t.pid) - idle0) / ((Date.now() - t0) / 1000));
    await worker.run<FixedRateSummary>(job(t, 1)); // warm-up at the rate, not counted
  }
  const rounds = new Map<string, FixedRateCpuRound[]>(targets.map((t) => [t.name, []]));
  const threads = new Map<string, Map<string, number>>(targets.map((t) => [t.name, new Map()]));
  const answered = new Map<string, number>(targets.map((t) => [t.name, 0]));
  for (let i = 0; i < opts.rounds; i++) {
    for (const t of targets) {
      const cpu0 = processCpuSeconds(t.pid);
      const th0 = threadCpu(t.pid, t.threadNames);
      const r = await worker.run<FixedRateSummary>(job(t, opts.seconds));
      const used = processCpuSeconds(t.pid) - cpu0;
      const th1 = threadCpu(t.pid, t.threadNames);
      if (r.errors > 0) throw new Error(`${t.name}: ${r.errors} errors in fixed-rate CPU round ${i + 1}`);
      const acc = threads.get(t.name)!;
      for (const [name, c] of th1) acc.set(name, (acc.get(name) ?? 0) + c - (th0.get(name) ?? 0));
      answered.set(t.name, answered.get(t.name)! + r.count);
      const main = (th1.get('main') ?? NaN) - (th0.get('main') ?? NaN);
      const row = { requests: r.count, achievedRate: r.achievedRate, p99Ms: r.p99Ms, cpuMicrosPerRequest: (used * 1e6) / r.count, mainThreadMicrosPerRequest: (main * 1e6) / r.count };
      rounds.get(t.name)!.push(row);
      log(`CPU round ${i + 1} @${rate}/s, ${t.name}: ${row.cpuMicrosPerRequest.toFixed(0)} µs per request (main thread ${row.mainThreadMicrosPerRequest.toFixed(0)}), ${r.count} requests, achieved ${r.achievedRate}/s, p99 ${r.p99Ms} ms`);
    }
  }
  return targets.map((t) => {
    const rs = rounds.get(t.name)!;
    const n = answered.get(t.name)!;
    const byThread = [...threads.get(t.name)!].filter(([, c]) => c > 0).map(([name, c]) => [name, (c * 1e6) / n] as [string, number]).sort((a, b) => b[1] - a[1]);
    return {
      target: t.name,
      rate,
      seconds: opts.seconds,
      rounds: rs,
      cpuMicrosPerRequest: median(rs.map((r) => r.cpuMicrosPerRequest)),
      mainThreadMicrosPerRequest: median(rs.map((r) => r.mainThreadMicrosPerRequest)),
      byThread,
      idleCpuShare: idle.get(t.name)!,
    };
  });
}

/**
 * The one fixed rate both targets are measured at: `given` when set, else `fraction` (default 0.6)
 * of the lower of the two targets' median throughputs. Logs how it was chosen.
 */
export function chooseCpuRate(medians: readonly [number, number], opts: { cpuRate?: number; cpuRateFraction?: number }, log: (line: string) => void): { rate: number; fraction: number } {
  const fraction = opts.cpuRateFraction ?? 0.6;
  const lower = Math.min(medians[0], medians[1]);
  const rate = Math.max(1, Math.round(opts.cpuRate ?? fraction * lower));
  log(
    opts.cpuRate !== undefined
      ? `CPU per request: open loop at ${rate} req/s (given), the same for both`
      : `CPU per request: open loop at ${rate} req/s for both = ${Math.round(fraction * 100)}% of the lower median throughput above (${lower.toFixed(0)} req/s)`,
  );
  return { rate, fraction };
}
