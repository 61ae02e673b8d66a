/**
 * `node dist/bench/slow-readers.js`: issue 39's repro of clients that never read their streams,
 * against the quick-start gateway (`serve --devnet`) in a process of its own. Five waves of 500
 * `{"stream":true,"max_tokens":4096}` requests with one client key, each socket paused (never
 * read); the gateway's RSS is sampled from /proc every 200 ms, the limiter from /v1/status.
 * Prints the RSS before, at its peak, and after the sockets closed, and the most requests the
 * limiter counted at once. A probe, not part of `npm run bench` (it takes about a minute).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeys } from '../src/config/index.js';

const WAVES = Number(process.env.WAVES ?? 5);
const PER_WAVE = Number(process.env.PER_WAVE ?? 500);

const rssMb = (pid: number) => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'slow-readers-'));
  const keys = generateKeys();
  const child = spawn(process.execPath, ['dist/src/cli/main.js', 'serve', '--devnet', '--storage', dir], {
    env: { PATH: process.env.PATH ?? '', DEVSHARD_PRIVATE_KEY: keys.privateKey, DEVSHARD_API_KEYS: keys.apiKey, DEVSHARD_ADMIN_API_KEY: keys.adminApiKey, DEVSHARD_PORT: '0', LOG_LEVEL: 'error', DEVNET_TOKEN_DELAY_MS: '5' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let banner = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr!.on('data', (d: Buffer) => {
      banner += d.toString();
      const m = /listening on (http:\/\/[^\s]+)/.exec(banner);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`gateway exited ${code}: ${banner}`)));
  });
  const { port } = new URL(url);
  const admin = { authorization: `Bearer ${keys.adminApiKey}`, 'content-type': 'application/json' };
  const model = ((await (await fetch(`${url}/v1/models`, { headers: admin })).json()) as { data: { id: string }[] }).data[0]!.id;
  await fetch(`${url}/v1/admin/settings`, { method: 'POST', headers: admin, body: JSON.stringify({ model_limits: [{ model_id: model, access_mode: 'api_key' }] }) });
  const body = JSON.stringify({ model, stream: true, max_tokens: 4096, messages: [{ role: 'user', content: 'tell me a long story' }] });
  const request = `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${keys.apiKey}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

  const pid = child.pid!;
  const before = rssMb(pid);
  let peak = before;
  let limiterPeak = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, rssMb(pid));
      const s = (await (await fetch(`${url}/v1/status`)).json()) as { limiter: { active_requests: number } };
      limiterPeak = Math.max(limiterPeak, s.limiter.active_requests);
      await sleep(200);
    }
  })();
  const sockets: Socket[] = [];
  const t0 = Date.now();
  for (let w = 0; w < WAVES; w++) {
    for (let i = 0; i < PER_WAVE; i++) {
      const s = connect(Number(port), '127.0.0.1');
      s.pause();
      s.on('error', () => {});
      s.write(request);
      sockets.push(s);
    }
    await sleep(2000);
    console.log(`wave ${w + 1}: ${sockets.length} sockets open, RSS ${rssMb(pid).toFixed(0)} MB, peak ${peak.toFixed(0)} MB, limiter peak ${limiterPeak}`);
  }
  // Until every request has ended (answered into the socket buffers, or cut as too slow).
  for (;;) {
    const s = (await (await fetch(`${url}/v1/status`)).json()) as { limiter: { active_requests: number } };
    if (s.limiter.active_requests === 0) break;
    await sleep(500);
  }
  const whileOpen = rssMb(pid);
  for (const s of sockets) s.destroy();
  await sleep(5000);
  sampling = false;
  await sampler;
  const after = rssMb(pid);
  console.log(`RSS before ${before.toFixed(0)} MB, peak ${peak.toFixed(0)} MB, all requests ended ${whileOpen.toFixed(0)} MB, 5 s after the sockets closed ${after.toFixed(0)} MB; the limiter counted at most ${limiterPeak} at once; ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  rmSync(dir, { recursive: true, force: true });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
