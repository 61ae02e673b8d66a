/**
 * Nobody gets in, nothing leaks.
 *  - an auth matrix over every route /openapi.json lists × key kinds (none, malformed, unknown,
 *    client, admin, admin key in the query string or another scheme): admin routes (including
 *    /v1/debug/*) take only the admin key; chat and models a client or the admin key; status none;
 *  - keys are compared as digests with crypto.timingSafeEqual; the default bind is loopback;
 *  - `shardgate init` writes the config file with mode 600 (and it is not in the storage dir);
 *  - a full scenario (create with private_key in the body, chat, errors with bad keys and bad
 *    private keys, finalize, settle) followed by a scan of every file in the storage directory
 *    (events.sqlite, its WAL, devnet.sqlite), every log line and every response body for the
 *    creator key, the admin key and the client keys, in the forms they could leak in.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeys, loadConfig } from '../../src/config/index.js';
import { runInit } from '../../src/cli/commands/init.js';
import { disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { repoRoot } from '../helpers/store-dist.js';

let gw: TestGateway;
const extraClient = generateKeys().apiKey;
const bodies: string[] = [];

type KeyKind = 'none' | 'malformed' | 'unknown' | 'client' | 'client2' | 'admin' | 'admin-basic' | 'admin-query' | 'admin-case';

function authFor(kind: KeyKind): { headers: Record<string, string>; query: string } {
  const k = gw.keys;
  switch (kind) {
    case 'none':
      return { headers: {}, query: '' };
    case 'malformed':
      return { headers: { authorization: 'Bearer' }, query: '' };
    case 'unknown':
      return { headers: { authorization: `Bearer ${generateKeys().adminApiKey}` }, query: '' };
    case 'client':
      return { headers: { authorization: `Bearer ${k.apiKey}` }, query: '' };
    case 'client2':
      return { headers: { authorization: `Bearer ${extraClient}` }, query: '' };
    case 'admin':
      return { headers: { authorization: `Bearer ${k.adminApiKey}` }, query: '' };
    case 'admin-basic':
      return { headers: { authorization: `Basic ${Buffer.from(`admin:${k.adminApiKey}`).toString('base64')}` }, query: '' };
    case 'admin-query':
      return { headers: {}, query: `?api_key=${k.adminApiKey}&key=${k.adminApiKey}` };
    case 'admin-case':
      return { headers: { authorization: `Bearer ${k.adminApiKey.toUpperCase()}` }, query: '' };
  }
}

async function send(method: string, path: string, kind: KeyKind, body?: unknown) {
  const a = authFor(kind);
  const headers: Record<string, string> = { ...a.headers };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(gw.url + path + a.query, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), redirect: 'manual' });
  // A live event stream (the console's feed) never ends: its status and headers are the answer.
  if (res.ok && res.headers.get('content-type')?.startsWith('text/event-stream')) {
    await res.body?.cancel();
    return { status: res.status, text: '', json: undefined };
  }
  const text = await res.text();
  bodies.push(text, JSON.stringify([...res.headers]));
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, text, json };
}

describe('secrets and auth', () => {
  beforeAll(async () => {
    const keys = generateKeys();
    gw = await startTestGateway({ keys, env: { LOG_LEVEL: 'debug', DEVSHARD_API_KEYS: `${keys.apiKey}, ${extraClient}` } });
  });
  afterAll(() => disposeTestGateway(gw));

  it('auth matrix over every documented route', async () => {
    const spec = (await send('GET', '/openapi.json', 'none')).json;
    const rows: string[] = [];
    for (const [path, ops] of Object.entries(spec.paths as Record<string, Record<string, { security?: Record<string, unknown>[] }>>)) {
      for (const [method, op] of Object.entries(ops)) {
        const schemes = (op.security ?? []).flatMap((s) => Object.keys(s));
        const url = path.replace('{id}', '424242');
        const body = method === 'get' ? undefined : {};
        for (const kind of ['none', 'malformed', 'unknown', 'client', 'client2', 'admin', 'admin-basic', 'admin-query', 'admin-case'] as KeyKind[]) {
          const r = await send(method.toUpperCase(), url, kind, body);
          const isAdmin = kind === 'admin';
          const isClient = kind === 'client' || kind === 'client2';
          const allowed = schemes.length === 0 || (isAdmin && schemes.includes('adminKey')) || (isClient && schemes.includes('clientKey'));
          rows.push(`${method} ${path} ${kind} -> ${r.status}`);
          if (allowed) expect(r.status, `${method} ${path} with ${kind}`).not.toBe(401);
          else {
            expect(r.status, `${method} ${path} with ${kind}: ${r.text}`).toBe(401);
            expect(r.json.error).toMatchObject({ type: expect.any(String), message: expect.any(String) });
          }
        }
      }
    }
    // the admin-only routes the spec names
    expect(rows.filter((r) => /^get \/v1\/debug\/rotation (client|none|unknown)/.test(r)).every((r) => r.endsWith('401'))).toBe(true);
    expect(rows.some((r) => r === 'get /v1/debug/rotation admin -> 200')).toBe(true);
    expect(rows.filter((r) => r.startsWith('get /v1/status')).every((r) => r.endsWith('200'))).toBe(true);
    expect(rows.length).toBeGreaterThan(150);
  });

  it('keys are compared in constant time; the default bind is loopback', () => {
    const src = readFileSync(join(repoRoot, 'src/http/auth.ts'), 'utf8');
    expect(src).toMatch(/timingSafeEqual\(digest, admin\)/);
    expect(src).not.toMatch(/token === (?!''|null)|=== token/); // only emptiness checks, never a key comparison
    const cfg = loadConfig({ env: { DEVSHARDS_JSON: '[]', DEVSHARD_STORAGE_DIR: tmpdir() }, cwd: tmpdir() });
    expect(cfg.server.host).toBe('127.0.0.1');
    expect(new URL(gw.url).hostname).toBe('127.0.0.1');
  });

  it('shardgate init writes the config file with mode 600', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'shardgate-init-'));
    try {
      const file = join(dir, 'shardgate.env');
      const out: string[] = [];
      await runInit({ file }, (l) => out.push(l));
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const content = readFileSync(file, 'utf8');
      const admin = /DEVSHARD_ADMIN_API_KEY=(\S+)/.exec(content)![1]!;
      expect(out.join('\n')).not.toContain(admin);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a full scenario leaves no key in the storage files, the logs or any response', async () => {
    const k = gw.keys;
    const other = generateKeys().privateKey;
    // errors with bad keys
    await send('POST', '/v1/chat/completions', 'unknown', { model: MODEL, messages: [{ role: 'user', content: 'x' }] });
    await send('POST', '/v1/chat/completions', 'client', { model: MODEL, messages: [{ role: 'user', content: 'x' }] }); // admin_only
    await send('POST', '/v1/admin/escrows', 'client', { amount: '10000000000', model_id: MODEL, private_key: k.privateKey, register: true });
    // bad private keys: malformed, not allowlisted, the right key with junk
    for (const pk of [`${k.privateKey}zz`, other, k.privateKey.slice(0, 63), `0x${k.privateKey}`]) {
      const r = await send('POST', '/v1/admin/escrows', 'admin', { amount: '10000000000', model_id: MODEL, private_key: pk, chain_id: 'shardgate-devnet', register: true });
      expect(r.status).toBeGreaterThanOrEqual(400);
    }
    // the happy path
    const created = await send('POST', '/v1/admin/escrows', 'admin', { amount: '10000000000', model_id: MODEL, private_key: k.privateKey, chain_id: 'shardgate-devnet', register: true });
    expect(created.status).toBe(200);
    const id = created.json.id as string;
    expect((await send('POST', '/v1/admin/settings', 'admin', { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }] })).status).toBe(200);
    for (const kind of ['client', 'client2', 'admin'] as KeyKind[]) {
      expect((await send('POST', '/v1/chat/completions', kind, { model: MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 8 })).status).toBe(200);
      expect((await send('POST', '/v1/chat/completions', kind, { model: MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 8, stream: true })).status).toBe(200);
    }
    await send('GET', '/v1/models', 'client');
    await send('GET', `/v1/admin/devshards/${id}`, 'admin');
    await send('GET', `/v1/admin/devshards/${id}/export`, 'admin');
    await send('GET', `/v1/admin/devshards/${id}/timeline`, 'admin');
    await send('GET', '/v1/admin/settings', 'admin');
    await send('GET', '/v1/debug/rotation', 'admin');
    await send('GET', '/metrics', 'admin');
    await send('GET', '/v1/status', 'none');
    expect((await send('POST', `/devshard/${id}/v1/finalize`, 'admin')).status).toBe(200);
    // settle with env var names: a missing one, one holding a non-key, then the right one
    expect((await send('POST', `/v1/admin/devshards/${id}/settle`, 'admin', { private_key_env: 'NO_SUCH_VAR' })).status).toBe(400);
    expect((await send('POST', `/v1/admin/devshards/${id}/settle`, 'admin', { private_key_env: 'DEVSHARD_ADMIN_API_KEY' })).status).toBe(400);
    expect((await send('POST', `/v1/admin/devshards/${id}/settle`, 'admin', { private_key_env: 'DEVSHARD_API_KEYS' })).status).toBe(400);
    const settled = await send('POST', `/v1/admin/devshards/${id}/settle`, 'admin', { private_key_env: 'DEVSHARD_PRIVATE_KEY' });
    expect(settled.status).toBe(200);
    await gw.ctx.projections.checkpoint(gw.store);

    const secrets: Record<string, string[]> = {
      creator: [k.privateKey, k.privateKey.toUpperCase(), Buffer.from(k.privateKey, 'hex').toString('base64'), k.privateKey.slice(8, 40)],
      admin: [k.adminApiKey, k.adminApiKey.slice(9)],
      client: [k.apiKey, k.apiKey.slice(3)],
      client2: [extraClient, extraClient.slice(3)],
      other: [other],
    };
    const scan = (where: string, haystack: Buffer | string) => {
      const text = typeof haystack === 'string' ? haystack : haystack.toString('latin1');
      for (const [name, forms] of Object.entries(secrets)) for (const f of forms) expect(text.includes(f), `${name} key found in ${where}`).toBe(false);
    };
    const files = (dir: string): string[] => readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)]));
    const scanStorage = () => {
      const found = files(gw.storageDir);
      expect(found.some((f) => f.endsWith('events.sqlite'))).toBe(true);
      expect(found.some((f) => f.endsWith('devnet.sqlite'))).toBe(true);
      expect(found.some((f) => /\.env$/.test(f))).toBe(false); // the config file is not in the storage dir
      for (const f of found) scan(f, readFileSync(f));
      return found;
    };
    const live = scanStorage(); // with the WALs as they are
    expect(live.some((f) => f.endsWith('-wal'))).toBe(true);
    expect(gw.logs.length).toBeGreaterThan(20);
    scan('the log output', gw.logs.join('\n'));
    scan('the response bodies and headers', bodies.join('\n'));
    await gw.stop();
    scanStorage(); // after the final checkpoint and WAL merge
    gw = { ...gw, stop: async () => undefined } as TestGateway;
  });
});
