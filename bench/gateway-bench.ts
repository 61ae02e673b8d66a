/**
 * Request-path benchmark (not a test; part of `npm run bench`).
 *
 * Starts a zero-delay OpenAI-compatible host (the devnet's simulated OpenAI mount, token delay 0),
 * a **baseline** (bare fastify + undici proxy to that host) and — once wired — **the gateway** in
 * front of the same host, then drives every target, interleaved, with autocannon at fixed
 * concurrency levels and reports requests/s, p50 and p99 per level, plus the gateway/baseline
 * ratios when the gateway target is present. `--soak` adds a 1,000,000-request run with RSS samples.
 *
 * Targets are `{ name, url, close }`: adding the gateway is one more factory in `targets()`.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import autocannon from 'autocannon';
import { Pool } from 'undici';
import { registerSimulatedOpenAi } from '../src/network/simulated-hosts/index.js';

export interface Target {
  name: string;
  /** Base URL; requests go to `${url}/v1/chat/completions`. */
  url: string;
  headers?: Record<string, string>;
  close(): Promise<void>;
}

export interface LevelResult {
  target: string;
  connections: number;
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  non2xx: number;
}

export interface SoakResult {
  target: string;
  requests: number;
  seconds: number;
  requestsPerSec: number;
  /** RSS (MiB) sampled every 5 s; growth after warm-up = (last − first after warm-up) / first. */
  rssMiB: number[];
  rssGrowthAfterWarmup: number;
}

export interface GatewayBenchOptions {
  /** Concurrency levels (default 1, 16, 64). */
  levels?: number[];
  /** Seconds per target and level (default 5), after a 1 s warm-up. */
  seconds?: number;
  /** Run the 1,000,000-request soak (default false). */
  soak?: boolean;
  soakRequests?: number;
  log?: (line: string) => void;
}

export interface GatewayBenchResult {
  levels: LevelResult[];
  /** Per level: gateway/baseline throughput ratio and added p50/p99 (ms); empty until the gateway target exists. */
  comparison: { connections: number; throughputRatio: number; addedP50Ms: number; addedP99Ms: number }[];
  soak?: SoakResult;
}

export const BENCH_MODEL = 'bench-model';
const CHAT_BODY = JSON.stringify({ model: BENCH_MODEL, messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 });

const listen = async (app: FastifyInstance): Promise<string> => {
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  return address.replace('localhost', '127.0.0.1');
};

/** A zero-delay OpenAI-compatible host: the simulated OpenAI mount with no token delay. */
export async function startHost(): Promise<Target> {
  const app = Fastify({ logger: false });
  registerSimulatedOpenAi(app, { tokenDelayMs: 0 });
  const url = await listen(app);
  return { name: 'host', url, close: () => app.close() };
}

/** The baseline: a bare fastify app proxying chat completions to the host with an undici pool. */
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
 * The gateway in front of the same host.
 * TODO(gateway-bench): start it with `startGateway(config, { network, chain })` from
 * src/gateway/gateway.ts — a temp storage dir, access mode api_key (or the admin key in
 * `headers`), an escrow for BENCH_MODEL routed to `hostUrl` — and return it as a Target. Returning
 * a Target here is all `benchGateway` needs: the comparison rows appear by themselves.
 */
export async function startGatewayTarget(_hostUrl: string): Promise<Target | undefined> {
  return undefined;
}

async function drive(target: Target, connections: number, seconds: number): Promise<LevelResult> {
  const opts = {
    url: `${target.url}/v1/chat/completions`,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...target.headers },
    body: CHAT_BODY,
    connections,
  };
  await autocannon({ ...opts, duration: 1 }); // warm-up
  const r = await autocannon({ ...opts, duration: seconds });
  return {
    target: target.name,
    connections,
    requestsPerSec: Math.round(r.requests.average),
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    errors: r.errors + r.timeouts,
    non2xx: r.non2xx,
  };
}

async function soak(target: Target, requests: number, log: (line: string) => void): Promise<SoakResult> {
  const rssMiB: number[] = [];
  const sample = () => rssMiB.push(Math.round((process.memoryUsage.rss() / 2 ** 20) * 10) / 10);
  sample();
  const timer = setInterval(sample, 5_000);
  const t0 = process.hrtime.bigint();
  try {
    await autocannon({
      url: `${target.url}/v1/chat/completions`,
      method: 'POST',
      headers: { 'content-type': 'application/json', ...target.headers },
      body: CHAT_BODY,
      connections: 64,
      amount: requests,
      timeout: 30,
    });
  } finally {
    clearInterval(timer);
  }
  sample();
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const warm = rssMiB.slice(Math.min(2, rssMiB.length - 1));
  const growth = warm.length > 1 ? (warm[warm.length - 1]! - warm[0]!) / warm[0]! : 0;
  const result = { target: target.name, requests, seconds, requestsPerSec: Math.round(requests / seconds), rssMiB, rssGrowthAfterWarmup: Math.round(growth * 1000) / 1000 };
  log(`soak ${target.name}: ${requests.toLocaleString('en')} requests in ${seconds.toFixed(0)} s (${result.requestsPerSec} req/s), RSS ${rssMiB[0]} → ${rssMiB[rssMiB.length - 1]} MiB, growth after warm-up ${(result.rssGrowthAfterWarmup * 100).toFixed(1)}%`);
  return result;
}

/** Load generator and servers share this process (and the machine's cores): compare ratios, not absolutes. */
export async function benchGateway(opts: GatewayBenchOptions = {}): Promise<GatewayBenchResult> {
  const levels = opts.levels ?? [1, 16, 64];
  const seconds = opts.seconds ?? 5;
  const log = opts.log ?? (() => {});
  const host = await startHost();
  const targets: Target[] = [];
  try {
    targets.push(await startBaseline(host.url));
    const gateway = await startGatewayTarget(host.url);
    if (gateway) targets.push(gateway);
    else log('gateway target not wired yet (TODO in bench/gateway-bench.ts): baseline only');

    const results: LevelResult[] = [];
    for (const connections of levels) {
      for (const target of targets) {
        const r = await drive(target, connections, seconds);
        results.push(r);
        log(
          `${target.name.padEnd(9)} c=${String(connections).padStart(2)}: ${r.requestsPerSec.toLocaleString('en').padStart(7)} req/s, ` +
            `p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms${r.errors || r.non2xx ? ` (${r.errors} errors, ${r.non2xx} non-2xx)` : ''}`,
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

    let soakResult: SoakResult | undefined;
    if (opts.soak) soakResult = await soak(targets[targets.length - 1]!, opts.soakRequests ?? 1_000_000, log);
    return { levels: results, comparison, ...(soakResult ? { soak: soakResult } : {}) };
  } finally {
    for (const t of targets.reverse()) await t.close();
    await host.close();
  }
}
