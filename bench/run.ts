/**
 * `npm run bench` (= `node dist/bench/run.js [--soak] [--quick]`): the event store, the projections
 * and the request path, in that order; prints a report and writes docs/benchmarks.md.
 *
 *   --soak   also run the 1,000,000-request soak (RSS over time) on the request path
 *   --quick  smaller sizes (smoke run, figures not comparable)
 *
 * The request path runs in a process of its own (request-path-child.ts): the earlier sections'
 * heap would otherwise slow its garbage collections. The throughput pairs with the host in a
 * process of its own (benchHostApart) run in another, then the soak in a third.
 *
 * Run it on an otherwise idle machine: wall-clock figures follow the load (CPU-second rates are
 * printed beside them where it matters).
 */
import { fork } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, platform, release, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { GatewayBenchOptions, GatewayBenchResult, HostApartResult, SoakResult } from './gateway-bench.js';
import { benchProjections, type ProjectionsBenchResult } from './projections-bench.js';
import { benchStore, type StoreBenchResult } from './store-bench.js';
import { benchCrypto, type CryptoBenchRow } from './crypto-bench.js';
import { benchWrk, type WrkBenchResult } from './wrk-bench.js';
import { benchProtocol, type ProtocolBenchResult } from './protocol-bench.js';
import { benchScaleOut, SCALE_OUT_BEGIN, SCALE_OUT_END, scaleOutSection } from './scale-out-bench.js';

const args = new Set(process.argv.slice(2));
const quick = args.has('--quick');
const soak = args.has('--soak');
const log = (line: string) => console.log(`  ${line}`);
const fmt = (n: number) => n.toLocaleString('en');

function machine(): string {
  const c = cpus();
  const model = c[0]?.model.trim() ?? 'unknown CPU';
  return `${c.length} × ${model}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${platform()} ${release()}, Node ${process.version}, load average ${loadavg().map((l) => l.toFixed(2)).join(' / ')} at start`;
}

async function section<T>(title: string, run: () => Promise<T> | T): Promise<{ result?: T; error?: string; seconds: number }> {
  console.log(`\n== ${title}`);
  const t0 = Date.now();
  try {
    const result = await run();
    const seconds = (Date.now() - t0) / 1000;
    console.log(`  (${seconds.toFixed(1)} s)`);
    return { result, seconds };
  } catch (err) {
    const error = err instanceof Error ? (err.stack ?? err.message) : String(err);
    console.log(`  FAILED: ${error}`);
    process.exitCode = 1;
    return { error, seconds: (Date.now() - t0) / 1000 };
  }
}

/** How the CPU per request was measured: one open-loop rate for both targets (bench/fixed-rate-cpu.ts). */
function cpuRateText(rate: number, fraction: number | undefined, cpu: { rounds: unknown[]; seconds: number }[]): string {
  const rounds = cpu[0]?.rounds.length ?? 0;
  const seconds = cpu[0]?.seconds ?? 0;
  return `open loop at the same fixed rate for both, ${fmt(rate)} req/s${fraction !== undefined ? ` (${Math.round(fraction * 100)}% of the lower median wrk throughput above)` : ''}, from the load generator in its own process; ${rounds} interleaved ${seconds} s rounds each, the median round`;
}

/** The protocol path (issue 31 (b)): the gateway vs the minimal protocol client, in front of the same hosts. */
function protocolSection(p: ProtocolBenchResult): string[] {
  const cpu = (t: string) => p.cpu.find((c) => c.target === t)?.cpuMicrosPerRequest ?? NaN;
  const main = (t: string) => p.cpu.find((c) => c.target === t)?.mainThreadMicrosPerRequest ?? NaN;
  // Over all rounds (not the median round), so the parts need not add up to the figures above.
  const threads = (t: string) => (p.cpu.find((c) => c.target === t)?.byThread ?? []).map(([name, us]) => `${name} ${us.toFixed(0)}`).join(', ');
  return [
    '## Protocol path measured with wrk (gateway vs a minimal protocol client, each in a process of its own)',
    '',
    `A devnet (simulated chain and hosts serving the real devshard protocol, token delay 0) in a process of its own; in front of its hosts, each in its own process with its own creator key and ${p.escrows} escrows: the gateway (the devshard host protocol, its only host path; its chain that devnet's REST; its process with the V8 setting \`shardgate serve\` uses, \`tuneV8ForServing()\`) and the minimal client (\`bench/protocol-client.ts\`: compose and sign the diff, sign the header, send with catch-up, take ConfirmStart/Finish into later diffs; no log, no checks). wrk (C, one thread, ${p.connections} connections, ${p.seconds} s rounds), rounds interleaved. \`node dist/bench/protocol-bench.js\`.`,
    '',
    '| pair | minimal client req/s | client p99 ms | gateway req/s | gateway p99 ms | ratio | hosts\' process: CPU µs per request, share of a core (client / gateway round) |',
    '|---:|---:|---:|---:|---:|---:|---:|',
    ...p.pairs.map((x, i) => {
      const h = p.hostCpu[i]!;
      return `| ${i + 1} | ${fmt(Math.round(x.client.requestsPerSec))} | ${x.client.p99Ms.toFixed(2)} | ${fmt(Math.round(x.gateway.requestsPerSec))} | ${x.gateway.p99Ms.toFixed(2)} | ${x.ratio.toFixed(2)} | ${fmt(Math.round(h.client))} / ${fmt(Math.round(h.gateway))}, ${Math.round(h.clientShare * 100)}% / ${Math.round(h.gatewayShare * 100)}% |`;
    }),
    '',
    `Median ratio **${p.medianRatio.toFixed(2)}x** (goal ≥ 0.8x: ${p.medianRatio >= 0.8 ? 'met' : 'NOT met'}). CPU per request (whole process, all threads, /proc; ${cpuRateText(p.cpuRate, p.cpuRateFraction, p.cpu)}): minimal client ${cpu('minimal client').toFixed(0)} µs, gateway ${cpu('gateway').toFixed(0)} µs, **${p.cpuRatio.toFixed(2)}x** (goal ≤ 1.25x: ${p.cpuRatio <= 1.25 ? 'met' : 'NOT met'}); of which the main thread: client ${main('minimal client').toFixed(0)} µs, gateway ${main('gateway').toFixed(0)} µs. By thread over all rounds, µs per request: minimal client ${threads('minimal client')}; gateway ${threads('gateway')} ("other": V8's GC and compiler helpers, libuv's pool). Per round: ${p.cpu.map((c) => `${c.target} ${c.rounds.map((r) => r.cpuMicrosPerRequest.toFixed(0)).join(', ')}`).join('; ')} µs.`,
    '',
  ];
}

function wrkAndCrypto(wrk?: WrkBenchResult, crypto?: CryptoBenchRow[], protocol?: ProtocolBenchResult): string[] {
  const lines: string[] = [];
  if (wrk) {
    const cpu = (t: string) => wrk.cpu.find((c) => c.target === t)?.cpuMicrosPerRequest ?? NaN;
    lines.push(
      '## Upstream mode measured with wrk (each target in a process of its own)',
      '',
      `wrk (C, one thread, ${wrk.connections} connections, ${wrk.seconds} s rounds) against the bare proxy and the gateway, each in its own process, in front of the same zero-delay host in a third; after ${wrk.warmupSeconds} s of warm-up load on each, baseline and gateway rounds interleaved. The gateway's process runs with the V8 setting \`shardgate serve\` uses (\`tuneV8ForServing()\`: \`--no-allocation-site-pretenuring\`); the bare proxy with Node's defaults. \`node dist/bench/wrk-bench.js\`.`,
      '',
      '| pair | baseline req/s | baseline p99 ms | gateway req/s | gateway p99 ms | ratio |',
      '|---:|---:|---:|---:|---:|---:|',
      ...wrk.pairs.map((p, i) => `| ${i + 1} | ${fmt(Math.round(p.baseline.requestsPerSec))} | ${p.baseline.p99Ms.toFixed(2)} | ${fmt(Math.round(p.gateway.requestsPerSec))} | ${p.gateway.p99Ms.toFixed(2)} | ${p.ratio.toFixed(2)} |`),
      '',
      `Median ratio **${wrk.medianRatio.toFixed(2)}x** (target ≥ 0.8x: ${wrk.medianRatio >= 0.8 ? 'met' : 'NOT met'}). CPU per request (whole process, all threads, /proc; ${cpuRateText(wrk.cpuRate, wrk.cpuRateFraction, wrk.cpu)}): baseline ${cpu('baseline').toFixed(0)} µs, gateway ${cpu('gateway').toFixed(0)} µs (${(cpu('gateway') / cpu('baseline')).toFixed(2)}x). Per round: ${wrk.cpu.map((c) => `${c.target} ${c.rounds.map((r) => r.cpuMicrosPerRequest.toFixed(0)).join(', ')}`).join('; ')} µs.`,
      '',
    );
  }
  if (protocol) lines.push(...protocolSection(protocol));
  if (crypto) {
    lines.push(
      '## Protocol crypto primitives (µs per call, median of 5 interleaved rounds)',
      '',
      '`node dist/bench/crypto-bench.js`. The protocol signs with libsecp256k1 (src/protocol/signatures.ts).',
      '',
      '| µs | primitive |',
      '|---:|---|',
      ...crypto.map((r) => `| ${r.microseconds.toFixed(1)} | ${r.name} |`),
      '',
    );
  }
  return lines;
}

/**
 * The summary table docs/benchmarks.md opens with: issue 31's goals, each with this run's figure,
 * whether it is met and the command that reproduces it.
 */
function summaryTable(gw?: GatewayBenchResult, wrk?: WrkBenchResult, protocol?: ProtocolBenchResult, proj?: ProjectionsBenchResult): string[] {
  const met = (ok: boolean | undefined) => (ok === undefined ? 'not measured' : ok ? 'met' : '**NOT met**');
  const wrkCpu = (t: string) => wrk?.cpu.find((c) => c.target === t)?.cpuMicrosPerRequest;
  const protoCpu = (t: string) => protocol?.cpu.find((c) => c.target === t)?.cpuMicrosPerRequest;
  const tb = gw?.ttfb.find((r) => r.target === 'baseline');
  const tg = gw?.ttfb.find((r) => r.target === 'gateway');
  const ttfb = tb && tg ? Math.round((tg.p50Ms - tb.p50Ms) * 1000) / 1000 : undefined;
  const rss = gw?.soak ? (gw.soak.afterGc?.rssGrowth ?? gw.soak.rssGrowthAfterWarmup) : undefined;
  const rebuild = gw?.soak ? gw.soak.rebuild.recordsPerSec : proj?.rebuild.eventsPerSec;
  const upstreamCpu = wrkCpu('gateway') !== undefined && wrkCpu('baseline') !== undefined ? wrkCpu('gateway')! / wrkCpu('baseline')! : undefined;
  return [
    '## Summary: the speed goals (issue 31), this run',
    '',
    '| goal | this run | status | reproduce |',
    '|---|---|---|---|',
    `| upstream mode throughput ≥ 0.8x the bare proxy (wrk, c=64, targets in their own processes) | ${wrk ? `${wrk.medianRatio.toFixed(2)}x (median of ${wrk.pairs.length} interleaved pairs)` : '-'} | ${met(wrk ? wrk.medianRatio >= 0.8 : undefined)} | \`node dist/bench/wrk-bench.js\` |`,
    `| upstream mode added p99 ≤ 1 ms at 1,000 req/s (open loop) | ${gw?.fixedRateAddedP99Ms !== undefined ? `${gw.fixedRateAddedP99Ms} ms` : '-'} | ${met(gw?.fixedRateAddedP99Ms !== undefined ? gw.fixedRateAddedP99Ms <= 1 : undefined)} | \`npm run bench\` (request path) |`,
    `| protocol path throughput ≥ 0.8x the minimal protocol client (same hosts, wrk) | ${protocol ? `${protocol.medianRatio.toFixed(2)}x (median of ${protocol.pairs.length} pairs)` : '-'} | ${met(protocol ? protocol.medianRatio >= 0.8 : undefined)} | \`node dist/bench/protocol-bench.js\` |`,
    `| protocol path gateway CPU per request ≤ 1.25x the minimal client's (same fixed rate) | ${protocol ? `${protocol.cpuRatio.toFixed(2)}x (${protoCpu('gateway')?.toFixed(0)} vs ${protoCpu('minimal client')?.toFixed(0)} µs at ${protocol.cpuRate} req/s)` : '-'} | ${met(protocol ? protocol.cpuRatio <= 1.25 : undefined)} | \`node dist/bench/protocol-bench.js\` |`,
    `| (no goal) upstream mode CPU per request vs the bare proxy, same fixed rate | ${upstreamCpu !== undefined ? `${upstreamCpu.toFixed(2)}x (${wrkCpu('gateway')!.toFixed(0)} vs ${wrkCpu('baseline')!.toFixed(0)} µs at ${wrk!.cpuRate} req/s)` : '-'} | - | \`node dist/bench/wrk-bench.js\` |`,
    `| streaming TTFB overhead ≤ 1 ms (p50) | ${ttfb !== undefined ? `${ttfb} ms` : '-'} | ${met(ttfb !== undefined ? ttfb <= 1 : undefined)} | \`npm run bench\` (request path) |`,
    `| RSS flat over 1,000,000 requests (growth < 10% after warm-up) | ${rss !== undefined ? `${(rss * 100).toFixed(1)}%` : 'soak not run'} | ${met(rss !== undefined ? rss < 0.1 : undefined)} | \`npm run bench -- --soak\` |`,
    `| rebuild ≥ 500,000 events/s | ${rebuild !== undefined ? `${fmt(rebuild)} ${gw?.soak ? 'request records/s from the soak\'s SQLite log' : 'events/s (in-memory log; the soak measures it from SQLite)'}` : '-'} | ${met(rebuild !== undefined ? rebuild >= 500_000 : undefined)} | \`npm run bench${gw?.soak ? ' -- --soak' : ''}\` |`,
    '',
    'What bounds the goals not met, and the lab notes, are below the generated figures.',
    '',
  ];
}

function markdown(date: Date, m: string, store?: StoreBenchResult, proj?: ProjectionsBenchResult, gw?: GatewayBenchResult, errors: string[] = [], extra: string[] = [], summary: string[] = []): string {
  const lines = [
    '# Benchmarks',
    '',
    'What is measured: the event store (append with and without group commit, read, verify), the',
    'projections (statechart fold, rebuild), and the request path (throughput against a bare proxy,',
    'added latency at a fixed rate, streaming time to first byte, RSS over a 1,000,000-request soak,',
    "rebuild from the soak's log). The figures below are the latest `npm run bench` run, generated;",
    'after them, the command that reproduces each figure and what is left. The run-by-run notes of the',
    'performance work are in [lab/benchmarks-notebook.md](lab/benchmarks-notebook.md).',
    '',
    `Generated by \`npm run bench${soak ? ' -- --soak' : ''}${quick ? ' -- --quick (smoke sizes, not comparable)' : ''}\` on ${date.toISOString()}.`,
    '',
    `Machine: ${m}.`,
    '',
    'Wall-clock rates depend on what else the machine runs; "per CPU-second" is what one uncontended core does.',
    '',
    ...summary,
  ];
  if (store) {
    lines.push(
      '## Event store (durable, synchronous FULL)',
      '',
      '| measurement | events/s | per CPU-second | note |',
      '|---|---:|---:|---|',
      `| append, group commit | ${fmt(store.groupCommit.eventsPerSec)} | ${fmt(store.groupCommit.cpuEventsPerSec)} | ${fmt(store.groupCommit.events)} appends in ${fmt(store.groupCommit.commits)} commits (bursts of ${store.groupCommit.burst}) |`,
      `| append, one transaction each | ${fmt(store.perAppend.eventsPerSec)} | ${fmt(store.perAppend.cpuEventsPerSec)} | group commit is ${store.ratio}x |`,
      `| readAll (decode + JSON.parse) | ${fmt(store.rebuild.eventsPerSec)} | ${fmt(store.rebuild.cpuEventsPerSec)} | ${fmt(store.rebuild.events)} events, ${(store.rebuild.fileBytes / 2 ** 20).toFixed(0)} MiB file |`,
      ...(store.verify ? [`| verify (hash chain) | ${fmt(store.verify.eventsPerSec)} | ${fmt(store.verify.cpuEventsPerSec)} | |`] : []),
      '',
      `Targets: group commit ≥ ${fmt(store.targets.groupCommitEventsPerSec)} events/s, read ≥ ${fmt(store.targets.rebuildEventsPerSec)} events/s — ${store.targets.met ? 'met' : 'NOT met'}.`,
      '',
    );
  }
  if (proj) {
    lines.push(
      '## Projections',
      '',
      `Escrow statechart fold per inference event (${fmt(proj.fold.events)} events, 16 in flight): xstate \`transition\` ${proj.fold.xstateUsPerEvent.toFixed(2)} µs, ` +
        `fast path (\`stepEscrowFast\`) ${proj.fold.fastUsPerEvent.toFixed(3)} µs (${proj.fold.speedup}x).`,
      '',
      `\`Projections.rebuild\` (every projection) over ${fmt(proj.rebuild.events)} in-memory events of realistic shape (${proj.rebuild.escrows} escrow lifecycles): ` +
        `**${fmt(proj.rebuild.eventsPerSec)} events/s** (${fmt(proj.rebuild.cpuEventsPerSec)} per CPU-second), ${proj.rebuild.seconds.toFixed(2)} s; ` +
        `target ≥ ${fmt(proj.targets.rebuildEventsPerSec)} — ${proj.targets.met ? 'met' : 'NOT met'}. The escrow pool alone: ${fmt(proj.rebuild.poolOnlyEventsPerSec)} events/s. ` +
        `Reading the log from SQLite is the store's readAll row above.`,
      '',
    );
  }
  if (gw) {
    const row = (name: string, c: number) => gw.levels.find((r) => r.target === name && r.connections === c);
    const c64 = gw.comparison.find((c) => c.connections === 64);
    const fb = gw.fixedRate.find((r) => r.target === 'baseline');
    const fg = gw.fixedRate.find((r) => r.target === 'gateway');
    const tb = gw.ttfb.find((r) => r.target === 'baseline');
    const tg = gw.ttfb.find((r) => r.target === 'gateway');
    const d = (a: number, b: number) => (Math.round((a - b) * 1000) / 1000).toString();
    lines.push(
      '## Request path (chat completion, zero-delay host)',
      '',
      'Host: the simulated OpenAI mount (token delay 0). **baseline**: bare fastify + undici proxy. **gateway**: the real gateway ' +
        '(`startGateway`) in upstream mode (NETWORK_UPSTREAM_URL = the same host): client-key auth, validation, access mode, limiter, ' +
        'routing over escrows created on its embedded devnet, nonces durably reserved in blocks of 256 (NoncesReserved, WAL synchronous=FULL, group commit), ' +
        'each request\'s start and end recorded as entries of its escrow\'s InferencesRecorded (one event per escrow and group commit; committed after the answer), LOG_LEVEL=warn. **gateway-hosts**: the same gateway over the devshard host protocol to its embedded devnet\'s ' +
        'simulated hosts (per request a diff composed, signed and recorded before it leaves, a signed header, the receipt checked; the hosts recover the signatures, apply the diff and execute in this same process) — not part of the ratios. ' +
        'Servers share one process, started fresh for this section (not the one that ran the store and projections benches) with the V8 setting `shardgate serve` uses (`--no-allocation-site-pretenuring`, src/gateway/v8-tuning.ts); the load generator (autocannon, closed loop) runs in a child process; targets interleaved per level.',
      '',
      '| target | connections | requests/s | p50 ms | p99 ms | errors | store events / commits |',
      '|---|---:|---:|---:|---:|---:|---:|',
      ...gw.levels.map(
        (r) => `| ${r.target} | ${r.connections} | ${fmt(r.requestsPerSec)} | ${r.p50Ms} | ${r.p99Ms} | ${r.errors + r.non2xx} | ${r.commits !== undefined ? `${fmt(r.events!)} / ${fmt(r.commits)} (${(r.events! / Math.max(1, r.commits)).toFixed(1)} per commit)` : ''} |`,
      ),
      '',
      '| connections | gateway/baseline throughput | added p50 ms | added p99 ms |',
      '|---:|---:|---:|---:|',
      ...gw.comparison.map((c) => `| ${c.connections} | ${c.throughputRatio} | ${c.addedP50Ms} | ${c.addedP99Ms} |`),
      '',
      'autocannon reports latency in whole milliseconds; the fixed-rate run below measures each request in µs.',
      '',
      ...(fb && fg
        ? [
            `### Fixed rate (${fmt(fb.rate)} requests/s, open loop, 64 connections, latency per request via process.hrtime in the load process)`,
            '',
            `It runs first in the section, after a 2 s warm-up at the rate and before the closed-loop levels above (so it measures serving steadily at the rate, not the aftermath of saturating load). Baseline and gateway alternate in ${fb.roundP99Ms.length} back-to-back pairs of rounds; each row is the target's median round (by p99).`,
            '',
            '| target | achieved/s | p50 ms | p90 ms | p99 ms | max ms | errors | p99 of each round, ms |',
            '|---|---:|---:|---:|---:|---:|---:|---|',
            ...gw.fixedRate.map((r) => `| ${r.target} | ${fmt(r.achievedRate)} | ${r.p50Ms} | ${r.p90Ms} | ${r.p99Ms} | ${r.maxMs} | ${r.errors} | ${r.roundP99Ms.join(', ')} |`),
            '',
            `Added by the gateway: p50 ${d(fg.p50Ms, fb.p50Ms)} ms (median rounds); p99 **${gw.fixedRateAddedP99Ms ?? d(fg.p99Ms, fb.p99Ms)} ms** (median of the per-pair differences).`,
            '',
          ]
        : []),
      ...(tb && tg
        ? [
            '### Streaming time to first byte (`stream: true`, one connection, sequential; first SSE frame)',
            '',
            '| target | requests | p50 ms | p90 ms | p99 ms |',
            '|---|---:|---:|---:|---:|',
            ...gw.ttfb.map((r) => `| ${r.target} | ${r.count} | ${r.p50Ms} | ${r.p90Ms} | ${r.p99Ms} |`),
            '',
            `Added by the gateway: p50 ${d(tg.p50Ms, tb.p50Ms)} ms, p99 ${d(tg.p99Ms, tb.p99Ms)} ms.`,
            '',
          ]
        : []),
      ...(gw.hostApart
        ? [
            `### Throughput at ${gw.hostApart.connections} connections with the host in its own process`,
            '',
            'The same comparison with the zero-delay host in a process of its own, as a gateway is deployed (its hosts are other machines): the targets\' event loop and heap then carry no host work. ' +
              `A fresh process holds baseline and gateway; they alternate in ${gw.hostApart.pairs.length} back-to-back pairs of ${gw.hostApart.seconds} s rounds after a 1 s warm-up each; the figure is the median pair's ratio.`,
            '',
            '| pair | baseline req/s | gateway req/s | gateway/baseline |',
            '|---:|---:|---:|---:|',
            ...gw.hostApart.pairs.map((p, i) => `| ${i + 1} | ${fmt(p.baseline)} | ${fmt(p.gateway)}${p.gatewayNon2xx ? ` (${p.gatewayNon2xx} errors)` : ''} | ${p.ratio} |`),
            '',
            `Median: **${gw.hostApart.medianRatio}x**.`,
            '',
          ]
        : []),
      ...(gw.soak
        ? [
            `### Soak (${gw.soak.target}, 64 connections)`,
            '',
            `${fmt(gw.soak.requests)} requests in ${gw.soak.seconds.toFixed(0)} s (${fmt(gw.soak.requestsPerSec)} req/s, ${gw.soak.errors} errors). ` +
              `RSS of the soak's own process (gateway + host + devnet, started fresh for the soak), MiB every 5 s after a 5 s warm-up: ${gw.soak.rssMiB.join(', ')}. ` +
              `Heap used MiB: ${gw.soak.heapUsedMiB.join(', ')}. Raw RSS growth (30 s sample to the last, follows the GC sawtooth): ${(gw.soak.rssGrowthAfterWarmup * 100).toFixed(1)}%.` +
              (gw.soak.afterGc
                ? ` After a forced full GC: RSS ${gw.soak.afterGc.warmRssMiB} MiB at 60 s → ${gw.soak.afterGc.endRssMiB} MiB at the end, **${(gw.soak.afterGc.rssGrowth * 100).toFixed(1)}%**; heap used ${gw.soak.afterGc.warmHeapMiB} → ${gw.soak.afterGc.endHeapMiB} MiB (V8 heap committed ${gw.soak.afterGc.warmHeapTotalMiB} → ${gw.soak.afterGc.endHeapTotalMiB} MiB).`
                : ''),
            '',
            `Rebuild from the soak's log (${fmt(gw.soak.rebuild.events)} events holding ${fmt(gw.soak.rebuild.records)} request records — each request start and end counted once, as logs before InferencesRecorded hold them one event each —, ${gw.soak.rebuild.fileMiB} MiB, gateway stopped): readAll alone ${gw.soak.rebuild.readSeconds.toFixed(2)} s ` +
              `(${fmt(gw.soak.rebuild.readEventsPerSec)} events/s); \`rebuildProjectionsFrom\` (every projection; escrow streams split by stream over the cores, each part folded from its own read-only connection, then merged) ${gw.soak.rebuild.rebuildSeconds.toFixed(2)} s (**${fmt(gw.soak.rebuild.eventsPerSec)} events/s, ${fmt(gw.soak.rebuild.recordsPerSec)} request records/s**, the median of three runs in a fresh process after the file is flushed: ${gw.soak.rebuild.runsEventsPerSec.map(fmt).join(', ')} events/s; ${gw.soak.rebuild.runsRecordsPerSec.map(fmt).join(', ')} records/s).`,
            '',
          ]
        : ['Soak: not run (`npm run bench -- --soak`).', '']),
    );
    const rssGrowth = gw.soak ? (gw.soak.afterGc?.rssGrowth ?? gw.soak.rssGrowthAfterWarmup) : undefined;
    const rssOk = rssGrowth === undefined ? undefined : rssGrowth < 0.1;
    const met = (ok: boolean | undefined) => (ok === undefined ? 'not measured' : ok ? 'met' : 'NOT met');
    lines.push(
      '### Targets (issue 7), this run',
      '',
      '| target | measured | status |',
      '|---|---|---|',
      `| throughput ≥ 0.8 × bare proxy at 64 connections | ${gw.hostApart ? `host in its own process: ${gw.hostApart.medianRatio}x (median of ${gw.hostApart.pairs.length} pairs: ${gw.hostApart.pairs.map((p) => p.ratio).join(', ')}); ` : ''}host in the targets' process: ${c64 ? `${c64.throughputRatio}x (${fmt(row('gateway', 64)?.requestsPerSec ?? 0)} vs ${fmt(row('baseline', 64)?.requestsPerSec ?? 0)} req/s, one round)` : '-'} | ${gw.hostApart ? `${met(gw.hostApart.medianRatio >= 0.8)} (host apart); ` : ''}${met(c64 ? c64.throughputRatio >= 0.8 : undefined)} (host in process) |`,
      `| added p99 ≤ 1 ms at 1,000 req/s | ${gw.fixedRateAddedP99Ms !== undefined ? `${gw.fixedRateAddedP99Ms} ms (median of ${fb?.roundP99Ms.length} pairs)` : '-'} | ${met(gw.fixedRateAddedP99Ms !== undefined ? gw.fixedRateAddedP99Ms <= 1 : undefined)} |`,
      `| streaming TTFB overhead ≤ 1 ms (p50) | ${tb && tg ? `${d(tg.p50Ms, tb.p50Ms)} ms` : '-'} | ${met(tb && tg ? tg.p50Ms - tb.p50Ms <= 1 : undefined)} |`,
      `| RSS growth < 10% after warm-up over 1,000,000 requests | ${gw.soak ? `${(rssGrowth! * 100).toFixed(1)}%${gw.soak.afterGc ? ' (after full GC, 60 s → end)' : ''}; raw samples ${(gw.soak.rssGrowthAfterWarmup * 100).toFixed(1)}%` : '-'} | ${met(rssOk)} |`,
      // Judged in request records/s from the soak's log: the same unit as before InferencesRecorded (one per start and end), so runs of every version compare.
      `| rebuild ≥ 500,000 events/s | ${proj ? `${fmt(proj.rebuild.eventsPerSec)} events/s (in-memory log, one event per start and end)` : '-'}${gw.soak ? `; from the soak's SQLite log ${fmt(gw.soak.rebuild.recordsPerSec)} request records/s (${fmt(gw.soak.rebuild.eventsPerSec)} events/s: ${fmt(gw.soak.rebuild.events)} events hold its ${fmt(gw.soak.rebuild.records)} starts, ends and other events)` : ''} | ${met(gw.soak ? gw.soak.rebuild.recordsPerSec >= 500_000 : proj ? proj.rebuild.eventsPerSec >= 500_000 : undefined)}${gw.soak ? ' (from SQLite, in request records)' : ' (in memory only; the soak log is the real test)'} |`,
      '',
    );
  }
  lines.push(...extra);
  if (errors.length) lines.push('## Failures', '', ...errors.map((e) => '```\n' + e + '\n```'), '');
  return lines.join('\n');
}

/** A part of the request path in a fresh process (request-path-child.ts says why); its lines print as they come. */
function inChild<T>(opts: Omit<GatewayBenchOptions, 'log'>, part: 'request-path' | 'host-apart' | 'soak'): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = fork(join(dirname(fileURLToPath(import.meta.url)), 'request-path-child.js'), [JSON.stringify(opts), part], { stdio: 'inherit' });
    let result: T | undefined;
    child.once('message', (m) => (result = m as T));
    child.once('error', reject);
    child.once('exit', (code) => (result ? resolve(result) : reject(new Error(`the ${part} process exited (${code}) without a result`))));
  });
}

/** The request path, the throughput pairs with the host apart, then (with `soak`) the soak, each in a fresh process. */
async function benchGatewayApart(opts: Omit<GatewayBenchOptions, 'log'>): Promise<GatewayBenchResult> {
  const result = await inChild<GatewayBenchResult>(opts, 'request-path');
  const hostApart = await inChild<HostApartResult>(opts, 'host-apart');
  return opts.soak ? { ...result, hostApart, soak: await inChild<SoakResult>(opts, 'soak') } : { ...result, hostApart };
}

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const out = join(root, 'docs', 'benchmarks.md');
// Everything from the hand-written marker on is kept as it is.
const MARKER = '<!-- hand-written below: kept by npm run bench -->';

/** The scale-out section (issue 42); in a quick run, smoke sizes. */
const runScaleOut = () =>
  section('several instances on PostgreSQL (1 on SQLite vs 1 and 2 on PostgreSQL)', () =>
    benchScaleOut({ log, ...(quick ? { rounds: 1, seconds: 2, warmupSeconds: 1, rateRounds: 1, rateSeconds: 2 } : {}) }),
  );

/**
 * BENCH_ONLY=scale-out: that section alone; its block in docs/benchmarks.md (between its markers)
 * is replaced, or added before the failures and the hand-written part, the rest kept as it is.
 */
async function onlyScaleOut(): Promise<void> {
  const date = new Date();
  console.log(`shardgate benchmarks, scale-out section only — ${date.toISOString()}\n${machine()}`);
  const r = await runScaleOut();
  const block = scaleOutSection(r.result, r.error, date).join('\n');
  let doc = '';
  try {
    doc = readFileSync(out, 'utf8');
  } catch {
    /* no file yet */
  }
  const begin = doc.indexOf(SCALE_OUT_BEGIN);
  const end = doc.indexOf(SCALE_OUT_END);
  if (begin >= 0 && end > begin) doc = doc.slice(0, begin) + block + doc.slice(end + SCALE_OUT_END.length);
  else {
    const failures = doc.indexOf('\n## Failures\n');
    const marker = doc.indexOf(MARKER);
    const at = failures >= 0 ? failures + 1 : marker >= 0 ? marker : doc.length;
    doc = doc.slice(0, at) + block + '\n\n' + doc.slice(at);
  }
  if (r.error) doc = doc.replace(SCALE_OUT_END, '```\n' + r.error + '\n```\n\n' + SCALE_OUT_END);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, doc);
  console.log(`\nwrote the scale-out section of ${out} (${r.seconds.toFixed(0)} s)`);
}

const only = process.env.BENCH_ONLY?.trim();
if (only && only !== 'scale-out') {
  console.error(`BENCH_ONLY=${only}: unknown section (known: scale-out)`);
  process.exit(2);
}
if (only === 'scale-out') await onlyScaleOut();
else await fullRun();

async function fullRun(): Promise<void> {
  const date = new Date();
  const m = machine();
  console.log(`shardgate benchmarks — ${date.toISOString()}\n${m}`);

  const store = await section('event store', () =>
    benchStore({ log, ...(quick ? { groupAppends: 10_000, perAppends: 500, rebuildEvents: 50_000 } : {}) }),
  );
  const proj = await section('projections', () => benchProjections({ log, ...(quick ? { events: 100_000, foldEvents: 20_000, repeats: 1 } : {}) }));
  const gw = await section('request path', () => benchGatewayApart({ soak, ...(quick ? { seconds: 1, levels: [1, 64], fixedRateSeconds: 2, ttfbRequests: 100, soakRequests: 50_000 } : {}) }));

  const wrk = await section('upstream mode with wrk, targets in processes of their own', () => benchWrk({ log, ...(quick ? { pairs: 1, seconds: 2, warmupSeconds: 1 } : {}) }));
  const protocol = await section('protocol path with wrk: gateway vs a minimal protocol client', () => benchProtocol({ log, ...(quick ? { pairs: 1, seconds: 2 } : {}) }));
  const crypto = await section('protocol crypto primitives', () => benchCrypto(quick ? 100 : 400));
  for (const r of crypto.result ?? []) log(`${r.microseconds.toFixed(1).padStart(9)} µs  ${r.name}`);
  const scaleOut = await runScaleOut();

  mkdirSync(dirname(out), { recursive: true });
  let kept = '';
  try {
    const previous = readFileSync(out, 'utf8');
    const at = previous.indexOf(MARKER);
    if (at >= 0) kept = previous.slice(at);
  } catch {
    /* first run */
  }
  writeFileSync(
    out,
    markdown(
      date,
      m,
      store.result,
      proj.result,
      gw.result,
      [store.error, proj.error, gw.error, wrk.error, protocol.error, crypto.error, scaleOut.error].filter((e): e is string => !!e),
      [...wrkAndCrypto(wrk.result, crypto.result, protocol.result), ...scaleOutSection(scaleOut.result, scaleOut.error, date), ''],
      summaryTable(gw.result, wrk.result, protocol.result, proj.result),
    ) + (kept ? `\n${kept}` : ''),
  );
  console.log(`\nwrote ${out} (total ${(store.seconds + proj.seconds + gw.seconds + wrk.seconds + protocol.seconds + crypto.seconds + scaleOut.seconds).toFixed(0)} s)`);
}
