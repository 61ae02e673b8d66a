/**
 * Several instances on PostgreSQL (issue 42): one gateway on SQLite against one and two gateways on
 * one PostgreSQL log, in one run, in front of the same upstream and on the same chain.
 *
 * Processes: the zero-delay host (bench/host-process.ts, the upstream of every gateway and the
 * direct baseline), one devnet (the chain every gateway creates its escrows on: NODE_RPC,
 * NODE_CHAIN_API, NODE_BASE), a throwaway PostgreSQL cluster (bench/pg-cluster.ts, durable
 * defaults), and each gateway in a process of its own (tuneV8ForServing(), as `shardgate serve`):
 *  - **sqlite**: 1 gateway, its SQLite log (the default);
 *  - **pg-1**: 1 gateway, DEVSHARD_STORAGE_MODE=postgres on a database of its own;
 *  - **pg-2**: 2 gateways (distinct DEVSHARD_INSTANCE_NAME) on one other database, sharing keys;
 *    the escrows are created on the first and the run waits until /v1/status shows them spread
 *    by the instances' leases; the load goes to both in turn (wrk: one process per instance with
 *    half the connections; the open loop: requests sent to them alternately).
 * Each target has its own creator key and the same number of escrows (default 4).
 *
 * First an open loop at a fixed rate (default 1,000 req/s) on the host alone and on each target,
 * interleaved rounds: p99 per round, added p99 = median over rounds of (target − host in the same
 * round); CPU per request = the target's gateway processes' CPU over the round (/proc, all threads)
 * / requests, median round; the PostgreSQL server's CPU over the round above its idle rate, apart.
 * Then throughput with wrk at a fixed number of connections (default 16), interleaved rounds,
 * median round. Commits per request: the stores' `stats().commits` (summed over instances) over
 * each phase / the requests answered. A 503 `no_escrow_on_this_instance` counts as an error.
 *
 *   node dist/bench/scale-out-bench.js [--quick]     (or BENCH_ONLY=scale-out npm run bench)
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { generateKeys } from '../src/config/index.js';
import { LoadWorker } from './gateway-bench.js';
import { startHostProcess } from './host-process.js';
import type { FixedRateSummary } from './load-worker.js';
import { pgBinDir, startPgCluster, type PgCluster } from './pg-cluster.js';
import { processCpuSeconds } from './target-process.js';
import { ensureWrk, runWrk, type WrkResult } from './wrk.js';

const MODEL = 'bench-model';
const BODY = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 });
const HEADERS = { 'content-type': 'application/json' };
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const r3 = (n: number) => Math.round(n * 1000) / 1000;

export interface ScaleOutOptions {
  /** Escrows per target (default 4: 2 per instance of pg-2). */
  escrows?: number;
  /** wrk: connections (default 16), rounds (default 3) of `seconds` (default 3) after `warmupSeconds` (default 2). */
  connections?: number;
  rounds?: number;
  seconds?: number;
  warmupSeconds?: number;
  /** Open loop: rate (default 1,000 req/s), rounds (default 3) of `rateSeconds` (default 2.5). */
  rate?: number;
  rateRounds?: number;
  rateSeconds?: number;
  log?: (line: string) => void;
}

export interface ScaleOutRow {
  target: string;
  storage: 'sqlite' | 'postgres';
  instances: number;
  /** Escrows each instance held when the load began, by instance name. */
  escrowsByInstance: Record<string, number>;
  /** wrk at `connections`: req/s of each round and the median. */
  requestsPerSec: number;
  roundsPerSec: number[];
  /** Open loop at `rate`: p99 of the median round, each round's, and the median of (this − the host alone) per round. */
  p99Ms: number;
  roundP99Ms: number[];
  addedP99Ms: number;
  /** Requests per second the open loop achieved in the median round (below the rate: the target fell behind). */
  achievedRate: number;
  /** Store commits (all instances) per request answered: under wrk, and at the fixed rate. */
  commitsPerRequestClosed: number;
  commitsPerRequestRate: number;
  /** CPU of the target's gateway processes per request at the fixed rate (µs), median round, and each round's. */
  cpuMicrosPerRequest: number;
  roundCpuMicros: number[];
  /** PostgreSQL server CPU above its idle rate per request at the fixed rate (µs), median round. */
  pgCpuMicrosPerRequest?: number;
  /** Errors and non-2xx answers over every measured round (wrk and the open loop). */
  errors: number;
}

export type ScaleOutResult =
  | { skipped: string }
  | {
      rows: ScaleOutRow[];
      escrows: number;
      connections: number;
      rounds: number;
      seconds: number;
      warmupSeconds: number;
      rate: number;
      rateRounds: number;
      rateSeconds: number;
      /** The host alone at the fixed rate: median round p99, each round's. */
      directP99Ms: number;
      directRoundP99Ms: number[];
      /** Seconds from the start until every target was ready (pg-2's escrows spread). */
      setupSeconds: number;
      spreadSeconds: number;
      pgIdleCpuShare: number;
    };

interface Proc {
  pid: number;
  ready: Record<string, unknown>;
  request<T>(msg: Record<string, unknown>): Promise<T>;
  close(): Promise<void>;
}

async function child(kind: 'devnet' | 'gateway', args: Record<string, unknown>): Promise<Proc> {
  const c: ChildProcess = fork(new URL(import.meta.url), ['--scale-out-child', kind, JSON.stringify(args)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  // The gateways' log lines pass through, but for the expected warning that the bench's unsettled
  // escrows near their prune epoch (the devnet's epochs are short).
  let partial = '';
  c.stdout!.on('data', (d: Buffer) => {
    const lines = (partial + d.toString()).split('\n');
    partial = lines.pop()!;
    for (const line of lines) if (!line.includes('"msg":"escrow_prune_approaching"')) process.stdout.write(line + '\n');
  });
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    c.once('message', (m: Record<string, unknown>) => resolve(m));
    c.once('exit', (code) => reject(new Error(`${kind} process exited (${code}) before it was ready`)));
  });
  if (typeof ready.error === 'string') throw new Error(`${kind}: ${ready.error}`);
  let next = 0;
  const waiting = new Map<number, (v: unknown) => void>();
  c.on('message', (m: { id?: number; result?: unknown }) => {
    if (m.id === undefined) return;
    waiting.get(m.id)?.(m.result);
    waiting.delete(m.id);
  });
  return {
    pid: c.pid!,
    ready,
    request: <T>(msg: Record<string, unknown>) =>
      new Promise<T>((resolve) => {
        const id = ++next;
        waiting.set(id, resolve as (v: unknown) => void);
        c.send({ ...msg, id });
      }),
    close: () =>
      new Promise<void>((resolve) => {
        if (c.exitCode !== null) return resolve();
        c.once('exit', () => resolve());
        c.send('close');
      }),
  };
}

interface ScaleTarget {
  name: string;
  storage: 'sqlite' | 'postgres';
  procs: Proc[];
  urls: string[];
  headers: Record<string, string>;
  escrowsByInstance: Record<string, number>;
}

const commitsOf = async (t: ScaleTarget) => (await Promise.all(t.procs.map((p) => p.request<{ commits: number }>({ stats: true })))).reduce((a, s) => a + s.commits, 0);
const cpuOf = (t: ScaleTarget) => t.procs.reduce((a, p) => a + processCpuSeconds(p.pid), 0);

interface StatusDoc {
  instances?: { name: string; live: boolean; escrows: number }[];
  devshards?: { id: string; owner?: string | null }[];
}

async function status(url: string): Promise<StatusDoc> {
  const res = await fetch(`${url}/v1/status`);
  return (await res.json()) as StatusDoc;
}

/** Waits until every instance holds its fair share of the escrows (each ≥ 1 at least, after `ms`). */
async function waitSpread(url: string, names: string[], escrows: number, ms: number, log: (l: string) => void): Promise<Record<string, number>> {
  const fair = Math.floor(escrows / names.length);
  const deadline = Date.now() + ms;
  for (;;) {
    const s = await status(url);
    const held = Object.fromEntries(names.map((n) => [n, s.instances?.find((i) => i.name === n && i.live)?.escrows ?? 0]));
    const owners = (s.devshards ?? []).map((d) => d.owner ?? 'none');
    if (names.every((n) => held[n]! >= fair)) {
      log(`pg-2: escrows spread ${JSON.stringify(held)} (owners: ${owners.join(', ')})`);
      return held;
    }
    if (Date.now() > deadline) {
      if (names.every((n) => held[n]! >= 1)) {
        log(`pg-2: escrows not evenly spread after ${ms} ms, going on: ${JSON.stringify(held)}`);
        return held;
      }
      throw new Error(`pg-2: escrows not spread over ${names.join(', ')} within ${ms} ms: ${JSON.stringify(s.instances)}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** wrk on every instance of the target at once, the connections split between them; summed. */
async function wrkRound(t: ScaleTarget, connections: number, seconds: number): Promise<WrkResult> {
  const per = Math.max(1, Math.round(connections / t.urls.length));
  const rs = await Promise.all(t.urls.map((url) => runWrk({ url: `${url}/v1/chat/completions`, body: BODY, headers: { ...HEADERS, ...t.headers }, connections: per, seconds, timeoutSeconds: 10 })));
  return {
    requests: rs.reduce((a, r) => a + r.requests, 0),
    requestsPerSec: rs.reduce((a, r) => a + r.requestsPerSec, 0),
    p50Ms: Math.max(...rs.map((r) => r.p50Ms)),
    p99Ms: Math.max(...rs.map((r) => r.p99Ms)),
    errors: rs.reduce((a, r) => a + r.errors, 0),
    non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
  };
}

export async function benchScaleOut(opts: ScaleOutOptions = {}): Promise<ScaleOutResult> {
  const log = opts.log ?? (() => {});
  const bin = pgBinDir();
  if (!bin) {
    log('skipped: PostgreSQL not installed (no initdb and pg_ctl on PATH or under /usr/lib/postgresql/*/bin; apt-get install -y postgresql)');
    return { skipped: 'PostgreSQL not installed' };
  }
  const escrows = opts.escrows ?? 4;
  const connections = opts.connections ?? 16;
  const rounds = opts.rounds ?? 3;
  const seconds = opts.seconds ?? 3;
  const warmupSeconds = opts.warmupSeconds ?? 2;
  const rate = opts.rate ?? 1_000;
  const rateRounds = opts.rateRounds ?? 3;
  const rateSeconds = opts.rateSeconds ?? 2.5;
  ensureWrk();
  const t0 = Date.now();
  const closers: (() => Promise<void>)[] = [];
  try {
    const cluster: PgCluster = await startPgCluster(bin, { durable: true, prefix: 'bench' });
    closers.push(() => cluster.stop());
    const host = await startHostProcess();
    closers.push(() => host.close());
    const creators = { sqlite: randomBytes(32).toString('hex'), pg1: randomBytes(32).toString('hex'), pg2: randomBytes(32).toString('hex') };
    const devnet = await child('devnet', { creators: Object.values(creators) });
    closers.push(() => devnet.close());
    const chain = devnet.ready as { url: string; rpcUrl: string; chainId: string };
    log(`PostgreSQL ${bin}, devnet ${chain.url}, host ${host.url}; ${escrows} escrows per target`);
    const [db1, db2] = [await cluster.createDatabase(), await cluster.createDatabase()];
    const keysFor = (privateKey: string) => ({ ...generateKeys(), privateKey });
    const gateways: Proc[] = [];
    closers.push(async () => void (await Promise.all(gateways.map((g) => g.close())))); // stopped together
    const gateway = async (args: Record<string, unknown>) => {
      const p = await child('gateway', { hostUrl: host.url, chain, ...args });
      gateways.push(p);
      return p;
    };
    const pg = (db: string, instance: string) => ({ DEVSHARD_STORAGE_MODE: 'postgres', DATABASE_URL: cluster.url(db), DEVSHARD_INSTANCE_NAME: instance });
    const k1 = keysFor(creators.sqlite);
    const k2 = keysFor(creators.pg1);
    const k3 = keysFor(creators.pg2);
    // The first instance of each target creates its escrows (in parallel: each target its own creator
    // key); pg-2's second instance starts once the first has set the database up, while the first
    // creates them.
    const [sqlite, pg1, pg2a] = await Promise.all([
      gateway({ keys: k1, escrows, env: {} }),
      gateway({ keys: k2, escrows, env: pg(db1, 'pg1-solo') }),
      gateway({ keys: k3, escrows: 0, env: pg(db2, 'pg2-a') }),
    ]);
    const spread0 = Date.now();
    const [pg2b, added] = await Promise.all([gateway({ keys: k3, escrows: 0, env: pg(db2, 'pg2-b') }), pg2a.request<true | { error: string }>({ addEscrows: escrows })]);
    if (added !== true) throw new Error(`pg-2: creating the escrows failed: ${added.error}`);
    const held = await waitSpread(pg2a.ready.url as string, ['pg2-a', 'pg2-b'], escrows, 45_000, log);
    const spreadSeconds = (Date.now() - spread0) / 1000;
    const setupSeconds = (Date.now() - t0) / 1000;
    log(`ready in ${setupSeconds.toFixed(1)} s (the spread over pg-2's instances took ${spreadSeconds.toFixed(1)} s)`);
    const target = (name: string, storage: 'sqlite' | 'postgres', procs: Proc[], keys: { apiKey: string }, byInstance: Record<string, number>): ScaleTarget => ({
      name,
      storage,
      procs,
      urls: procs.map((p) => p.ready.url as string),
      headers: { authorization: `Bearer ${keys.apiKey}` },
      escrowsByInstance: byInstance,
    });
    const targets = [
      target('sqlite', 'sqlite', [sqlite], k1, { sqlite: escrows }),
      target('pg-1', 'postgres', [pg1], k2, { 'pg1-solo': escrows }),
      target('pg-2', 'postgres', [pg2a, pg2b], k3, held),
    ];
    const worker = new LoadWorker();
    closers.push(async () => worker.close());
    const errors = new Map<string, number>(targets.map((t) => [t.name, 0]));

    // 1. Open loop at the fixed rate: the host alone, then each target, interleaved rounds.
    const fixed = (urls: string[], headers: Record<string, string>, secs: number) =>
      worker.run<FixedRateSummary>({ kind: 'fixed-rate', url: `${urls[0]}/v1/chat/completions`, urls: urls.map((u) => `${u}/v1/chat/completions`), headers: { ...HEADERS, ...headers }, body: BODY, rate, seconds: secs, connections: Math.round(64 / urls.length) });
    const idle0 = cluster.serverCpuSeconds();
    const i0 = Date.now();
    await new Promise((r) => setTimeout(r, 2_000));
    const pgIdleCpuShare = (cluster.serverCpuSeconds() - idle0) / ((Date.now() - i0) / 1000);
    log(`PostgreSQL server idle (every PostgreSQL instance up, no load): ${(pgIdleCpuShare * 100).toFixed(1)}% of a core`);
    await fixed([host.url], {}, 1);
    for (const t of targets) await fixed(t.urls, t.headers, 2); // warm-up at the rate, not counted
    const direct: number[] = [];
    const perTarget = new Map<string, { p99: number; added: number; achieved: number; cpuUs: number; pgUs: number; requests: number; commits: number }[]>(targets.map((t) => [t.name, []]));
    for (let i = 0; i < rateRounds; i++) {
      const d = await fixed([host.url], {}, rateSeconds);
      direct.push(d.p99Ms);
      for (const t of targets) {
        const c0 = await commitsOf(t);
        const cpu0 = cpuOf(t);
        const pg0 = cluster.serverCpuSeconds();
        const w0 = Date.now();
        const r = await fixed(t.urls, t.headers, rateSeconds);
        const wall = (Date.now() - w0) / 1000;
        const cpu = cpuOf(t) - cpu0;
        const pgCpu = Math.max(0, cluster.serverCpuSeconds() - pg0 - pgIdleCpuShare * wall);
        const commits = (await commitsOf(t)) - c0;
        errors.set(t.name, errors.get(t.name)! + r.errors);
        const row = { p99: r.p99Ms, added: r.p99Ms - d.p99Ms, achieved: r.achievedRate, cpuUs: (cpu * 1e6) / r.count, pgUs: (pgCpu * 1e6) / r.count, requests: r.count, commits };
        perTarget.get(t.name)!.push(row);
        log(`@${rate}/s round ${i + 1}, ${t.name}: achieved ${r.achievedRate}/s, p99 ${r.p99Ms} ms (host alone ${d.p99Ms} ms), gateway CPU ${row.cpuUs.toFixed(0)} µs/request${t.storage === 'postgres' ? `, PostgreSQL ${row.pgUs.toFixed(0)} µs/request` : ''}, ${(commits / r.count).toFixed(3)} commits/request${r.errors ? `, ${r.errors} errors` : ''}`);
      }
    }

    // 2. Throughput with wrk at a fixed number of connections, interleaved rounds.
    for (const t of targets) await wrkRound(t, connections, warmupSeconds);
    const closed = new Map<string, { rps: number; requests: number; commits: number }[]>(targets.map((t) => [t.name, []]));
    for (let i = 0; i < rounds; i++) {
      for (const t of targets) {
        const c0 = await commitsOf(t);
        const r = await wrkRound(t, connections, seconds);
        const commits = (await commitsOf(t)) - c0;
        errors.set(t.name, errors.get(t.name)! + r.errors);
        closed.get(t.name)!.push({ rps: r.requestsPerSec, requests: r.requests, commits });
        log(`c=${connections} round ${i + 1}, ${t.name}: ${r.requestsPerSec.toFixed(0)} req/s, p99 ${r.p99Ms.toFixed(2)} ms, ${(commits / Math.max(1, r.requests)).toFixed(3)} commits/request${r.errors ? `, ${r.errors} errors (${r.non2xx} non-2xx)` : ''}`);
      }
    }

    // The leases must not have moved escrows between pg-2's instances under load (each stays with its holder).
    const after = await status(pg2a.ready.url as string);
    const heldAfter = Object.fromEntries(['pg2-a', 'pg2-b'].map((n) => [n, after.instances?.find((i) => i.name === n)?.escrows ?? 0]));
    log(`pg-2 after the load: escrows held ${JSON.stringify(heldAfter)}${JSON.stringify(heldAfter) === JSON.stringify(held) ? ' (unchanged)' : ` (before: ${JSON.stringify(held)})`}`);

    const rows: ScaleOutRow[] = targets.map((t) => {
      const f = perTarget.get(t.name)!;
      const c = closed.get(t.name)!;
      const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
      return {
        target: t.name,
        storage: t.storage,
        instances: t.procs.length,
        escrowsByInstance: t.escrowsByInstance,
        requestsPerSec: Math.round(median(c.map((x) => x.rps))),
        roundsPerSec: c.map((x) => Math.round(x.rps)),
        p99Ms: median(f.map((x) => x.p99)),
        roundP99Ms: f.map((x) => x.p99),
        addedP99Ms: r3(median(f.map((x) => x.added))),
        achievedRate: f.find((x) => x.p99 === median(f.map((y) => y.p99)))!.achieved,
        commitsPerRequestClosed: r3(sum(c.map((x) => x.commits)) / Math.max(1, sum(c.map((x) => x.requests)))),
        commitsPerRequestRate: r3(sum(f.map((x) => x.commits)) / Math.max(1, sum(f.map((x) => x.requests)))),
        cpuMicrosPerRequest: Math.round(median(f.map((x) => x.cpuUs))),
        roundCpuMicros: f.map((x) => Math.round(x.cpuUs)),
        ...(t.storage === 'postgres' ? { pgCpuMicrosPerRequest: Math.round(median(f.map((x) => x.pgUs))) } : {}),
        errors: errors.get(t.name)!,
      };
    });
    return { rows, escrows, connections, rounds, seconds, warmupSeconds, rate, rateRounds, rateSeconds, directP99Ms: median(direct), directRoundP99Ms: direct, setupSeconds, spreadSeconds, pgIdleCpuShare };
  } finally {
    for (const close of closers.reverse()) {
      try {
        await close();
      } catch (err) {
        log(`closing: ${String(err)}`);
      }
    }
  }
}

const fmt = (n: number) => n.toLocaleString('en');
export const SCALE_OUT_BEGIN = '<!-- section: scale-out (BENCH_ONLY=scale-out npm run bench regenerates it alone) -->';
export const SCALE_OUT_END = '<!-- end of section: scale-out -->';

/** The docs/benchmarks.md section, between its markers. */
export function scaleOutSection(r: ScaleOutResult | undefined, error: string | undefined, date: Date): string[] {
  const head = ['## Several instances on PostgreSQL (issue 42)', ''];
  if (!r) return [SCALE_OUT_BEGIN, ...head, `Failed on ${date.toISOString()}: the error is under Failures (or just below, when the section ran alone).`, '', SCALE_OUT_END];
  if ('skipped' in r) return [SCALE_OUT_BEGIN, ...head, `skipped: ${r.skipped} (\`initdb\` not found; \`apt-get install -y postgresql\`). ${date.toISOString()}.`, '', SCALE_OUT_END];
  const a = r.rows.find((x) => x.target === 'sqlite')!;
  const ratio = (x: number, b: number) => (b > 0 ? `${(x / b).toFixed(2)}x` : '-');
  const label = (x: ScaleOutRow) => (x.storage === 'sqlite' ? '(a) 1 instance, SQLite' : x.instances === 1 ? '(b) 1 instance, PostgreSQL' : `(c) ${x.instances} instances, one PostgreSQL database`);
  const held = (x: ScaleOutRow) => Object.values(x.escrowsByInstance).join(' + ');
  return [
    SCALE_OUT_BEGIN,
    ...head,
    `Measured on ${date.toISOString()}. \`node dist/bench/scale-out-bench.js\` or \`BENCH_ONLY=scale-out npm run bench\` (this section alone). ` +
      `Every gateway in a process of its own (\`tuneV8ForServing()\`), upstream mode in front of the same zero-delay host (its own process), escrows on one devnet (its own process; NODE_RPC / NODE_CHAIN_API / NODE_BASE), ${r.escrows} escrows per target; ` +
      `PostgreSQL a throwaway local cluster with its durable defaults (fsync and synchronous_commit on, as SQLite's synchronous=FULL), one database for (b), another shared by (c)'s instances (distinct DEVSHARD_INSTANCE_NAME, leases DEVSHARD_LEASE_TTL_MS default; escrows created on one, spread by the leases ${r.spreadSeconds.toFixed(1)} s after the creation began). ` +
      `Load on (c) goes to both instances: wrk one process per instance with half the connections, the open loop to each in turn. ` +
      `Added p99 and CPU: open loop at ${fmt(r.rate)} req/s, the host alone and each target interleaved in ${r.rateRounds} rounds of ${r.rateSeconds} s after 2 s of warm-up at the rate each, 64 connections (32 per instance for (c)) (host alone p99 ${r.directP99Ms} ms, rounds ${r.directRoundP99Ms.join(', ')}); added p99 = median over rounds of (target − host alone); CPU per request = the target's gateway processes (all threads, /proc) over the round / requests, median round; PostgreSQL's server processes apart, above their idle rate (${(r.pgIdleCpuShare * 100).toFixed(1)}% of a core with every instance up). ` +
      `Throughput: wrk, ${r.connections} connections, ${r.rounds} interleaved rounds of ${r.seconds} s after ${r.warmupSeconds} s of warm-up each, median round. Commits per request: the stores' \`stats().commits\` (summed over instances) / requests answered.`,
    '',
    `| target | escrows held | req/s at c=${r.connections} (rounds) | vs (a) | p99 ms at ${fmt(r.rate)} req/s | added p99 ms (vs (a)) | commits per request (c=${r.connections} / ${fmt(r.rate)} req/s) | gateway CPU µs per request (rounds) | vs (a) | + PostgreSQL server µs per request (total vs (a)) | errors |`,
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...r.rows.map(
      (x) =>
        `| ${label(x)} | ${held(x)} | ${fmt(x.requestsPerSec)} (${x.roundsPerSec.map(fmt).join(', ')}) | ${ratio(x.requestsPerSec, a.requestsPerSec)} | ${x.p99Ms}${x.achievedRate < 0.95 * r.rate ? ` (fell behind: ${fmt(x.achievedRate)}/s)` : ''} | ${x.addedP99Ms} (${ratio(x.addedP99Ms, a.addedP99Ms)}) | ${x.commitsPerRequestClosed} / ${x.commitsPerRequestRate} | ${fmt(x.cpuMicrosPerRequest)} (${x.roundCpuMicros.map(fmt).join(', ')}) | ${ratio(x.cpuMicrosPerRequest, a.cpuMicrosPerRequest)} | ${x.pgCpuMicrosPerRequest !== undefined ? `${fmt(x.pgCpuMicrosPerRequest)} (with the gateway's: ${ratio(x.cpuMicrosPerRequest + x.pgCpuMicrosPerRequest, a.cpuMicrosPerRequest)})` : '-'} | ${x.errors} |`,
    ),
    '',
    'What it means: on this one 2-core machine every process (gateways, PostgreSQL, host, devnet, wrk) shares the same two cores, so (b) vs (a) is what moving the log to PostgreSQL costs one instance, and (c) cannot add cores: it shows what sharing one log costs (each instance also reads every commit of the other, LISTEN/NOTIFY follower), not the scale-out a second machine would give.',
    'Commits per request below 1 is group commit (several requests per commit; for (c) the sum over both instances); the gateway CPU column is the gateways\' processes only, PostgreSQL\'s server CPU is beside it, and a request on PostgreSQL costs the sum of the two.',
    '',
    SCALE_OUT_END,
  ];
}

async function runChild(kind: string, args: Record<string, unknown>): Promise<{ ready: Record<string, unknown>; close(): Promise<void>; stats?: () => unknown; addEscrows?: (n: number) => Promise<void> }> {
  if (kind === 'devnet') {
    const { startDevnet } = await import('../src/devnet/chain/index.js');
    const devnet = await startDevnet({ port: 0, blockTimeMs: 100, tokenDelayMs: 0, models: [MODEL], creators: args.creators as string[], creatorFunds: 10n ** 18n, env: {} });
    return { ready: { url: devnet.url, rpcUrl: devnet.rpcUrl, chainId: devnet.chainId }, close: () => devnet.close() };
  }
  const { tuneV8ForServing } = await import('../src/gateway/v8-tuning.js');
  tuneV8ForServing(); // the gateway as `shardgate serve` runs it
  const { startGatewayTarget } = await import('./gateway-bench.js');
  const gw = await startGatewayTarget(args.hostUrl as string, {
    mode: 'upstream',
    chain: args.chain as { url: string; rpcUrl: string; chainId: string },
    keys: args.keys as { privateKey: string; apiKey: string; adminApiKey: string },
    escrows: args.escrows as number,
    env: args.env as Record<string, string>,
  });
  return { ready: { url: gw.url, headers: gw.headers }, close: () => gw.close(), stats: () => gw.gateway.store.stats(), addEscrows: (n: number) => gw.addEscrows(n) };
}

if (process.argv[2] === '--scale-out-child') {
  const kind = process.argv[3]!;
  try {
    const c = await runChild(kind, JSON.parse(process.argv[4]!) as Record<string, unknown>);
    process.on('message', (m: 'close' | { id: number; stats?: boolean; addEscrows?: number }) => {
      if (m === 'close') void c.close().then(() => process.exit(0));
      else if (typeof m === 'object' && m.stats) process.send!({ id: m.id, result: c.stats?.() });
      else if (typeof m === 'object' && m.addEscrows !== undefined) {
        void (c.addEscrows?.(m.addEscrows) ?? Promise.resolve()).then(
          () => process.send!({ id: m.id, result: true }),
          (err: unknown) => process.send!({ id: m.id, result: { error: String(err) } }),
        );
      }
    });
    process.send!(c.ready);
  } catch (err) {
    process.send!({ error: String((err as Error).stack ?? err) });
    process.exit(1);
  }
} else if (import.meta.url === `file://${process.argv[1]}`) {
  const quick = process.argv.includes('--quick');
  const r = await benchScaleOut({ log: (l) => console.log(`  ${l}`), ...(quick ? { rounds: 1, seconds: 2, warmupSeconds: 1, rateRounds: 1, rateSeconds: 2 } : {}) });
  console.log(scaleOutSection(r, undefined, new Date()).join('\n'));
}
