/**
 * The kill switch (disabled state: 308 on every non-admin route, admin routes keep working) and the
 * auth matrix: every route x {no key, client key, admin key} on a real gateway.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * `empty-id`: the spec's `/devshard//v1/finalize` answers 404 with an empty body for every caller
 * (docs/http.md: enforced before auth; there is no escrow behind an empty id to protect).
 */
type Kind = 'admin' | 'client' | 'open' | 'empty-id';
interface Route {
  method: 'GET' | 'POST' | 'DELETE';
  /** The route pattern as OpenAPI lists it. */
  pattern: string;
  kind: Kind;
  /** A concrete path (ids filled in). */
  path?: string;
  /** An event stream that never ends: its status and type are read, then it is closed. */
  stream?: boolean;
  body?: unknown;
  /** Status with the admin key (harmless requests: unknown ids, empty bodies). */
  adminStatus: number;
  /** Status with a client key on a client/open route. */
  clientStatus?: number;
}

const UNKNOWN = '987654321';
const chat = { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 };

/** Every route of the gateway. The test below fails when /openapi.json lists one not here. */
const ROUTES: Route[] = [
  { method: 'GET', pattern: '/v1/status', kind: 'open', adminStatus: 200, clientStatus: 200 },
  { method: 'GET', pattern: '/openapi.json', kind: 'open', adminStatus: 200, clientStatus: 200 },
  { method: 'GET', pattern: '/v1/models', kind: 'client', adminStatus: 200, clientStatus: 200 },
  // The model is admin_only (the default): a client key is refused by access mode, still a 401.
  { method: 'POST', pattern: '/v1/chat/completions', kind: 'client', body: chat, adminStatus: 200, clientStatus: 401 },
  { method: 'GET', pattern: '/metrics', kind: 'admin', adminStatus: 200 },
  { method: 'POST', pattern: '/v1/admin/escrows', kind: 'admin', body: {}, adminStatus: 400 },
  { method: 'GET', pattern: '/v1/admin/settings', kind: 'admin', adminStatus: 200 },
  { method: 'POST', pattern: '/v1/admin/settings', kind: 'admin', body: {}, adminStatus: 200 },
  { method: 'GET', pattern: '/v1/admin/devshards', kind: 'admin', adminStatus: 200 },
  { method: 'POST', pattern: '/v1/admin/devshards', kind: 'admin', body: {}, adminStatus: 400 },
  { method: 'POST', pattern: '/v1/admin/devshards/import', kind: 'admin', body: {}, adminStatus: 400 },
  { method: 'GET', pattern: '/v1/admin/devshards/{id}', kind: 'admin', adminStatus: 404 },
  { method: 'GET', pattern: '/v1/admin/devshards/{id}/export', kind: 'admin', adminStatus: 404 },
  { method: 'GET', pattern: '/v1/admin/devshards/{id}/timeline', kind: 'admin', adminStatus: 404 },
  { method: 'POST', pattern: '/v1/admin/devshards/{id}/activate', kind: 'admin', adminStatus: 404 },
  { method: 'POST', pattern: '/v1/admin/devshards/{id}/settle', kind: 'admin', body: {}, adminStatus: 404 },
  { method: 'POST', pattern: '/v1/admin/devshards/{id}/deactivate', kind: 'admin', adminStatus: 404 },
  { method: 'DELETE', pattern: '/v1/admin/devshards/{id}', kind: 'admin', adminStatus: 404 },
  { method: 'POST', pattern: '/devshard/{id}/v1/finalize', kind: 'admin', adminStatus: 404 },
  { method: 'GET', pattern: '/devshard/{id}/v1/finalize', kind: 'admin', adminStatus: 404 },
  { method: 'POST', pattern: '/devshard//v1/finalize', kind: 'empty-id', adminStatus: 404, clientStatus: 404 },
  // devshardctl's 400 with several devshards (gateway.go handleSingleOnly).
  { method: 'POST', pattern: '/v1/finalize', kind: 'admin', adminStatus: 400 },
  { method: 'GET', pattern: '/v1/finalize', kind: 'admin', adminStatus: 400 },
  { method: 'GET', pattern: '/v1/debug/rotation', kind: 'admin', adminStatus: 200 },
  // The operator console's reads (docs/console.md); `live` is a server-sent event stream.
  { method: 'GET', pattern: '/v1/admin/console/overview', kind: 'admin', adminStatus: 200 },
  { method: 'GET', pattern: '/v1/admin/console/escrows', kind: 'admin', adminStatus: 200 },
  { method: 'GET', pattern: '/v1/admin/console/escrows/{id}/timeline', kind: 'admin', adminStatus: 404 },
  { method: 'GET', pattern: '/v1/admin/console/escrows/{id}/series', kind: 'admin', adminStatus: 404 },
  { method: 'GET', pattern: '/v1/admin/console/escrows/{id}/state', kind: 'admin', adminStatus: 400 },
  { method: 'GET', pattern: '/v1/admin/console/escrows/{id}/verify', kind: 'admin', adminStatus: 404 },
  { method: 'GET', pattern: '/v1/admin/console/rotation', kind: 'admin', adminStatus: 200 },
  { method: 'GET', pattern: '/v1/admin/console/requests/{id}', kind: 'admin', adminStatus: 404 },
  { method: 'GET', pattern: '/v1/admin/console/live', kind: 'admin', adminStatus: 200, stream: true },
];

const pathOf = (r: Route) => r.path ?? r.pattern.replace('{id}', UNKNOWN);

describe('auth matrix and disabled state', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
    // Two escrows: chat works, and /v1/finalize is refused (not exactly one) without side effects.
    await createEscrowViaApi(gw);
    await createEscrowViaApi(gw);
  });
  afterAll(() => disposeTestGateway(gw));

  const send = async (r: Route, key: 'admin' | 'client' | 'none' | string) => {
    if (r.stream && key === 'admin') {
      const res = await fetch(gw.url + pathOf(r), { headers: { authorization: `Bearer ${gw.keys.adminApiKey}` } });
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      await res.body?.cancel();
      return { status: res.status, headers: res.headers, text: '', json: undefined };
    }
    return gw.call(pathOf(r), { method: r.method, key, ...(r.body !== undefined ? { body: r.body } : {}) });
  };

  function expectOpenAi401(res: { status: number; json: any; text: string }, what: string) {
    expect(res.status, `${what}: ${res.text}`).toBe(401);
    expect(Object.keys(res.json), what).toEqual(['error']);
    expect(typeof res.json.error.message, what).toBe('string');
    expect(res.json.error.type, what).toBe('invalid_request_error');
    expect('param' in res.json.error && 'code' in res.json.error, what).toBe(true);
  }

  function expectEmpty404(res: { status: number; text: string }, what: string) {
    expect(res.status, what).toBe(404);
    expect(res.text, what).toBe('');
  }

  it('the matrix covers every route the OpenAPI document lists', async () => {
    const doc = (await gw.call('/openapi.json', { key: 'none' })).json as { paths: Record<string, Record<string, unknown>> };
    const listed = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`));
    const covered = new Set(ROUTES.map((r) => `${r.method} ${r.pattern}`));
    expect(listed.filter((x) => !covered.has(x)), 'routes missing from the auth matrix').toEqual([]);
  });

  it('no key: 401 everywhere except the open routes', async () => {
    for (const r of ROUTES) {
      const what = `${r.method} ${pathOf(r)} without a key`;
      const res = await send(r, 'none');
      if (r.kind === 'open') expect(res.status, what).toBe(200);
      else if (r.kind === 'empty-id') expectEmpty404(res, what);
      else expectOpenAi401(res, what);
    }
  });

  it('a wrong key and a malformed header: 401 like no key', async () => {
    for (const r of ROUTES.filter((x) => x.kind === 'admin' || x.kind === 'client')) {
      expectOpenAi401(await send(r, 'sk-not-a-real-key'), `${r.method} ${pathOf(r)} with a wrong key`);
      const res = await gw.call(pathOf(r), { method: r.method, key: 'none', headers: { authorization: 'Basic abc' }, ...(r.body !== undefined ? { body: r.body } : {}) });
      expectOpenAi401(res, `${r.method} ${pathOf(r)} with Basic auth`);
    }
  });

  it('client key: admin routes 401 naming the admin key; client routes served', async () => {
    for (const r of ROUTES) {
      const what = `${r.method} ${pathOf(r)} with the client key`;
      const res = await send(r, 'client');
      if (r.kind === 'admin') {
        expectOpenAi401(res, what);
        expect(res.json.error.message, what).toContain('requires an admin API key');
      } else if (r.kind === 'empty-id') {
        expectEmpty404(res, what);
      } else {
        expect(res.status, `${what}: ${res.text}`).toBe(r.clientStatus);
      }
    }
    // The chat 401 is the access-mode refusal (admin_only model).
    const refused = await send(ROUTES.find((r) => r.pattern === '/v1/chat/completions')!, 'client');
    expect(refused.json.error.message).toContain('requires an admin API key');
  });

  it('admin key: every route answers (never 401, never 5xx)', async () => {
    for (const r of ROUTES) {
      const what = `${r.method} ${pathOf(r)} with the admin key`;
      const res = await send(r, 'admin');
      expect(res.status, `${what}: ${res.text}`).toBe(r.adminStatus);
      if (r.pattern !== '/devshard//v1/finalize' && r.pattern !== '/metrics' && res.status >= 400) {
        expect(Object.keys(res.json.error).sort(), what).toEqual(['code', 'message', 'param', 'type']);
      }
    }
  });

  describe('disabled state', () => {
    const NEW_URL = 'https://gateway.example.org/v2';
    const MESSAGE = 'Moved to the new gateway.';

    it('on: every non-admin route answers 308 with Location and {status, message, new_url}', async () => {
      const on = await gw.call('/v1/admin/settings', { body: { disabled: { enabled: true, message: MESSAGE, new_url: NEW_URL } } });
      expect(on.status, on.text).toBe(200);
      expect(on.json.disabled).toEqual({ enabled: true, message: MESSAGE, new_url: NEW_URL });
      const nonAdmin = ROUTES.filter((r) => (r.kind === 'client' || r.kind === 'open') && r.pattern !== '/openapi.json');
      expect(nonAdmin.length).toBeGreaterThanOrEqual(3);
      for (const r of nonAdmin) {
        for (const key of ['none', 'client', 'admin'] as const) {
          const what = `${r.method} ${pathOf(r)} (${key}) while disabled`;
          const res = await send(r, key);
          expect(res.status, `${what}: ${res.text}`).toBe(308);
          expect(res.headers.get('location'), what).toBe(NEW_URL);
          expect(res.json, what).toEqual({ status: 'disabled', message: MESSAGE, new_url: NEW_URL });
        }
      }
      // Unknown paths are not admin routes: redirected too.
      expect((await gw.call('/v1/embeddings', { key: 'client', body: {} })).status).toBe(308);
    });

    it('on: admin routes keep working', async () => {
      for (const r of ROUTES.filter((x) => x.kind === 'admin' || x.kind === 'empty-id')) {
        const what = `${r.method} ${pathOf(r)} while disabled`;
        const res = await send(r, 'admin');
        expect(res.status, `${what}: ${res.text}`).toBe(r.adminStatus);
        // And they still refuse strangers with 401, not 308.
        expect((await send(r, 'none')).status, what).toBe(r.kind === 'empty-id' ? 404 : 401);
      }
      // /openapi.json is not traffic: served while disabled (docs/http.md).
      expect((await gw.call('/openapi.json', { key: 'none' })).status).toBe(200);
      expect((await gw.call('/v1/admin/settings')).json.disabled.enabled).toBe(true);
    });

    it('off: traffic is served again', async () => {
      const off = await gw.call('/v1/admin/settings', { body: { disabled: { enabled: false } } });
      expect(off.status).toBe(200);
      // A partial merge: the message and new_url are kept for the next time.
      expect(off.json.disabled).toEqual({ enabled: false, message: MESSAGE, new_url: NEW_URL });
      const r = await gw.call('/v1/chat/completions', { body: chat });
      expect(r.status, r.text).toBe(200);
      expect((await gw.call('/v1/models', { key: 'client' })).status).toBe(200);
      expect((await gw.call('/v1/status', { key: 'none' })).status).toBe(200);
    });
  });
});
