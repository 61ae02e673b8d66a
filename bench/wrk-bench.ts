/**
 * Upstream mode measured from outside with wrk (issue 31 (a) and (c)): the gateway and a bare
 * fastify + undici proxy, each in a process of its own, in front of the same zero-delay host in a
 * third, driven by wrk (one thread) in interleaved pairs of rounds; the ratio is the median of the
 * pairs' ratios. Then CPU per request of each target process (/proc, all threads) over a lighter
 * closed-loop run, which stays steady on a noisy 2-core machine where throughput does not.
 *
 *   node dist/bench/wrk-bench.js [--pairs N] [--seconds S] [--connections C]
 */
import { startHostProcess } from './host-process.js';
import { processCpuSeconds, startTargetProcess, type TargetProcess } from './target-process.js';
import { ensureWrk, runWrk, type WrkResult } from './wrk.js';

export interface WrkPair {
  baseline: WrkResult;
  gateway: WrkResult;
  ratio: number;
}

export interface CpuPerRequest {
  target: string;
  requests: number;
  cpuMicrosPerRequest: number;
}

export interface WrkBenchResult {
  connections: number;
  seconds: number;
  pairs: WrkPair[];
  medianRatio: number;
  cpu: CpuPerRequest[];
}

const BODY = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const round = (t: TargetProcess, connections: number, seconds: number) =>
  runWrk({ url: `${t.url}/v1/chat/completions`, body: BODY, headers: { 'content-type': 'application/json', ...t.headers }, connections, seconds });

async function cpuPerRequest(t: TargetProcess, seconds: number): Promise<CpuPerRequest> {
  const cpu0 = processCpuSeconds(t.pid);
  const r = await round(t, 8, seconds);
  const cpu = processCpuSeconds(t.pid) - cpu0;
  if (r.errors > 0) throw new Error(`${t.name}: ${r.errors} errors during the CPU run`);
  return { target: t.name, requests: r.requests, cpuMicrosPerRequest: (cpu * 1e6) / r.requests };
}

export async function benchWrk(opts: { pairs?: number; seconds?: number; connections?: number; log?: (l: string) => void } = {}): Promise<WrkBenchResult> {
  const pairs = opts.pairs ?? 3;
  const seconds = opts.seconds ?? 5;
  const connections = opts.connections ?? 64;
  const log = opts.log ?? (() => {});
  ensureWrk();
  const host = await startHostProcess();
  const targets: TargetProcess[] = [];
  try {
    const baseline = await startTargetProcess('baseline', host.url);
    targets.push(baseline);
    // 32 escrows (~19,800 requests each) so no round reaches the nonce stop.
    const gateway = await startTargetProcess('gateway', host.url, { escrows: 32 });
    targets.push(gateway);
    for (const t of targets) await round(t, connections, 1); // warm-up
    const results: WrkPair[] = [];
    for (let i = 0; i < pairs; i++) {
      const b = await round(baseline, connections, seconds);
      const g = await round(gateway, connections, seconds);
      if (b.errors || g.errors) throw new Error(`errors in pair ${i + 1}: baseline ${b.errors}, gateway ${g.errors}`);
      results.push({ baseline: b, gateway: g, ratio: g.requestsPerSec / b.requestsPerSec });
      log(`pair ${i + 1}: baseline ${b.requestsPerSec.toFixed(0)} req/s p99 ${b.p99Ms.toFixed(2)} ms; gateway ${g.requestsPerSec.toFixed(0)} req/s p99 ${g.p99Ms.toFixed(2)} ms; ${(g.requestsPerSec / b.requestsPerSec).toFixed(2)}x`);
    }
    const cpu = [await cpuPerRequest(baseline, 3), await cpuPerRequest(gateway, 3)];
    for (const c of cpu) log(`CPU per request, ${c.target}: ${c.cpuMicrosPerRequest.toFixed(0)} µs (${c.requests} requests, c=8)`);
    return { connections, seconds, pairs: results, medianRatio: median(results.map((p) => p.ratio)), cpu };
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
  const r = await benchWrk({ pairs: arg('--pairs'), seconds: arg('--seconds'), connections: arg('--connections'), log: (l) => console.log(`  ${l}`) });
  console.log(`upstream mode, wrk c=${r.connections}: gateway/baseline median ${r.medianRatio.toFixed(2)}x over ${r.pairs.length} pairs`);
}
