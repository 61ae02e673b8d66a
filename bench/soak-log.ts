/**
 * Writes a gateway soak's event log and keeps it (`node dist/bench/soak-log.js [requests] [dir]`;
 * default 1,000,000 requests into `<tmp>/shardgate-soak-log/`). The gateway, host, escrows and load
 * are the ones `npm run bench -- --soak` uses (gateway-bench.ts): the same warm-up, 64 connections,
 * escrows added up front. The gateway is stopped the same way before the files are moved, so the
 * log (and its WAL, if any is left) is the file the soak's rebuild measurement reads.
 * Rebuild it with `node dist/bench/rebuild-once.js <dir>/events.sqlite`.
 */
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { eventsFile } from '../src/events/sqlite-store.js';
import { ROUTING_STOP_NONCE } from '../src/machines/index.js';
import { LoadWorker, request, startGatewayTarget } from './gateway-bench.js';
import { startHost } from './host.js';
import type { AutocannonSummary } from './load-worker.js';

const requests = Number(process.argv[2] ?? 1_000_000);
const dir = process.argv[3] ?? join(tmpdir(), 'shardgate-soak-log');

const host = await startHost();
const worker = new LoadWorker();
try {
  const target = await startGatewayTarget(host.url, { mode: 'upstream', escrows: 1 });
  try {
    await target.addEscrows(Math.ceil(requests / (ROUTING_STOP_NONCE - 100)) + 1);
    await worker.run({ kind: 'autocannon', ...request(target), connections: 64, duration: 5 });
    const r = await worker.run<AutocannonSummary>({ kind: 'autocannon', ...request(target), connections: 64, amount: requests });
    console.log(`${requests.toLocaleString('en')} requests in ${r.seconds.toFixed(0)} s (${r.requestsPerSec} req/s, ${r.errors + r.non2xx} errors)`);
    await target.gateway.stop();
    const file = eventsFile(target.storageDir);
    mkdirSync(dir, { recursive: true });
    for (const suffix of ['', '-wal', '-shm']) {
      const to = join(dir, basename(file) + suffix);
      rmSync(to, { force: true });
      if (existsSync(file + suffix)) renameSync(file + suffix, to);
    }
    const fd = openSync(join(dir, basename(file)), 'r');
    fsyncSync(fd);
    closeSync(fd);
    console.log(`log: ${join(dir, basename(file))}`);
  } finally {
    await target.close();
  }
} finally {
  worker.close();
  await host.close();
}
