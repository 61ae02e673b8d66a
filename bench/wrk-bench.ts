/**
 * Upstream mode measured from outside with wrk (issue 31 (a) and (c)): the gateway and a bare
 * fastify + undici proxy, each in a process of its own, in front of the same zero-delay host in a
 * third, driven by wrk (one thread) in interleaved pairs of rounds; the ratio is the median of the
 * pairs' ratios. Then CPU per request of each target process (/proc, all threads,
 * bench/fixed-rate-cpu.ts) at one open-loop rate for both, by default 60% of the lower of their
 * median wrk throughputs, from the load generator in its own process: interleaved rounds, the
 * median round. That stays steady on a noisy 2-core machine where throughput does not, and does
 * not follow the throughput as a closed loop's does. The gateway process runs with
 * tuneV8ForServing(), as `shardgate serve` does; the bare proxy with Node's defaults.
 *
 *   node dist/bench/wrk-bench.js [--pairs N] [--seconds S] [--warmup S] [--connections C]
 *     [--cpu-rounds N] [--cpu-seconds S] [--cpu-rate-fraction F | --cpu-rate R] [--cpu-prof DIR]
 */
import { chooseCpuRate, fixedRateCpu, type FixedRateCpu } from './fixed-rate-cpu.js';
import { LoadWorker } from './gateway-bench.js';
import { startHostProcess } from './host-process.js';
import { startTargetProcess, type TargetProcess } from './target-process.js';
import { ensureWrk, runWrk, type WrkResult } from './wrk.js';

export interface WrkPair {
  baseline: WrkResult;
  gateway: WrkResult;
  ratio: number;
}

export interface WrkBenchResult {
  connections: number;
  seconds: number;
  warmupSeconds: number;
  pairs: WrkPair[];
  medianRatio: number;
  /** CPU per request of 'baseline' and 'gateway' at `cpuRate` req/s (the same for both), median round. */
  cpu: FixedRateCpu[];
  cpuRate: number;
  /** When the rate was not given: the fraction of the lower median wrk throughput it is. */
  cpuRateFraction?: number;
}

const BODY = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 });
/** Seconds of closed-loop load on each target before the pairs (not counted). */
export const WARMUP_SECONDS = 5;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const round = (t: TargetProcess, connections: number, seconds: number) =>
  runWrk({ url: `${t.url}/v1/chat/completions`, body: BODY, headers: { 'content-type': 'application/json', ...t.headers }, connections, seconds });

export async function benchWrk(
  opts: { pairs?: number; seconds?: number; warmupSeconds?: number; connections?: number; cpuSeconds?: number; cpuRounds?: number; cpuRateFraction?: number; cpuRate?: number; cpuProfDir?: string; log?: (l: string) => void } = {},
): Promise<WrkBenchResult> {
  // --cpu-prof DIR: V8 CPU profiles of both target processes, written to DIR when they exit.
  const profArgv = (name: string) => (opts.cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', opts.cpuProfDir, '--cpu-prof-name', `${name}.cpuprofile`] : []);
  const pairs = opts.pairs ?? 5;
  const seconds = opts.seconds ?? 5;
  const connections = opts.connections ?? 64;
  const log = opts.log ?? (() => {});
  ensureWrk();
  log('gateway process: tuneV8ForServing() (--no-allocation-site-pretenuring, as `shardgate serve`); bare proxy: Node defaults');
  const host = await startHostProcess();
  const targets: TargetProcess[] = [];
  try {
    const baseline = await startTargetProcess('baseline', host.url, { execArgv: profArgv('baseline') });
    targets.push(baseline);
    // 32 escrows (~19,800 requests each) so no round reaches the nonce stop.
    const gateway = await startTargetProcess('gateway', host.url, { escrows: 32, execArgv: profArgv('gateway') });
    targets.push(gateway);
    // Warm-up: with 1 s the first pair's gateway round was the slowest of the run every time
    // (0.58-0.64x against 0.72-0.82x after): the gateway speeds up over its first seconds of load
    // (cause not pinned down; a larger young generation did not change it).
    for (const t of targets) await round(t, connections, opts.warmupSeconds ?? WARMUP_SECONDS);
    const results: WrkPair[] = [];
    for (let i = 0; i < pairs; i++) {
      const b = await round(baseline, connections, seconds);
      const g = await round(gateway, connections, seconds);
      if (b.errors || g.errors) throw new Error(`errors in pair ${i + 1}: baseline ${b.errors}, gateway ${g.errors}`);
      results.push({ baseline: b, gateway: g, ratio: g.requestsPerSec / b.requestsPerSec });
      log(`pair ${i + 1}: baseline ${b.requestsPerSec.toFixed(0)} req/s p99 ${b.p99Ms.toFixed(2)} ms; gateway ${g.requestsPerSec.toFixed(0)} req/s p99 ${g.p99Ms.toFixed(2)} ms; ${(g.requestsPerSec / b.requestsPerSec).toFixed(2)}x`);
    }
    // CPU per request at one fixed rate for both (issue 31 (c)), from the load generator's process.
    const { rate: cpuRate, fraction } = chooseCpuRate([median(results.map((p) => p.baseline.requestsPerSec)), median(results.map((p) => p.gateway.requestsPerSec))], opts, log);
    const worker = new LoadWorker();
    let cpu: FixedRateCpu[];
    try {
      const target = (t: TargetProcess) => ({ name: t.name, pid: t.pid, url: `${t.url}/v1/chat/completions`, headers: { 'content-type': 'application/json', ...t.headers }, body: BODY, threadNames: t.threadNames });
      cpu = await fixedRateCpu(worker, [target(baseline), target(gateway)], { rate: cpuRate, seconds: opts.cpuSeconds ?? 3, rounds: opts.cpuRounds ?? 3, log });
    } finally {
      worker.close();
    }
    for (const c of cpu) {
      log(`${c.target} CPU by thread over the ${c.rounds.length} rounds, µs per request: ${c.byThread.map(([name, us]) => `${name} ${us.toFixed(0)}`).join(', ')}`);
      log(`CPU per request, ${c.target}: ${c.cpuMicrosPerRequest.toFixed(0)} µs, main thread ${c.mainThreadMicrosPerRequest.toFixed(0)} µs (median of ${c.rounds.length} rounds at ${c.rate} req/s: ${c.rounds.map((r) => r.cpuMicrosPerRequest.toFixed(0)).join(', ')}); with no load it uses ${(c.idleCpuShare * 100).toFixed(1)}% of a core`);
    }
    log(`CPU per request, gateway/baseline: ${(cpu[1]!.cpuMicrosPerRequest / cpu[0]!.cpuMicrosPerRequest).toFixed(2)}x`);
    return { connections, seconds, warmupSeconds: opts.warmupSeconds ?? WARMUP_SECONDS, pairs: results, medianRatio: median(results.map((p) => p.ratio)), cpu, cpuRate, ...(opts.cpuRate === undefined ? { cpuRateFraction: fraction } : {}) };
  } finally {
    for (const t of targets.reverse()) await t.close();
    await host.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const arg = (name: string) => {
    const i = process.argv.indexOf(name);
    return i >= 0 ? Number(process.argv[i + 1]) : undefined;
  };
  const r = await benchWrk({
    pairs: arg('--pairs'),
    seconds: arg('--seconds'),
    warmupSeconds: arg('--warmup'),
    connections: arg('--connections'),
    cpuRounds: arg('--cpu-rounds'),
    cpuSeconds: arg('--cpu-seconds'),
    cpuRateFraction: arg('--cpu-rate-fraction'),
    cpuRate: arg('--cpu-rate'),
    cpuProfDir: process.argv.includes('--cpu-prof') ? process.argv[process.argv.indexOf('--cpu-prof') + 1] : undefined,
    log: (l) => console.log(`  ${l}`),
  });
  const cpu = (t: string) => r.cpu.find((c) => c.target === t)!.cpuMicrosPerRequest;
  console.log(`upstream mode, wrk c=${r.connections}: gateway/baseline median ${r.medianRatio.toFixed(2)}x over ${r.pairs.length} pairs; CPU per request at ${r.cpuRate} req/s ${(cpu('gateway') / cpu('baseline')).toFixed(2)}x`);
}
