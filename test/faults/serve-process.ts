/**
 * A real `shardgate serve` in a child process for crash tests: started on an env, killed with
 * SIGKILL, its log read straight from SQLite (the crash tests read it while no gateway runs).
 */
import Database from 'better-sqlite3';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { RecordedEvent } from '../../src/events/envelope.js';
import { decodeRow, EVENT_COLUMNS, type EventRow } from '../../src/events/rows.js';
import { ensureBuilt } from '../helpers/store-dist.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether `port` can be listened on, on loopback, now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** The lowest port the kernel gives outgoing connections (Linux; 32768 elsewhere). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 0 ? low : 32768;
  } catch {
    return 32768;
  }
}

/**
 * A TCP port free on loopback, for a gateway that is killed and restarted on it. Taken below the
 * kernel's ephemeral range: a port the kernel hands out (listen(0)) can meanwhile become the local
 * port of any outgoing connection of the tests running beside, and the start or a restart fails with
 * "already in use" (seen in CI, test/faults/crash.test.ts).
 */
export async function freePort(): Promise<number> {
  const high = ephemeralLow();
  const low = 10_000;
  if (high - low >= 1_000) {
    for (let i = 0; i < 100; i++) {
      const port = low + Math.floor(Math.random() * (high - low));
      if (await canListen(port)) return port;
    }
  }
  // No room below the ephemeral range: one the kernel picks.
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** Every event of the log in `storage`, in position order. */
export function readLogAt(storage: string): RecordedEvent[] {
  const db = new Database(join(storage, 'events.sqlite'), { readonly: true });
  try {
    return (db.prepare(`SELECT ${EVENT_COLUMNS} FROM events ORDER BY position`).raw().all() as EventRow[]).map(decodeRow);
  } finally {
    db.close();
  }
}

/** Position of the first event after `afterPosition` of one of `types`, in the log in `storage` (undefined: none yet). */
export function findLogEvent(storage: string, types: readonly string[], afterPosition = 0): number | undefined {
  const db = new Database(join(storage, 'events.sqlite'), { readonly: true });
  try {
    const row = db.prepare(`SELECT position FROM events WHERE position > ? AND type IN (${types.map(() => '?').join(', ')}) ORDER BY position LIMIT 1`).get(afterPosition, ...types) as { position: number } | undefined;
    return row?.position;
  } finally {
    db.close();
  }
}

/** The last position of the log in `storage` (0: empty). */
export function lastLogPosition(storage: string): number {
  const db = new Database(join(storage, 'events.sqlite'), { readonly: true });
  try {
    return (db.prepare('SELECT COALESCE(MAX(position), 0) AS p FROM events').get() as { p: number }).p;
  } finally {
    db.close();
  }
}

/**
 * The env of a crash test's gateway: its own ports and storage, the given keys, the embedded devnet
 * fast (50 ms blocks, 2 ms per token) and a reconciler every 200 ms; no escrow configured, so the
 * first start creates one as the quick start does.
 */
export function crashEnv(o: { port: number; devnetPort: number; storage: string; keys: { privateKey: string; apiKey: string; adminApiKey: string } }): Record<string, string> {
  return {
    DEVSHARD_PORT: String(o.port),
    DEVNET_PORT: String(o.devnetPort),
    DEVSHARD_STORAGE_DIR: o.storage,
    DEVSHARD_PRIVATE_KEY: o.keys.privateKey,
    DEVSHARD_API_KEYS: o.keys.apiKey,
    DEVSHARD_ADMIN_API_KEY: o.keys.adminApiKey,
    DEVSHARDS_JSON: '[]',
    DEVNET_BLOCK_TIME_MS: '50',
    DEVNET_TOKEN_DELAY_MS: '2',
    GATEWAY_RECONCILE_INTERVAL_MS: '200',
    DEVSHARD_HOST_PROTOCOL: 'devshard',
    LOG_LEVEL: 'warn',
  };
}

export class ServeProcess {
  private child: ChildProcess | undefined;
  /** The last 20,000 characters the process wrote to stderr. */
  stderr = '';
  /** The last 50,000 characters of its stdout (its log lines). */
  stdout = '';

  /** `cwd`: where `serve` runs (its env file and default storage); `statusUrl`: polled until 200. */
  constructor(private readonly cwd: string) {}

  /**
   * Starts `serve` with exactly `env` (plus PATH) and waits until `statusUrl` answers 200. `args`:
   * the CLI's arguments (default `serve --devnet`, the devnet inside the process).
   */
  async start(env: Record<string, string>, statusUrl: string, timeoutMs = 20_000, args: string[] = ['serve', '--devnet']): Promise<void> {
    this.stderr = '';
    this.stdout = '';
    const child = spawn(process.execPath, [ensureBuilt('dist/src/cli/main.js'), ...args], { cwd: this.cwd, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    child.stderr!.on('data', (d) => (this.stderr = (this.stderr + String(d)).slice(-20_000)));
    child.stdout!.on('data', (d) => (this.stdout = (this.stdout + String(d)).slice(-50_000)));
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`gateway exited ${child.exitCode}: ${this.stderr}`);
      try {
        const r = await fetch(statusUrl, { signal: AbortSignal.timeout(1000) });
        if (r.status === 200) return;
      } catch {
        /* not yet */
      }
      if (Date.now() > deadline) throw new Error(`gateway did not start: ${this.stderr}`);
      await sleep(100);
    }
  }

  /** SIGTERM (a clean stop: drain, hand over, close), then waits for the exit; its exit code. */
  async terminate(): Promise<number | null> {
    const c = this.child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return c?.exitCode ?? null;
    const exited = new Promise<number | null>((r) => c.once('exit', (code) => r(code)));
    c.kill('SIGTERM');
    return exited;
  }

  /** SIGKILL, then waits for the exit; nothing when no process runs. */
  async kill(): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await exited;
  }
}
