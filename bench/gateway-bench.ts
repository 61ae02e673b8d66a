/**
 * Request-path benchmark (not a test; part of `npm run bench`).
 *
 * One zero-delay OpenAI-compatible host (the simulated OpenAI mount, token delay 0) and in front
 * of it, in this process:
 *  - **baseline**: a bare fastify + undici proxy;
 *  - **gateway**: the real gateway (`startGateway`) in upstream mode (NETWORK_UPSTREAM_URL = that
 *    host): auth, validation, access mode, limiter, routing, nonces durably reserved in blocks
 *    (NoncesReserved, synchronous=FULL, group commit), the start, the call, the usage (the end);
 *    start and end are entries of the escrow's InferencesRecorded, committed after the answer.
 *    The escrows live on the gateway's embedded devnet and are billed per request;
 *  - **gateway-hosts** (reported apart, not in the ratios): the gateway over the devshard host
 *    protocol to the embedded devnet's simulated hosts (per request a diff composed, signed and
 *    recorded, a signed header, the receipt checked; the hosts verify and execute in this process).
 *
 * The load generator runs in a child process (bench/load-worker.ts). Per concurrency level the
 * targets run interleaved (autocannon, closed loop); then an open-loop run at a fixed 1,000 req/s
 * with per-request latency measured in µs, and streamed time-to-first-byte at concurrency 1.
 * `--soak` adds 1,000,000 requests on the gateway (RSS of this process sampled every 5 s) and the
 * rebuild of every projection from the log the soak wrote.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import Fastify from 'fastify';
import { Pool } from 'undici';
import { generateKeys, loadConfig } from '../src/config/index.js';
import { startGateway, type RunningGateway } from '../src/main/start.js';
import { createLogger } from '../src/http/logger.js';
import { eventsFile, SqliteEventStore } from '../src/events/sqlite-store.js';
import { ROUTING_STOP_NONCE } from '../src/machines/index.js';
import type { AutocannonSummary, FixedRateSummary, Job, Percentiles } from './load-worker.js';
import { rebuildInChild, type RebuildOnce } from './rebuild-once.js';
import { listen, startHost, type Target } from './host.js';

export interface GatewayTarget extends Target {
  gateway: RunningGateway;
  /** Labels of the gateway's known threads by Linux thread id (its log writer), for per-thread CPU. */
  threadNames(): Record<string, string>;
  storageDir: string;
  /** Creates `n` more escrows for the bench model (each takes ROUTING_STOP_NONCE requests). */
  addEscrows(n: number): Promise<void>;
}

export interface LevelResult {
  target: string;
  connections: number;
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  non2xx: number;
  /** Gateway targets: store commits and events during the run (group commit: events per commit). */
  commits?: number;
  events?: number;
}

export interface FixedRateResult extends FixedRateSummary {
  target: string;
  rate: number;
  /** p99 of every round, in run order (the row's other figures are those of the median round). */
  roundP99Ms: number[];
}

export interface TtfbResult extends Percentiles {
  target: string;
  errors: number;
}

export interface SoakResult {
  target: string;
  requests: number;
  seconds: number;
  requestsPerSec: number;
  errors: number;
  /** RSS (MiB) of the server process sampled every 5 s; growth after warm-up = (last − first after warm-up) / first. */
  rssMiB: number[];
  heapUsedMiB: number[];
  /** (last − first after warm-up) / first over the raw 5 s samples (follows the GC sawtooth). */
  rssGrowthAfterWarmup: number;
  /** RSS and heap after a forced full GC, 60 s into the soak and at its end; growth between them. */
  afterGc?: { warmRssMiB: number; endRssMiB: number; warmHeapMiB: number; endHeapMiB: number; warmHeapTotalMiB: number; endHeapTotalMiB: number; rssGrowth: number };
  /** Rebuild of every projection from the soak's log, in a fresh process: the median of three runs (and each run's rate). */
  rebuild: RebuildOnce & { runsEventsPerSec: number[]; runsRecordsPerSec: number[] };
}

export interface GatewayBenchOptions {
  /** Concurrency levels (default 1, 16, 64). */
  levels?: number[];
  /** Seconds per target and level (default 5), after a 1 s warm-up. */
  seconds?: number;
  /** Fixed-rate run, first: rate (default 1,000 req/s), seconds per target (default 28) in rounds (default 7). */
  fixedRate?: number;
  fixedRateSeconds?: number;
  fixedRateRounds?: number;
  /** Streamed requests per target for time-to-first-byte (default 500). */
  ttfbRequests?: number;
  /** Also run the gateway over the devshard protocol to the embedded devnet's hosts (default true). */
  hostMode?: boolean;
  /** Run the 1,000,000-request soak (default false). */
  soak?: boolean;
  soakRequests?: number;
  log?: (line: string) => void;
}

export interface GatewayBenchResult {
  levels: LevelResult[];
  /** Per level: gateway/baseline throughput ratio and added p50/p99 (ms), same run. */
  comparison: { connections: number; throughputRatio: number; addedP50Ms: number; addedP99Ms: number }[];
  fixedRate: FixedRateResult[];
  /**
   * Added p99 at the fixed rate: the median over rounds of (gateway p99 − baseline p99), each pair
   * measured back to back, so a disturbance hits one pair rather than one target's whole figure.
   */
  fixedRateAddedP99Ms?: number;
  ttfb: TtfbResult[];
  soak?: SoakResult;
  /** Throughput at 64 connections with the host in its own process (benchHostApart). */
  hostApart?: HostApartResult;
}

export const BENCH_MODEL = 'bench-model';
const CHAT = { model: BENCH_MODEL, messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 };
const CHAT_BODY = JSON.stringify(CHAT);
const STREAM_BODY = JSON.stringify({ ...CHAT, stream: true });

/** The baseline: a bare fastify app proxying chat completions to the host with an undici pool (streams passed through). */
export async function startBaseline(hostUrl: string): Promise<Target> {
  const pool = new Pool(hostUrl, { connections: 128, pipelining: 1 });
  const app = Fastify({ logger: false });
  app.post('/v1/chat/completions', async (request, reply) => {
    const res = await pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(request.body),
    });
    reply.code(res.statusCode).header('content-type', res.headers['content-type'] ?? 'application/json');
    if ((request.body as { stream?: unknown }).stream === true) return reply.send(res.body);
    return reply.send(Buffer.from(await res.body.arrayBuffer()));
  });
  const url = await listen(app);
  return {
    name: 'baseline',
    url,
    close: async () => {
      await app.close();
      await pool.close();
    },
  };
}

/**
 * The real gateway on a temp storage dir with its embedded devnet (token delay 0): in `upstream`
 * mode it forwards to `hostUrl` (NETWORK_UPSTREAM_URL), in `protocol` mode it speaks the devshard
 * host protocol to the simulated hosts of its embedded devnet, or of the devnet `chain` names. The bench model is switched to `api_key` access and called with a
 * client key; `escrows` escrows are created through the admin API (the devnet creator is funded
 * with 10^18 so no run depletes them).
 */
export async function startGatewayTarget(
  hostUrl: string,
  opts: {
    mode?: 'upstream' | 'protocol';
    escrows?: number;
    name?: string;
    chain?: { url: string; rpcUrl: string; chainId: string };
    privateKey?: string;
    /** All three keys (instances sharing one log share them); else generated (with `privateKey` if given). */
    keys?: { privateKey: string; apiKey: string; adminApiKey: string };
    /** More settings (e.g. DEVSHARD_STORAGE_MODE=postgres, DATABASE_URL, DEVSHARD_INSTANCE_NAME). */
    env?: Record<string, string>;
  } = {},
): Promise<GatewayTarget> {
  const mode = opts.mode ?? 'upstream';
  const keys = opts.keys ?? { ...generateKeys(), ...(opts.privateKey ? { privateKey: opts.privateKey } : {}) };
  const chainId = opts.chain?.chainId ?? 'shardgate-devnet';
  const storageDir = mkdtempSync(join(tmpdir(), 'shardgate-bench-'));
  const env: Record<string, string> = {
    DEVSHARD_PRIVATE_KEY: keys.privateKey,
    DEVSHARD_API_KEYS: keys.apiKey,
    DEVSHARD_ADMIN_API_KEY: keys.adminApiKey,
    DEVSHARDS_JSON: '[]',
    DEVSHARD_PORT: '0',
    DEVSHARD_STORAGE_DIR: storageDir,
    DEVSHARD_MODEL: BENCH_MODEL,
    DEVNET_BLOCK_TIME_MS: '100',
    DEVNET_TOKEN_DELAY_MS: '0',
    DEVNET_CREATOR_FUNDS: '1000000000000000000',
    LOG_LEVEL: 'warn',
    GATEWAY_SHUTDOWN_TIMEOUT_MS: '5000',
    // The answer-durability setting can be measured both ways: GATEWAY_RECORD_BEFORE_LAST_BYTE=false npm run bench.
    ...(process.env.GATEWAY_RECORD_BEFORE_LAST_BYTE ? { GATEWAY_RECORD_BEFORE_LAST_BYTE: process.env.GATEWAY_RECORD_BEFORE_LAST_BYTE } : {}),
    ...(mode === 'upstream' ? { NETWORK_UPSTREAM_URL: `${hostUrl}/v1` } : {}),
    ...(opts.chain ? { NODE_RPC: opts.chain.rpcUrl, NODE_CHAIN_API: opts.chain.url, NODE_BASE: opts.chain.url, CHAIN_ID: chainId } : {}),
    ...opts.env,
  };
  const gateway = await startGateway(loadConfig({ env, cwd: storageDir }), { logger: createLogger({ level: 'warn' }), quickStartEscrow: false });
  const admin = async (path: string, body: unknown) => {
    const res = await fetch(gateway.url + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${keys.adminApiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  };
  const addEscrows = async (n: number) => {
    for (let i = 0; i < n; i++) {
      await admin('/v1/admin/escrows', { amount: '100000000000000', model_id: BENCH_MODEL, private_key: keys.privateKey, chain_id: chainId, register: true });
    }
  };
  try {
    await admin('/v1/admin/settings', { model_limits: [{ model_id: BENCH_MODEL, access_mode: 'api_key' }] });
    await addEscrows(opts.escrows ?? 1);
  } catch (err) {
    await gateway.stop();
    throw err;
  }
  return {
    name: opts.name ?? (mode === 'upstream' ? 'gateway' : 'gateway-protocol'),
    url: gateway.url,
    headers: { authorization: `Bearer ${keys.apiKey}` },
    storeStats: () => gateway.store.stats(),
    gateway,
    threadNames: () => {
      // The writer thread is the SQLite store's own (the port has no threads to name).
      const id = gateway.store instanceof SqliteEventStore ? gateway.store.writerThreadId : undefined;
      return id === undefined ? {} : { [String(id)]: 'log writer' };
    },
    storageDir,
    addEscrows,
    close: async () => {
      await gateway.stop();
      rmSync(storageDir, { recursive: true, force: true });
    },
  };
}

/** The load generator process (bench/load-worker.ts). */
export class LoadWorker {
  private readonly child: ChildProcess;
  private next = 0;
  private readonly waiting = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();

  constructor() {
    this.child = fork(new URL('./load-worker.js', import.meta.url), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.child.on('message', (msg: { id: number; result?: unknown; error?: string }) => {
      const w = this.waiting.get(msg.id);
      this.waiting.delete(msg.id);
      if (msg.error !== undefined) w?.reject(new Error(msg.error));
      else w?.resolve(msg.result);
    });
    this.child.on('exit', (code) => {
      for (const w of this.waiting.values()) w.reject(new Error(`load worker exited (${code})`));
      this.waiting.clear();
    });
  }

  run<T>(job: Job): Promise<T> {
    const id = this.next++;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.child.send({ id, job });
    });
  }

  close(): void {
    this.child.kill();
  }
}

export const request = (target: Target, body = CHAT_BODY) => ({
  url: `${target.url}/v1/chat/completions`,
  headers: { 'content-type': 'application/json', ...target.headers },
  body,
});

async function drive(worker: LoadWorker, target: Target, connections: number, seconds: number): Promise<LevelResult> {
  await worker.run({ kind: 'autocannon', ...request(target), connections, duration: 1 }); // warm-up
  const before = target.storeStats?.();
  const r = await worker.run<AutocannonSummary>({ kind: 'autocannon', ...request(target), connections, duration: seconds });
  const after = target.storeStats?.();
  return {
    target: target.name,
    connections,
    requestsPerSec: r.requestsPerSec,
    p50Ms: r.p50Ms,
    p99Ms: r.p99Ms,
    errors: r.errors,
    non2xx: r.non2xx,
    ...(before && after ? { commits: after.commits - before.commits, events: after.events - before.events } : {}),
  };
}

const mib = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;

/** A full GC on demand for the soak's memory samples (V8 flag set at run time; no CLI flag needed). */
const gc: (() => void) | undefined = (() => {
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as () => void;
  } catch {
    return undefined;
  }
})();

async function soak(worker: LoadWorker, target: GatewayTarget, requests: number, log: (line: string) => void): Promise<SoakResult> {
  await target.addEscrows(Math.ceil(requests / (ROUTING_STOP_NONCE - 100)) + 1);
  // Warm-up (JIT, pools, caches) before the first sample that counts.
  await worker.run({ kind: 'autocannon', ...request(target), connections: 64, duration: 5 });
  const rssMiB: number[] = [];
  const heapUsedMiB: number[] = [];
  const sample = () => {
    const m = process.memoryUsage();
    rssMiB.push(mib(m.rss));
    heapUsedMiB.push(mib(m.heapUsed));
  };
  const gcSample = () => {
    gc?.();
    const m = process.memoryUsage();
    return { rss: mib(m.rss), heap: mib(m.heapUsed), heapTotal: mib(m.heapTotal) };
  };
  sample();
  const timer = setInterval(sample, 5_000);
  let warmGc: { rss: number; heap: number; heapTotal: number } | undefined;
  const warmTimer = setTimeout(() => (warmGc = gcSample()), 60_000);
  let r: AutocannonSummary;
  try {
    r = await worker.run<AutocannonSummary>({ kind: 'autocannon', ...request(target), connections: 64, amount: requests });
  } finally {
    clearInterval(timer);
    clearTimeout(warmTimer);
  }
  sample();
  const endGc = gcSample();
  const afterGc = warmGc && gc
    ? {
        warmRssMiB: warmGc.rss,
        endRssMiB: endGc.rss,
        warmHeapMiB: warmGc.heap,
        endHeapMiB: endGc.heap,
        warmHeapTotalMiB: warmGc.heapTotal,
        endHeapTotalMiB: endGc.heapTotal,
        rssGrowth: Math.round(((endGc.rss - warmGc.rss) / warmGc.rss) * 1000) / 1000,
      }
    : undefined;
  if (afterGc) log(`soak after full GC: RSS ${afterGc.warmRssMiB} MiB at 60 s → ${afterGc.endRssMiB} MiB at the end (${(afterGc.rssGrowth * 100).toFixed(1)}%), heap used ${afterGc.warmHeapMiB} → ${afterGc.endHeapMiB} MiB (V8 heap committed ${afterGc.warmHeapTotalMiB} → ${afterGc.endHeapTotalMiB} MiB)`);
  // Skip the first 30 s after warm-up (allocator and heap settle), then compare last to first.
  const warm = rssMiB.slice(Math.min(6, rssMiB.length - 1));
  const growth = warm.length > 1 ? (warm[warm.length - 1]! - warm[0]!) / warm[0]! : 0;
  log(`soak ${target.name}: ${requests.toLocaleString('en')} requests in ${r.seconds.toFixed(0)} s (${r.requestsPerSec} req/s, ${r.errors + r.non2xx} errors), RSS ${rssMiB[0]} → ${rssMiB[rssMiB.length - 1]} MiB, growth after warm-up ${(growth * 100).toFixed(1)}%`);

  // Rebuild every projection from the soak's log: the gateway is stopped first, the file flushed (so
  // the OS writing back the soak's 1+ GiB does not share the disk and cores with the read), and the
  // rebuild runs in a fresh process, as a gateway starting on this log would (bench/rebuild-once.ts).
  // Three runs; the median is the figure, all three are printed.
  await target.gateway.stop();
  const file = eventsFile(target.storageDir);
  const fd = openSync(file, 'r');
  fsyncSync(fd);
  closeSync(fd);
  const runs: RebuildOnce[] = [];
  for (let i = 0; i < 3; i++) runs.push(await rebuildInChild(file));
  const rebuild = { ...[...runs].sort((a, b) => a.eventsPerSec - b.eventsPerSec)[1]!, runsEventsPerSec: runs.map((x) => x.eventsPerSec), runsRecordsPerSec: runs.map((x) => x.recordsPerSec) };
  log(`soak log: ${rebuild.events.toLocaleString('en')} events (${rebuild.fileMiB} MiB); readAll ${rebuild.readSeconds.toFixed(2)} s (${rebuild.readEventsPerSec.toLocaleString('en')}/s), rebuild of every projection (rebuildFrom, own process) median of 3: ${rebuild.rebuildSeconds.toFixed(2)} s (${rebuild.eventsPerSec.toLocaleString('en')} events/s, ${rebuild.recordsPerSec.toLocaleString('en')} request records/s; runs ${rebuild.runsEventsPerSec.map((x) => x.toLocaleString('en')).join(', ')} events/s)`);
  return {
    target: target.name,
    requests,
    seconds: r.seconds,
    requestsPerSec: r.requestsPerSec,
    errors: r.errors + r.non2xx,
    rssMiB,
    heapUsedMiB,
    rssGrowthAfterWarmup: Math.round(growth * 1000) / 1000,
    ...(afterGc ? { afterGc } : {}),
    rebuild,
  };
}

/**
 * The soak on its own: a host and a gateway started for it (npm run bench runs it in a fresh
 * process, bench/request-path-child.ts), so the RSS it measures is the gateway's serving, not the
 * heap sizing that the earlier phases (closed-loop levels, the hosts-mode gateway) left behind.
 */
export async function benchSoak(opts: { requests?: number; log?: (line: string) => void } = {}): Promise<SoakResult> {
  const host = await startHost();
  const worker = new LoadWorker();
  try {
    const gateway = await startGatewayTarget(host.url, { mode: 'upstream', escrows: 1 });
    try {
      return await soak(worker, gateway, opts.requests ?? 1_000_000, opts.log ?? (() => {}));
    } finally {
      await gateway.close();
    }
  } finally {
    worker.close();
    await host.close();
  }
}

/** The two compared targets in front of `hostUrl`, added to `targets` (closed by the caller, last first). */
async function startCompared(hostUrl: string, escrows: number, targets: Target[]): Promise<{ baseline: Target; gateway: GatewayTarget }> {
  const baseline = await startBaseline(hostUrl);
  targets.push(baseline);
  const gateway = await startGatewayTarget(hostUrl, { mode: 'upstream', escrows });
  targets.push(gateway);
  return { baseline, gateway };
}

/** Throughput at one concurrency with the host in a process of its own: interleaved pairs of rounds. */
export interface HostApartResult {
  connections: number;
  seconds: number;
  pairs: { baseline: number; gateway: number; ratio: number; gatewayNon2xx: number }[];
  /** The median of the pairs' gateway/baseline ratios. */
  medianRatio: number;
}

/**
 * The throughput comparison with the zero-delay host in a process of its own (bench/host-process.ts),
 * as a gateway is deployed: its event loop then does the gateway's work and no host's. With the host
 * in the targets' process (benchGateway) the host's requests, allocations and collections share the
 * targets' event loop and heap, which no deployed gateway does. Baseline and gateway alternate in
 * `pairs` back-to-back pairs of rounds (this 2-core VM moves single rounds by ±20%); the figure is
 * the median pair's ratio. Runs in a fresh process (request-path-child.ts).
 */
export async function benchHostApart(opts: { pairs?: number; seconds?: number; connections?: number; log?: (line: string) => void } = {}): Promise<HostApartResult> {
  const pairs = opts.pairs ?? 5;
  const seconds = opts.seconds ?? 5;
  const connections = opts.connections ?? 64;
  const log = opts.log ?? (() => {});
  const { startHostProcess } = await import('./host-process.js');
  const host = await startHostProcess();
  const worker = new LoadWorker();
  const targets: Target[] = [];
  try {
    const { baseline, gateway } = await startCompared(host.url, Math.ceil(((pairs * seconds + 2) * 7_000) / ROUTING_STOP_NONCE) + 1, targets);
    for (const t of targets) await worker.run({ kind: 'autocannon', ...request(t), connections, duration: 1 }); // warm-up
    const out: HostApartResult['pairs'] = [];
    for (let i = 0; i < pairs; i++) {
      const b = await worker.run<AutocannonSummary>({ kind: 'autocannon', ...request(baseline), connections, duration: seconds });
      const g = await worker.run<AutocannonSummary>({ kind: 'autocannon', ...request(gateway), connections, duration: seconds });
      const ratio = Math.round((g.requestsPerSec / b.requestsPerSec) * 100) / 100;
      out.push({ baseline: b.requestsPerSec, gateway: g.requestsPerSec, ratio, gatewayNon2xx: g.non2xx + g.errors });
      log(`host apart, c=${connections}, pair ${i + 1}: baseline ${b.requestsPerSec.toLocaleString('en')} req/s, gateway ${g.requestsPerSec.toLocaleString('en')} req/s, ${ratio}x${g.non2xx + g.errors ? ` (${g.non2xx + g.errors} gateway errors or non-2xx)` : ''}`);
    }
    const medianRatio = [...out.map((p) => p.ratio)].sort((a, b) => a - b)[Math.floor(out.length / 2)]!;
    log(`host apart, c=${connections}: median of ${pairs} pairs ${medianRatio}x`);
    return { connections, seconds, pairs: out, medianRatio };
  } finally {
    worker.close();
    for (const t of targets.reverse()) await t.close();
    await host.close();
  }
}

/** Servers in this process, load from a child process; the 2 cores are shared, so compare ratios within one run. */
export async function benchGateway(opts: GatewayBenchOptions = {}): Promise<GatewayBenchResult> {
  const levels = opts.levels ?? [1, 16, 64];
  const seconds = opts.seconds ?? 5;
  const rate = opts.fixedRate ?? 1_000;
  const rateSeconds = opts.fixedRateSeconds ?? 28;
  const ttfbRequests = opts.ttfbRequests ?? 500;
  const log = opts.log ?? (() => {});
  const host = await startHost();
  const worker = new LoadWorker();
  const targets: Target[] = [];
  try {
    // Escrows for the default run: ~ (levels + warm-ups) x 6,000 req/s at most, plus fixed rate and streaming.
    const planned = levels.length * (seconds + 1) * 6_000 + rate * rateSeconds * 2 + ttfbRequests * 2;
    const { baseline, gateway } = await startCompared(host.url, Math.ceil(planned / ROUTING_STOP_NONCE) + 1, targets);
    const hostMode = opts.hostMode !== false ? await startGatewayTarget(host.url, { mode: 'protocol', escrows: 3, name: 'gateway-hosts' }) : undefined;
    if (hostMode) targets.push(hostMode);

    // Open loop at a fixed rate, latency per request in µs; baseline and gateway interleaved in
    // `rounds` pairs. Per target the median round is reported; the added p99 is the median of the
    // per-pair differences (this shared 2-core VM disturbs single rounds by several ms).
    // It runs before the closed-loop levels: it measures a gateway serving steadily at the rate, not
    // the aftermath of ~35 s of saturating closed-loop load, which leaves old space nearly due for a
    // mark-compact that then lands in a round (rounds of 22–80 ms p99 when run after the levels;
    // docs/lab/benchmarks-notebook.md, session 7).
    const rounds = opts.fixedRateRounds ?? 7;
    const perTarget = new Map<string, FixedRateSummary[]>();
    const added: number[] = [];
    // Warm-up at the rate (connections opened, code optimized), not counted: 2 s, as nothing ran before.
    for (const target of [baseline, gateway]) await worker.run<FixedRateSummary>({ kind: 'fixed-rate', ...request(target), rate, seconds: 2, connections: 64 });
    for (let round = 0; round < rounds; round++) {
      const pair: number[] = [];
      for (const target of [baseline, gateway]) {
        const r = await worker.run<FixedRateSummary>({ kind: 'fixed-rate', ...request(target), rate, seconds: rateSeconds / rounds, connections: 64 });
        perTarget.set(target.name, [...(perTarget.get(target.name) ?? []), r]);
        pair.push(r.p99Ms);
      }
      added.push(pair[1]! - pair[0]!);
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const fixedRate: FixedRateResult[] = [...perTarget].map(([target, rs]) => {
      const mid = median(rs.map((r) => r.p99Ms));
      return { target, rate, ...rs.find((r) => r.p99Ms === mid)!, roundP99Ms: rs.map((r) => r.p99Ms) };
    });
    const fixedRateAddedP99Ms = Math.round(median(added) * 1000) / 1000;
    for (const r of fixedRate) log(`${r.target.padEnd(13)} @${rate}/s: achieved ${r.achievedRate}/s, median round p50 ${r.p50Ms} ms, p90 ${r.p90Ms} ms, p99 ${r.p99Ms} ms, max ${r.maxMs} ms; p99 per round ${r.roundP99Ms.join(', ')}${r.errors ? ` (${r.errors} errors)` : ''}`);
    log(`fixed rate: added p99, median of ${rounds} back-to-back pairs: ${fixedRateAddedP99Ms} ms (pairs: ${added.map((a) => Math.round(a * 1000) / 1000).join(', ')})`);

    const results: LevelResult[] = [];
    for (const connections of levels) {
      for (const target of targets) {
        const r = await drive(worker, target, connections, seconds);
        results.push(r);
        log(
          `${target.name.padEnd(13)} c=${String(connections).padStart(2)}: ${r.requestsPerSec.toLocaleString('en').padStart(7)} req/s, ` +
            `p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms${r.errors || r.non2xx ? ` (${r.errors} errors, ${r.non2xx} non-2xx)` : ''}` +
            (r.commits !== undefined ? `; store: ${r.events} events in ${r.commits} commits (${(r.events! / Math.max(1, r.commits)).toFixed(1)}/commit)` : ''),
        );
      }
    }
    const comparison = levels.flatMap((connections) => {
      const b = results.find((r) => r.target === 'baseline' && r.connections === connections);
      const g = results.find((r) => r.target === 'gateway' && r.connections === connections);
      if (!b || !g) return [];
      return [{ connections, throughputRatio: Math.round((g.requestsPerSec / b.requestsPerSec) * 100) / 100, addedP50Ms: g.p50Ms - b.p50Ms, addedP99Ms: g.p99Ms - b.p99Ms }];
    });
    for (const c of comparison) log(`c=${c.connections}: gateway/baseline ${c.throughputRatio}x, added p50 ${c.addedP50Ms} ms, p99 ${c.addedP99Ms} ms`);

    // Streaming time to first byte, sequential, interleaved in halves.
    const ttfb: TtfbResult[] = [];
    for (const round of [0, 1]) {
      for (const target of [baseline, gateway]) {
        const r = await worker.run<Percentiles & { errors: number }>({ kind: 'ttfb', ...request(target, STREAM_BODY), count: Math.ceil(ttfbRequests / 2) });
        const i = ttfb.findIndex((t) => t.target === target.name);
        if (round === 0 || r.p50Ms < ttfb[i]!.p50Ms) {
          if (i >= 0) ttfb[i] = { target: target.name, ...r };
          else ttfb.push({ target: target.name, ...r });
        }
      }
    }
    for (const r of ttfb) log(`${r.target.padEnd(13)} stream TTFB: p50 ${r.p50Ms} ms, p90 ${r.p90Ms} ms, p99 ${r.p99Ms} ms${r.errors ? ` (${r.errors} errors)` : ''}`);

    let soakResult: SoakResult | undefined;
    if (opts.soak) soakResult = await soak(worker, gateway, opts.soakRequests ?? 1_000_000, log);
    return { levels: results, comparison, fixedRate, fixedRateAddedP99Ms, ttfb, ...(soakResult ? { soak: soakResult } : {}) };
  } finally {
    worker.close();
    for (const t of targets.reverse()) await t.close();
    await host.close();
  }
}

/** `node dist/bench/gateway-bench.js [--soak] [--quick]`: this part alone. */
if (import.meta.url === `file://${process.argv[1]}`) {
  const args = new Set(process.argv.slice(2));
  await benchGateway({
    log: (l) => console.log(l),
    soak: args.has('--soak'),
    ...(args.has('--quick') ? { seconds: 2, levels: [1, 64], fixedRateSeconds: 4, ttfbRequests: 100 } : {}),
  });
}
