/**
 * The protocol path measured from outside with wrk (issue 31 (b)): three processes besides wrk's
 *  - a devnet (the simulated chain and its simulated hosts serving the real devshard protocol,
 *    token delay 0);
 *  - the gateway (the devshard host protocol, its only host path), its chain that devnet's REST;
 *  - the minimal protocol client (bench/protocol-client.ts), reading its escrows from the same chain.
 * Each signs with its own funded creator key and has escrows of its own, so their nonces never
 * meet on a host. wrk (one thread) drives them in interleaved pairs of rounds; the ratio is the
 * median pair's. Then CPU per request of the gateway and the client processes (/proc, all threads,
 * bench/fixed-rate-cpu.ts) at one open-loop rate for both, by default 60% of the lower of their
 * median wrk throughputs, from the load generator in its own process: interleaved rounds, the
 * median round. The gateway process runs with tuneV8ForServing(), as `shardgate serve` does.
 *
 *   node dist/bench/protocol-bench.js [--pairs N] [--seconds S] [--connections C] [--escrows E]
 *     [--cpu-rounds N] [--cpu-seconds S] [--cpu-rate-fraction F | --cpu-rate R] [--cpu-prof DIR] [--ablate-diff-log]
 *
 * The chat's prompt is 'Say hello.'; BENCH_PROMPT_KB=K makes it about K KB of text (for the costs
 * that grow with the prompt: its canonical hash, its base64 in the request, the header signature's digest).
 */
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chooseCpuRate, fixedRateCpu, type FixedRateCpu } from './fixed-rate-cpu.js';
import { LoadWorker } from './gateway-bench.js';
import { processCpuSeconds } from './target-process.js';
import { ensureWrk, runWrk, type WrkResult } from './wrk.js';

export interface ProtocolPair {
  client: WrkResult;
  gateway: WrkResult;
  ratio: number;
}

export interface ProtocolBenchResult {
  connections: number;
  seconds: number;
  escrows: number;
  pairs: ProtocolPair[];
  medianRatio: number;
  /**
   * CPU per request of the minimal client and the gateway at one open-loop rate (`cpuRate`, the
   * same for both: `cpuRateFraction` of the lower of their median wrk throughputs above, unless
   * given), interleaved rounds, median round; target names 'minimal client' and 'gateway'.
   */
  cpu: FixedRateCpu[];
  cpuRate: number;
  cpuRateFraction?: number;
  /** Per pair: the devnet (hosts) process's CPU per request and its share of a core, in the client's round and the gateway's. */
  hostCpu: { client: number; gateway: number; clientShare: number; gatewayShare: number }[];
  /** gateway CPU per request / the client's. */
  cpuRatio: number;
}

const MODEL = 'bench-model';
const PROMPT_KB = Number(process.env.BENCH_PROMPT_KB ?? 0);
const PROMPT = PROMPT_KB > 0 ? 'Tell me about the weather in Zürich today. '.repeat(Math.ceil((PROMPT_KB * 1024) / 43)) : 'Say hello.';
const BODY = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: PROMPT }], max_tokens: 16 });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Proc {
  name: string;
  pid: number;
  ready: Record<string, unknown>;
  close(): Promise<void>;
}

async function child(kind: 'devnet' | 'gateway' | 'client', args: unknown, execArgv: string[] = []): Promise<Proc> {
  const c = fork(new URL(import.meta.url), ['--protocol-child', kind, JSON.stringify(args)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv });
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    c.once('message', (m: Record<string, unknown>) => resolve(m));
    c.once('exit', (code) => reject(new Error(`${kind} process exited (${code}) before it was ready`)));
  });
  if (typeof ready.error === 'string') throw new Error(`${kind}: ${ready.error}`);
  return {
    name: kind,
    pid: c.pid!,
    ready,
    close: () =>
      new Promise<void>((resolve) => {
        if (c.exitCode !== null) return resolve();
        c.once('exit', () => resolve());
        c.send('close');
      }),
  };
}

const round = (p: Proc, connections: number, seconds: number) =>
  runWrk({ url: `${p.ready.url as string}/v1/chat/completions`, body: BODY, headers: { 'content-type': 'application/json', ...((p.ready.headers as Record<string, string>) ?? {}) }, connections, seconds, timeoutSeconds: 10 });

export async function benchProtocol(
  opts: {
    pairs?: number;
    seconds?: number;
    connections?: number;
    escrows?: number;
    /** The CPU run: seconds per round (default 3), rounds per target (default 3), the rate as a fraction of the lower median throughput (default 0.6) or given in req/s. */
    cpuSeconds?: number;
    cpuRounds?: number;
    cpuRateFraction?: number;
    cpuRate?: number;
    gatewayExecArgv?: string[];
    clientExecArgv?: string[];
    ablateDiffLog?: boolean;
    log?: (l: string) => void;
  } = {},
): Promise<ProtocolBenchResult> {
  const pairs = opts.pairs ?? 3;
  const seconds = opts.seconds ?? 5;
  const connections = opts.connections ?? 64;
  const escrows = opts.escrows ?? 8;
  const log = opts.log ?? (() => {});
  ensureWrk();
  log('gateway process: tuneV8ForServing() (--no-allocation-site-pretenuring, as `shardgate serve`); minimal client: Node defaults');
  const gwKey = randomBytes(32).toString('hex');
  const clientKey = randomBytes(32).toString('hex');
  const procs: Proc[] = [];
  try {
    const devnet = await child('devnet', { creators: [gwKey, clientKey] });
    procs.push(devnet);
    const chain = devnet.ready as { url: string; rpcUrl: string; chainId: string };
    const gateway = await child('gateway', { chain, privateKey: gwKey, escrows, ablateDiffLog: opts.ablateDiffLog === true }, opts.gatewayExecArgv);
    procs.push(gateway);
    const client = await child('client', { chain, privateKey: clientKey, escrows }, opts.clientExecArgv);
    procs.push(client);
    for (const p of [client, gateway]) await round(p, connections, 1); // warm-up (and the gateway's sessions open)
    const results: ProtocolPair[] = [];
    const hostCpu: ProtocolBenchResult['hostCpu'] = [];
    for (let i = 0; i < pairs; i++) {
      const h0 = processCpuSeconds(devnet.pid);
      const c = await round(client, connections, seconds);
      const h1 = processCpuSeconds(devnet.pid);
      const g = await round(gateway, connections, seconds);
      const h2 = processCpuSeconds(devnet.pid);
      hostCpu.push({ client: ((h1 - h0) * 1e6) / c.requests, gateway: ((h2 - h1) * 1e6) / g.requests, clientShare: (h1 - h0) / seconds, gatewayShare: (h2 - h1) / seconds });
      if (c.errors || g.errors) throw new Error(`errors in pair ${i + 1}: client ${c.errors}, gateway ${g.errors}`);
      results.push({ client: c, gateway: g, ratio: g.requestsPerSec / c.requestsPerSec });
      const h = hostCpu[i]!;
      log(`pair ${i + 1}: minimal client ${c.requestsPerSec.toFixed(0)} req/s p99 ${c.p99Ms.toFixed(2)} ms; gateway ${g.requestsPerSec.toFixed(0)} req/s p99 ${g.p99Ms.toFixed(2)} ms; ${(g.requestsPerSec / c.requestsPerSec).toFixed(2)}x; devnet (hosts) process: ${h.client.toFixed(0)} / ${h.gateway.toFixed(0)} µs CPU per request, ${(h.clientShare * 100).toFixed(0)}% / ${(h.gatewayShare * 100).toFixed(0)}% of a core`);
    }
    // CPU per request at one fixed rate for both (issue 31 (c)): a closed loop would make it follow
    // the throughput (more requests per event-loop turn and per commit when faster).
    const { rate: cpuRate, fraction } = chooseCpuRate([median(results.map((p) => p.client.requestsPerSec)), median(results.map((p) => p.gateway.requestsPerSec))], opts, log);
    const worker = new LoadWorker();
    let cpu: FixedRateCpu[];
    try {
      const target = (p: Proc, name: string) => ({ name, pid: p.pid, url: `${p.ready.url as string}/v1/chat/completions`, headers: { 'content-type': 'application/json', ...((p.ready.headers as Record<string, string>) ?? {}) }, body: BODY, threadNames: (p.ready.threads as Record<string, string> | undefined) ?? {} });
      cpu = await fixedRateCpu(worker, [target(client, 'minimal client'), target(gateway, 'gateway')], { rate: cpuRate, seconds: opts.cpuSeconds ?? 3, rounds: opts.cpuRounds ?? 3, log });
    } finally {
      worker.close();
    }
    for (const c of cpu) {
      log(`${c.target} CPU by thread over the ${c.rounds.length} rounds, µs per request: ${c.byThread.map(([name, us]) => `${name} ${us.toFixed(0)}`).join(', ')}`);
      log(`CPU per request, ${c.target}: ${c.cpuMicrosPerRequest.toFixed(0)} µs, main thread ${c.mainThreadMicrosPerRequest.toFixed(0)} µs (median of ${c.rounds.length} rounds at ${c.rate} req/s: ${c.rounds.map((r) => r.cpuMicrosPerRequest.toFixed(0)).join(', ')}); with no load it uses ${(c.idleCpuShare * 100).toFixed(1)}% of a core`);
    }
    const cpuRatio = cpu[1]!.cpuMicrosPerRequest / cpu[0]!.cpuMicrosPerRequest;
    log(`CPU per request, gateway/minimal client: ${cpuRatio.toFixed(2)}x (goal ≤ 1.25x)`);
    return { connections, seconds, escrows, pairs: results, hostCpu, medianRatio: median(results.map((p) => p.ratio)), cpu, cpuRate, ...(opts.cpuRate === undefined ? { cpuRateFraction: fraction } : {}), cpuRatio };
  } finally {
    for (const p of procs.reverse()) await p.close();
  }
}

async function runChild(kind: string, args: Record<string, unknown>): Promise<{ ready: Record<string, unknown>; close(): Promise<void> }> {
  if (kind === 'devnet') {
    const { startDevnet } = await import('../src/devnet/chain/index.js');
    const devnet = await startDevnet({ port: 0, blockTimeMs: 100, tokenDelayMs: 0, models: [MODEL], creators: args.creators as string[], creatorFunds: 10n ** 18n, env: {} });
    return { ready: { url: devnet.url, rpcUrl: devnet.rpcUrl, chainId: devnet.chainId }, close: () => devnet.close() };
  }
  const chain = args.chain as { url: string; rpcUrl: string; chainId: string };
  if (kind === 'gateway') {
    const { tuneV8ForServing } = await import('../src/gateway/v8-tuning.js');
    tuneV8ForServing(); // the gateway as `shardgate serve` runs it
    const { startGatewayTarget } = await import('./gateway-bench.js');
    if (args.ablateDiffLog) {
      // Measurement only (--ablate-diff-log): the diffs are not recorded (DevshardDiffSent), so a
      // restart could not rebuild the sessions. Not a configuration anyone runs.
      const { Engine } = await import('../src/gateway/write/engine.js');
      (Engine.prototype as unknown as { appendOrdered: () => Promise<unknown[]> }).appendOrdered = () => Promise.resolve([]);
    }
    const gw = await startGatewayTarget('', { mode: 'protocol', chain, privateKey: args.privateKey as string, escrows: args.escrows as number });
    return { ready: { url: gw.url, headers: gw.headers, threads: gw.threadNames() }, close: () => gw.close() };
  }
  const { createCosmosChainClient } = await import('../src/chain/cosmos-client.js');
  const { startMinimalClient } = await import('./protocol-client.js');
  const rest = createCosmosChainClient({ restUrl: chain.url, chainId: chain.chainId });
  const key = args.privateKey as string;
  const escrows = [];
  for (let i = 0; i < (args.escrows as number); i++) escrows.push((await rest.createEscrow(key, 100_000_000_000_000n, MODEL)).escrow);
  const { bind } = await rest.params();
  const client = await startMinimalClient({ escrows, bind, privateKey: Buffer.from(key, 'hex') });
  return { ready: { url: client.url }, close: () => client.close() };
}

if (process.argv[2] === '--protocol-child') {
  const kind = process.argv[3]!;
  try {
    const c = await runChild(kind, JSON.parse(process.argv[4]!) as Record<string, unknown>);
    process.on('message', (m) => {
      if (m !== 'close') return;
      void c.close().then(() => process.exit(0));
    });
    process.send!(c.ready);
  } catch (err) {
    process.send!({ error: String((err as Error).stack ?? err) });
    process.exit(1);
  }
} else if (import.meta.url === `file://${process.argv[1]}`) {
  const arg = (name: string) => {
    const i = process.argv.indexOf(name);
    return i >= 0 ? Number(process.argv[i + 1]) : undefined;
  };
  // --cpu-prof DIR: V8 CPU profiles of the gateway and the minimal client processes, written to DIR at exit.
  const prof = process.argv.indexOf('--cpu-prof');
  const profArgv = prof >= 0 ? ['--cpu-prof', '--cpu-prof-dir', process.argv[prof + 1]!] : [];
  const r = await benchProtocol({
    pairs: arg('--pairs'),
    seconds: arg('--seconds'),
    connections: arg('--connections'),
    escrows: arg('--escrows'),
    cpuRounds: arg('--cpu-rounds'),
    cpuSeconds: arg('--cpu-seconds'),
    cpuRateFraction: arg('--cpu-rate-fraction'),
    cpuRate: arg('--cpu-rate'),
    ablateDiffLog: process.argv.includes('--ablate-diff-log'),
    gatewayExecArgv: profArgv.length ? [...profArgv, '--cpu-prof-name', 'gateway.cpuprofile'] : [],
    clientExecArgv: profArgv.length ? [...profArgv, '--cpu-prof-name', 'client.cpuprofile'] : [],
    log: (l) => console.log(`  ${l}`),
  });
  console.log(`protocol path, wrk c=${r.connections}: gateway/minimal client median ${r.medianRatio.toFixed(2)}x over ${r.pairs.length} pairs; CPU per request at ${r.cpuRate} req/s ${r.cpuRatio.toFixed(2)}x`);
}
