/**
 * Starts a real gateway (HTTP on loopback -> engine -> SQLite -> chain client -> embedded devnet
 * over loopback) for end-to-end tests, with generated keys and fast blocks.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { generateKeys, loadConfig } from '../../src/config/index.js';
import { SqliteEventStore } from '../../src/events/sqlite-store.js';
import { startGateway, type GatewayOptions, type RunningGateway } from '../../src/main/start.js';

export const MODEL = 'Qwen/Qwen3-235B-A22B-Instruct-2507-FP8';

export interface TestGateway extends RunningGateway {
  /** Test gateways keep their log in SQLite, whose reads answer at once (no await needed). */
  store: SqliteEventStore;
  keys: ReturnType<typeof generateKeys>;
  storageDir: string;
  env: Record<string, string>;
  /** Every log line the gateway wrote (JSON strings). */
  logs: string[];
  /** fetch against the gateway with a key kind. */
  call(path: string, init?: CallInit): Promise<CallResult>;
  /** Restart on the same storage (and the same devnet state file). */
  restart(): Promise<TestGateway>;
}

export interface TestGatewayOptions {
  env?: Record<string, string>;
  storageDir?: string;
  keys?: ReturnType<typeof generateKeys>;
  quickStartEscrow?: boolean;
  quickStartRotation?: boolean;
  devnet?: GatewayOptions['devnet'];
}

export type CallInit = { method?: string; body?: unknown; key?: 'admin' | 'client' | 'none' | string; headers?: Record<string, string> };
export type CallResult = { status: number; headers: Headers; text: string; json: any };

/** A pino logger whose lines (JSON strings) are collected in `logs`, redacted like production. */
export async function capturingLogger(level: string): Promise<{ logger: pino.Logger; logs: string[] }> {
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logs.push(...String(chunk).split('\n').filter(Boolean));
      cb();
    },
  });
  const { REDACT_PATHS } = await import('../../src/http/logger.js');
  return { logger: pino({ level, redact: { paths: [...REDACT_PATHS], censor: '[redacted]' } }, sink), logs };
}

/**
 * fetch against a gateway with a key kind ('admin' by default), answering status, text and JSON.
 * `recorded`, when given, is awaited after each answer: a chat's start and end commit with the group
 * commit after the response (src/gateway/chat/chat.ts), and tests look at the log once they have.
 */
export function httpCaller(baseUrl: string, keys: { adminApiKey: string; apiKey: string }, recorded?: () => Promise<void>) {
  const keyOf = (k: string | undefined) => (k === 'admin' ? keys.adminApiKey : k === 'client' ? keys.apiKey : k === 'none' || k === undefined ? undefined : k);
  return async (path: string, init: CallInit = {}): Promise<CallResult> => {
    const key = keyOf(init.key ?? 'admin');
    const headers: Record<string, string> = { ...(init.headers ?? {}) };
    if (key) headers.authorization = `Bearer ${key}`;
    let body: string | undefined;
    if (init.body !== undefined) {
      body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(baseUrl + path, { method: init.method ?? (body ? 'POST' : 'GET'), headers, body, redirect: 'manual' });
    const text = await res.text();
    await recorded?.();
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json };
  };
}

/** The environment of a test gateway: generated keys, empty pool, ephemeral port, fast devnet. */
export function testGatewayEnv(keys: ReturnType<typeof generateKeys>, storageDir: string, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    DEVSHARD_PRIVATE_KEY: keys.privateKey,
    DEVSHARD_API_KEYS: keys.apiKey,
    DEVSHARD_ADMIN_API_KEY: keys.adminApiKey,
    DEVSHARDS_JSON: '[]',
    DEVSHARD_PORT: '0',
    DEVSHARD_STORAGE_DIR: storageDir,
    DEVNET_BLOCK_TIME_MS: '50',
    DEVNET_TOKEN_DELAY_MS: '0',
    // Finalize at once (the deferred-settle tests hold requests open across it); tests of the
    // finalize drain set their own (devshard-protocol-billing.e2e.test.ts, the crash tests' default).
    GATEWAY_FINALIZE_DRAIN_MS: '0',
    LOG_LEVEL: 'info',
    ...overrides,
  };
}

/** The running gateway's store as the SQLite one it is in tests (its synchronous reads). */
export function sqliteStoreOf(store: RunningGateway['store']): SqliteEventStore {
  if (!(store instanceof SqliteEventStore)) throw new Error('test gateways run on the SQLite event store');
  return store;
}

export async function startTestGateway(opts: TestGatewayOptions = {}): Promise<TestGateway> {
  const keys = opts.keys ?? generateKeys();
  const storageDir = opts.storageDir ?? mkdtempSync(join(tmpdir(), 'shardgate-test-'));
  const env = testGatewayEnv(keys, storageDir, { GATEWAY_SHUTDOWN_TIMEOUT_MS: '5000', ...opts.env });
  const { logger, logs } = await capturingLogger(env.LOG_LEVEL!);
  const config = loadConfig({ env, cwd: storageDir });
  const gw = await startGateway(config, { logger, quickStartEscrow: opts.quickStartEscrow ?? false, quickStartRotation: opts.quickStartRotation ?? false, ...(opts.devnet ? { devnet: opts.devnet } : {}) });
  const t: TestGateway = {
    ...gw,
    store: sqliteStoreOf(gw.store),
    keys,
    storageDir,
    env,
    logs,
    call: httpCaller(gw.url, keys, () => gw.ctx.engine.idle()),
    async restart() {
      await gw.stop();
      return startTestGateway({ ...opts, storageDir, keys, quickStartEscrow: false });
    },
  };
  return t;
}

/** A test gateway with one escrow created and registered through the admin API. */
export async function startGatewayWithEscrow(opts: TestGatewayOptions = {}): Promise<{ gw: TestGateway; escrowId: string }> {
  const gw = await startTestGateway(opts);
  return { gw, escrowId: await createEscrowViaApi(gw) };
}

/** Stops the gateway and removes its storage. */
export async function disposeTestGateway(gw: TestGateway | undefined): Promise<void> {
  if (!gw) return;
  await gw.stop();
  rmSync(gw.storageDir, { recursive: true, force: true });
}

/** Creates and registers an escrow through the admin API; answers its id. */
export async function createEscrowViaApi(gw: TestGateway, amount = '10000000000', model = MODEL): Promise<string> {
  const r = await gw.call('/v1/admin/escrows', { body: { amount, model_id: model, private_key: gw.keys.privateKey, chain_id: 'shardgate-devnet', register: true } });
  if (r.status !== 200) throw new Error(`create failed: ${r.status} ${r.text}`);
  return r.json.id as string;
}
