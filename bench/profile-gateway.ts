/**
 * Drives one gateway (upstream mode, zero-delay host) with autocannon from the load-worker process
 * for a while, then exits: run under `node --cpu-prof dist/bench/profile-gateway.js [seconds]
 * [connections] [hosts]` to see where the request path spends its time.
 */
import { startGatewayTarget } from './gateway-bench.js';
import { startHost } from './host.js';
import { fork } from 'node:child_process';

const seconds = Number(process.argv[2] ?? 10);
const connections = Number(process.argv[3] ?? 64);
// `hosts`: the devshard protocol to the embedded devnet's simulated hosts.
const mode = process.argv[4] === 'hosts' ? 'protocol' : 'upstream';
const host = await startHost();
const gw = await startGatewayTarget(host.url, { mode, escrows: 3 });
const worker = fork(new URL('./load-worker.js', import.meta.url));
const store = gw.gateway.store as unknown as { commitBatch(b: unknown[]): void };
const orig = store.commitBatch.bind(store);
let commitNs = 0n;
store.commitBatch = (b) => {
  const t = process.hrtime.bigint();
  orig(b);
  commitNs += process.hrtime.bigint() - t;
};
// Experiment only (never in the bench figures): what the fsync on the event loop costs.
if (process.env.BENCH_EXPERIMENT_SYNC_NORMAL === '1') (gw.gateway.store as unknown as { db: { pragma(s: string): unknown } }).db.pragma('synchronous = NORMAL');
const cpu0 = process.cpuUsage();
const before = gw.storeStats!();
const result = await new Promise((resolve) => {
  worker.once('message', (m: { result: unknown }) => resolve(m.result));
  worker.send({
    id: 0,
    job: { kind: 'autocannon', url: `${gw.url}/v1/chat/completions`, headers: { 'content-type': 'application/json', ...gw.headers }, body: JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 }), connections, duration: seconds },
  });
});
const after = gw.storeStats!();
const cpu = process.cpuUsage(cpu0);
console.log(JSON.stringify(result), `commits ${after.commits - before.commits}, events ${after.events - before.events}, time in in-thread commitBatch (0 with the writer thread) ${(Number(commitNs) / 1e9).toFixed(2)} s, process CPU user ${(cpu.user / 1e6).toFixed(2)} s system ${(cpu.system / 1e6).toFixed(2)} s`);
worker.kill();
await gw.close();
await host.close();
