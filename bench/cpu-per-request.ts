/**
 * CPU per request, gateway vs baseline (a diagnostic beside `npm run bench`, not part of its
 * figures): `node dist/bench/cpu-per-request.js [seconds] [connections] [rounds]`.
 *
 * Throughput on this 2-core machine moves ±30% with whatever else runs; CPU time per request moves
 * much less, and it is what the throughput target comes down to (the load generator has the other
 * core). Per target and round: requests, main-thread busy µs per request (event-loop utilization,
 * which is what saturates at 64 connections), main-thread CPU µs per request (Linux; the steadiest
 * figure when other work shares the cores) and process CPU µs per request (all threads: main,
 * store writer, and the zero-delay host, which both targets share).
 * With PROFILE_DIR set, each target's last round is CPU-profiled (main thread) into that folder.
 * With ABLATE_LOG=1 a third target is the same gateway with its event log switched off (decisions
 * kept in memory, nothing appended, sealed, written or folded): not a configuration anyone runs,
 * only a measure of what the log costs and of the ceiling without it.
 * ESCROWS (default 3) sets how many escrows the gateway routes to; each takes ~19,800 requests.
 * With HOST_PROCESS=1 the host runs in a process of its own, so the figures are the proxy's and the
 * gateway's alone.
 */
import { fork } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { performance } from 'node:perf_hooks';
import { Engine } from '../src/gateway/write/engine.js';
import { tuneV8ForServing } from '../src/gateway/v8-tuning.js';
import { startBaseline, startGatewayTarget } from './gateway-bench.js';
import { startHost, type Target } from './host.js';
import { startHostProcess } from './host-process.js';

const seconds = Number(process.argv[2] ?? 5);
const connections = Number(process.argv[3] ?? 64);
const rounds = Number(process.argv[4] ?? 2);

tuneV8ForServing(); // as `shardgate serve` runs
const host = process.env.HOST_PROCESS === '1' ? await startHostProcess() : await startHost();
const baseline = await startBaseline(host.url);
const gateway = await startGatewayTarget(host.url, { mode: 'upstream', escrows: Number(process.env.ESCROWS ?? 3) });
const worker = fork(new URL('./load-worker.js', import.meta.url));
let id = 0;
const body = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 });

/**
 * CPU time of the main thread (ms, Linux /proc, 10 ms ticks): unlike event-loop utilization it does
 * not count the time the thread was runnable but descheduled, which a busy 2-core machine inflates.
 */
function mainThreadCpuMs(): number | undefined {
  try {
    const fields = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}

async function drive(t: Target & { headers?: Record<string, string> }, duration: number) {
  const thread0 = mainThreadCpuMs();
  const elu0 = performance.eventLoopUtilization();
  const cpu0 = process.cpuUsage();
  const result = await new Promise<{ requestsPerSec: number; total: number; errors: number; non2xx: number }>((resolve) => {
    const my = ++id;
    const onMessage = (m: { id: number; result: never }) => {
      if (m.id !== my) return;
      worker.off('message', onMessage);
      resolve(m.result);
    };
    worker.on('message', onMessage);
    worker.send({ id: my, job: { kind: 'autocannon', url: `${t.url}/v1/chat/completions`, headers: { 'content-type': 'application/json', ...(t.headers ?? {}) }, body, connections, duration } });
  });
  const elu = performance.eventLoopUtilization(elu0);
  const cpu = process.cpuUsage(cpu0);
  const n = Math.max(1, result.total);
  const thread1 = mainThreadCpuMs();
  const threadUs = thread0 !== undefined && thread1 !== undefined ? ((thread1 - thread0) * 1000) / n : undefined;
  return { ...result, mainUs: (elu.active * 1000) / n, threadUs, cpuUs: (cpu.user + cpu.system) / n, utilization: elu.utilization };
}

const profileDir = process.env.PROFILE_DIR;
const session = profileDir ? new Session() : undefined;
if (session) {
  session.connect();
  await session.post('Profiler.enable');
}
const rows: string[] = [];
const ablate = process.env.ABLATE_LOG === '1';
const noLog = { ...gateway, name: 'gateway, no event log' };
const targets: (Target & { headers?: Record<string, string> })[] = [baseline, gateway];
type Append = (this: Engine, streamId: string, events: unknown[], snapshot: unknown) => Promise<unknown[]>;
const engineProto = Engine.prototype as unknown as { appendDecided: Append; pending: Map<string, unknown> };
const realAppend = engineProto.appendDecided;
const skipLog: Append = function (streamId, _events, snapshot) {
  (this as unknown as { pending: Map<string, unknown> }).pending.set(streamId, { snapshot, version: 0, uncommitted: 1 });
  return Promise.resolve([]);
};
const drive2 = async (t: Target & { headers?: Record<string, string> }, duration: number) => {
  if (t === noLog) engineProto.appendDecided = skipLog;
  try {
    return await drive(t, duration);
  } finally {
    engineProto.appendDecided = realAppend;
  }
};
for (const t of targets) await drive2(t, 1); // warm-up
// The ablated gateway runs last: its decisions never reach the log, so the gateway is not used after it.
for (let r = 0; r < rounds + (ablate ? 1 : 0); r++) {
  for (const t of r < rounds ? targets : [noLog, baseline]) {
    const profiling = session && (r === rounds - 1 || (t === noLog && r === rounds));
    if (profiling) await session.post('Profiler.start');
    const m = await drive2(t, seconds);
    if (profiling) {
      const { profile } = await session.post('Profiler.stop');
      writeFileSync(`${profileDir}/${t.name}.cpuprofile`, JSON.stringify(profile));
    }
    rows.push(
      `${t.name.padEnd(21)} round ${r + 1}: ${Math.round(m.requestsPerSec).toLocaleString('en').padStart(6)} req/s, main thread ${m.mainUs.toFixed(0).padStart(4)} µs/req (loop ${(m.utilization * 100).toFixed(0)}% busy)${m.threadUs !== undefined ? `, main-thread CPU ${m.threadUs.toFixed(0).padStart(4)} µs/req` : ''}, process CPU ${m.cpuUs.toFixed(0).padStart(4)} µs/req${m.errors || m.non2xx ? `, ${m.errors} errors ${m.non2xx} non-2xx` : ''}`,
    );
    console.log(rows.at(-1));
  }
}
worker.kill();
engineProto.appendDecided = realAppend;
await gateway.close();
await baseline.close();
await host.close();
