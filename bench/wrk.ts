/**
 * wrk as the load generator (issue 31): a C program with its own event loop, so it is not the
 * bottleneck the way a Node load generator on a 2-core machine is (autocannon saturated a core of
 * its own near the rates measured here, which flattened every ratio).
 *
 * `ensureWrk()` installs Debian's `wrk` when it is missing (the bench runs as root on these
 * machines); `runWrk()` runs one closed-loop round and reads the figures a Lua `done` hook prints
 * as JSON (latency in µs from wrk's own histogram).
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface WrkOptions {
  url: string;
  body: string;
  headers: Record<string, string>;
  connections: number;
  seconds: number;
  /** wrk threads (default 1: the targets need the other core more than wrk does). */
  threads?: number;
  /** Seconds before wrk counts a request as a timeout error (wrk's default 2). */
  timeoutSeconds?: number;
}

export interface WrkResult {
  requests: number;
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** Socket errors (connect, read, write, timeout) and non-2xx/3xx answers. */
  errors: number;
  non2xx: number;
}

export function wrkAvailable(): boolean {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
    return true;
  } catch (err) {
    // wrk --version exits 1 after printing its banner; only a missing binary is ENOENT.
    return (err as NodeJS.ErrnoException).code !== 'ENOENT';
  }
}

/** Installs Debian's wrk when missing; throws with the remedy when it cannot. */
export function ensureWrk(): void {
  if (wrkAvailable()) return;
  try {
    execFileSync('apt-get', ['install', '-y', '-qq', 'wrk'], { stdio: 'ignore', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  } catch {
    try {
      execFileSync('apt-get', ['update', '-qq'], { stdio: 'ignore' });
      execFileSync('apt-get', ['install', '-y', '-qq', 'wrk'], { stdio: 'ignore', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    } catch {
      throw new Error('wrk is not installed and `apt-get install wrk` failed: install Debian package wrk, then rerun');
    }
  }
  if (!wrkAvailable()) throw new Error('wrk is still missing after apt-get install wrk');
}

const lua = (body: string, headers: Record<string, string>) => `
wrk.method = "POST"
wrk.body = ${JSON.stringify(body)}
${Object.entries(headers)
  .map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`)
  .join('\n')}
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"p50":%d,"p99":%d,"errors":%d,"non2xx":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, e.status))
end
`;

export async function runWrk(o: WrkOptions): Promise<WrkResult> {
  const dir = mkdtempSync(join(tmpdir(), 'wrk-'));
  const script = join(dir, 'post.lua');
  writeFileSync(script, lua(o.body, o.headers));
  try {
    const out = await new Promise<string>((resolve, reject) => {
      const p = spawn('wrk', ['-t', String(o.threads ?? 1), '-c', String(o.connections), '-d', `${o.seconds}s`, ...(o.timeoutSeconds ? ['--timeout', `${o.timeoutSeconds}s`] : []), '-s', script, o.url], { stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      p.stdout.on('data', (d: Buffer) => (text += d.toString()));
      p.stderr.on('data', (d: Buffer) => (text += d.toString()));
      p.on('error', reject);
      p.on('close', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited ${code}: ${text}`))));
    });
    const line = out.split('\n').find((l) => l.startsWith('WRKJSON '));
    if (!line) throw new Error(`wrk printed no summary: ${out}`);
    const j = JSON.parse(line.slice('WRKJSON '.length)) as { requests: number; duration_us: number; p50: number; p99: number; errors: number; non2xx: number };
    return {
      requests: j.requests,
      requestsPerSec: j.requests / (j.duration_us / 1e6),
      p50Ms: j.p50 / 1000,
      p99Ms: j.p99 / 1000,
      errors: j.errors + j.non2xx,
      non2xx: j.non2xx,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
