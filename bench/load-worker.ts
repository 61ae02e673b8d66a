/**
 * The load generator of the request-path bench, run in its own process (child_process.fork) so it
 * never competes with the servers for their event loop. The parent sends jobs, one at a time:
 *
 *  - `autocannon`: closed-loop load at a fixed concurrency (autocannon; latency in whole ms);
 *  - `fixed-rate`: open-loop load at a fixed request rate with an undici pool, latency per request
 *    measured here with process.hrtime (sub-ms resolution);
 *  - `ttfb`: sequential streamed requests; time from sending to the first body byte (SSE frame).
 */
import autocannon from 'autocannon';
import { Pool } from 'undici';

export interface Request {
  url: string;
  headers: Record<string, string>;
  body: string;
}

export type Job =
  | ({ kind: 'autocannon'; connections: number; duration?: number; amount?: number } & Request)
  | ({ kind: 'fixed-rate'; rate: number; seconds: number; connections: number; /** Several targets (instances of one gateway): requests sent to them in turn, `connections` each. */ urls?: string[] } & Request)
  | ({ kind: 'ttfb'; count: number } & Request);

export interface Percentiles {
  count: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
}

export interface AutocannonSummary {
  requestsPerSec: number;
  total: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  non2xx: number;
  seconds: number;
}

export interface FixedRateSummary extends Percentiles {
  achievedRate: number;
  errors: number;
}

export function percentiles(samples: number[]): Percentiles {
  const s = Float64Array.from(samples).sort();
  const at = (q: number) => (s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))]! : 0);
  const r3 = (n: number) => Math.round(n * 1000) / 1000;
  return { count: s.length, p50Ms: r3(at(0.5)), p90Ms: r3(at(0.9)), p99Ms: r3(at(0.99)), maxMs: r3(s.length ? s[s.length - 1]! : 0) };
}

const ms = (from: bigint) => Number(process.hrtime.bigint() - from) / 1e6;

async function runAutocannon(job: Extract<Job, { kind: 'autocannon' }>): Promise<AutocannonSummary> {
  const t0 = process.hrtime.bigint();
  const r = await autocannon({
    url: job.url,
    method: 'POST',
    headers: job.headers,
    body: job.body,
    connections: job.connections,
    timeout: 30,
    ...(job.amount !== undefined ? { amount: job.amount } : { duration: job.duration ?? 5 }),
  });
  return {
    requestsPerSec: Math.round(job.amount !== undefined ? r.requests.total / (ms(t0) / 1000) : r.requests.average),
    total: r.requests.total,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    errors: r.errors + r.timeouts,
    non2xx: r.non2xx,
    seconds: ms(t0) / 1000,
  };
}

function split(url: string): { origin: string; path: string } {
  const u = new URL(url);
  return { origin: u.origin, path: u.pathname + u.search };
}

async function fixedRate(job: Extract<Job, { kind: 'fixed-rate' }>): Promise<FixedRateSummary> {
  const targets = (job.urls ?? [job.url]).map((url) => {
    const { origin, path } = split(url);
    return { path, pool: new Pool(origin, { connections: job.connections, pipelining: 1 }) };
  });
  const latencies: number[] = [];
  let errors = 0;
  let sent = 0;
  const total = Math.round(job.rate * job.seconds);
  const inflight = new Set<Promise<void>>();
  const one = async () => {
    const { pool, path } = targets[sent % targets.length]!;
    const t = process.hrtime.bigint();
    try {
      const res = await pool.request({ path, method: 'POST', headers: job.headers, body: job.body });
      await res.body.arrayBuffer();
      latencies.push(ms(t));
      if (res.statusCode !== 200) errors++;
    } catch {
      errors++;
    }
  };
  const t0 = process.hrtime.bigint();
  await new Promise<void>((resolve) => {
    const tick = () => {
      const due = Math.min(total, Math.floor((ms(t0) / 1000) * job.rate));
      while (sent < due) {
        sent++;
        const p = one().finally(() => inflight.delete(p));
        inflight.add(p);
      }
      if (sent >= total) resolve();
      else setTimeout(tick, 1);
    };
    tick();
  });
  await Promise.all(inflight);
  const seconds = ms(t0) / 1000;
  for (const t of targets) await t.pool.close();
  return { ...percentiles(latencies), achievedRate: Math.round(total / seconds), errors };
}

async function ttfb(job: Extract<Job, { kind: 'ttfb' }>): Promise<Percentiles & { errors: number }> {
  const { origin, path } = split(job.url);
  const pool = new Pool(origin, { connections: 1, pipelining: 1 });
  const samples: number[] = [];
  let errors = 0;
  for (let i = 0; i < job.count; i++) {
    const t = process.hrtime.bigint();
    const res = await pool.request({ path, method: 'POST', headers: job.headers, body: job.body });
    let first = true;
    for await (const _chunk of res.body) {
      if (first) {
        samples.push(ms(t));
        first = false;
      }
    }
    if (res.statusCode !== 200) errors++;
  }
  await pool.close();
  return { ...percentiles(samples.slice(Math.min(20, Math.floor(samples.length / 10)))), errors };
}

async function run(job: Job): Promise<unknown> {
  switch (job.kind) {
    case 'autocannon':
      return runAutocannon(job);
    case 'fixed-rate':
      return fixedRate(job);
    case 'ttfb':
      return ttfb(job);
  }
}

if (process.send) {
  process.on('message', (msg: { id: number; job: Job }) => {
    run(msg.job).then(
      (result) => process.send!({ id: msg.id, result }),
      (err: unknown) => process.send!({ id: msg.id, error: err instanceof Error ? (err.stack ?? err.message) : String(err) }),
    );
  });
}
