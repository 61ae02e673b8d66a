/**
 * GET /metrics (admin) is valid Prometheus text exposition with the chat counters after chats;
 * GET /openapi.json describes every route the gateway serves.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A strict reader of the text format (0.0.4): fails on any line it does not understand. */
function parsePrometheus(text: string): { samples: Sample[]; types: Map<string, string> } {
  const types = new Map<string, string>();
  const helps = new Set<string>();
  const samples: Sample[] = [];
  const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
  const sampleRe = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (-?(?:[0-9.]+(?:e[+-]?[0-9]+)?|\\+Inf|-Inf|NaN|Nan))(?: -?[0-9]+)?$`);
  const labelRe = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\[\\"n])*)"(?:,|$)/gy;
  expect(text.endsWith('\n')).toBe(true);
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('# HELP ')) {
      const name = line.split(' ')[2]!;
      expect(helps.has(name), `duplicate HELP ${name}`).toBe(false);
      helps.add(name);
      continue;
    }
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      expect(['counter', 'gauge', 'histogram', 'summary', 'untyped']).toContain(type);
      expect(types.has(name!), `duplicate TYPE ${name}`).toBe(false);
      types.set(name!, type!);
      continue;
    }
    expect(line.startsWith('#'), `unexpected comment: ${line}`).toBe(false);
    const m = sampleRe.exec(line);
    expect(m, `not a sample line: ${line}`).not.toBeNull();
    const labels: Record<string, string> = {};
    if (m![2]) {
      labelRe.lastIndex = 0;
      let consumed = 0;
      for (let lm = labelRe.exec(m![2]); lm; lm = labelRe.exec(m![2])) {
        labels[lm[1]!] = lm[2]!;
        consumed = labelRe.lastIndex;
      }
      expect(consumed, `bad labels: ${line}`).toBe(m![2].length);
    }
    const name = m![1]!;
    const family = name.replace(/_(bucket|sum|count)$/, '');
    expect(types.has(name) || types.has(family), `sample without TYPE: ${line}`).toBe(true);
    samples.push({ name, labels, value: Number(m![3]) });
  }
  return { samples, types };
}

describe('metrics and OpenAPI', () => {
  let gw: TestGateway;
  let escrowId: string;
  beforeAll(async () => ({ gw, escrowId } = await startGatewayWithEscrow()));
  afterAll(() => disposeTestGateway(gw));

  it('GET /metrics is Prometheus text with chat counters, tokens, latency, errors and escrow gauges', async () => {
    let prompt = 0;
    let completion = 0;
    for (let i = 0; i < 3; i++) {
      const r = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: `metrics ${i}` }], max_tokens: 10 } });
      expect(r.status).toBe(200);
      prompt += r.json.usage.prompt_tokens;
      completion += r.json.usage.completion_tokens;
    }
    // One error too: a client key on the admin_only model.
    expect((await gw.call('/v1/chat/completions', { key: 'client', body: { model: MODEL, messages: [{ role: 'user', content: 'x' }] } })).status).toBe(401);

    const res = await gw.call('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const { samples, types } = parsePrometheus(res.text);
    const find = (name: string, labels: Record<string, string>) => samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));

    expect(types.get('shardgate_chat_requests_total')).toBe('counter');
    expect(find('shardgate_chat_requests_total', { model: MODEL, status: '200' })?.value).toBe(3);
    expect(find('shardgate_tokens_total', { model: MODEL, kind: 'prompt' })?.value).toBe(prompt);
    expect(find('shardgate_tokens_total', { model: MODEL, kind: 'completion' })?.value).toBe(completion);
    expect(types.get('shardgate_chat_latency_seconds')).toBe('histogram');
    // Latency is observed for every answered chat request (the 3 served and the refused one).
    expect(find('shardgate_chat_requests_total', { model: MODEL, status: '401' })?.value).toBe(1);
    expect(find('shardgate_errors_total', { model: MODEL, code: 'model_admin_only' })?.value).toBe(1);
    expect(find('shardgate_chat_latency_seconds_count', { model: MODEL, stream: 'false' })?.value).toBe(4);
    expect(find('shardgate_chat_latency_seconds_bucket', { model: MODEL, stream: 'false', le: '+Inf' })?.value).toBe(4);
    const sum = find('shardgate_chat_latency_seconds_sum', { model: MODEL, stream: 'false' })!.value;
    expect(sum).toBeGreaterThan(0);
    expect(sum).toBeLessThan(30);
    expect(find('shardgate_escrow_nonce', { escrow_id: escrowId, model: MODEL })?.value).toBe(3);
    expect(find('shardgate_escrow_in_flight', { escrow_id: escrowId, model: MODEL })?.value).toBe(0);
    const view = (await gw.call(`/v1/admin/devshards/${escrowId}`)).json;
    expect(find('shardgate_escrow_balance', { escrow_id: escrowId, model: MODEL })?.value).toBe(Number(view.usable_balance));
    expect(find('shardgate_http_requests_total', { method: 'POST', route: '/v1/chat/completions', status: '200' })?.value).toBe(3);
    expect(find('shardgate_active_requests', {})?.value).toBe(0);
    // The admin_only refusal is counted as a 401 request (auth/admission errors are visible to operators).
    expect(find('shardgate_http_requests_total', { method: 'POST', route: '/v1/chat/completions', status: '401' })?.value).toBe(1);
  });

  it("a model the gateway does not serve is counted as '(unknown)', never under the client's made-up name", async () => {
    for (const model of ['made-up/one', 'made-up/two']) {
      expect((await gw.call('/v1/chat/completions', { body: { model, messages: [{ role: 'user', content: 'x' }] } })).status).toBe(404);
    }
    const text = (await gw.call('/metrics')).text;
    expect(text).not.toContain('made-up');
    const { samples } = parsePrometheus(text);
    expect(samples.find((s) => s.name === 'shardgate_errors_total' && s.labels.model === '(unknown)' && s.labels.code === 'model_not_found')?.value).toBe(2);
    expect(samples.find((s) => s.name === 'shardgate_chat_requests_total' && s.labels.model === '(unknown)' && s.labels.status === '404')?.value).toBe(2);
    // Node's process metrics are served beside ours.
    expect(samples.some((s) => s.name === 'process_resident_memory_bytes')).toBe(true);
  });

  it('GET /openapi.json is an OpenAPI 3 document listing every route', async () => {
    const res = await gw.call('/openapi.json', { key: 'none' });
    expect(res.status).toBe(200);
    const doc = res.json as { openapi: string; info: { title: string; version: string }; paths: Record<string, Record<string, { summary?: string; responses?: unknown }>> };
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.info.title).toBeTruthy();
    const listed = new Set(Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`)));
    const expected = [
      'POST /v1/chat/completions',
      'GET /v1/models',
      'GET /v1/status',
      'GET /metrics',
      'POST /v1/admin/escrows',
      'GET /v1/admin/settings',
      'POST /v1/admin/settings',
      'GET /v1/admin/devshards',
      'POST /v1/admin/devshards',
      'POST /v1/admin/devshards/import',
      'GET /v1/admin/devshards/{id}',
      'GET /v1/admin/devshards/{id}/export',
      'POST /v1/admin/devshards/{id}/activate',
      'POST /v1/admin/devshards/{id}/settle',
      'POST /v1/admin/devshards/{id}/deactivate',
      'DELETE /v1/admin/devshards/{id}',
      'POST /devshard/{id}/v1/finalize',
      'POST /v1/finalize',
      'GET /v1/finalize',
      'GET /devshard/{id}/v1/finalize',
      'GET /v1/debug/rotation',
    ];
    expect(expected.filter((e) => !listed.has(e))).toEqual([]);
    // Every route fastify serves (but the docs themselves, /openapi.json and Swagger UI's /docs, the index at /, HEAD twins and the
    // hidden empty-id finalize) is in the document.
    const routes = routeList(gw);
    for (const r of routes) {
      // (The console's page and static files are not API either: docs/console.md.)
      if (r.method === 'HEAD' || r.url === '/' || r.url === '/openapi.json' || r.url === '/docs' || r.url.startsWith('/docs/') || r.url === '/console' || r.url.startsWith('/console/') || r.url === '/devshard//v1/finalize') continue;
      const path = r.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
      expect(listed.has(`${r.method} ${path}`), `${r.method} ${path} missing from /openapi.json`).toBe(true);
    }
    expect(routes.length).toBeGreaterThanOrEqual(expected.length);
    // Bodies are described where a route takes one.
    const chat = doc.paths['/v1/chat/completions']!.post as { requestBody?: { content?: Record<string, { schema?: { required?: string[] } }> } };
    expect(chat.requestBody?.content?.['application/json']?.schema?.required).toEqual(expect.arrayContaining(['model', 'messages']));
  });
});

describe('Swagger UI', () => {
  let gw: TestGateway;
  beforeAll(async () => ({ gw } = await startGatewayWithEscrow()));
  afterAll(() => disposeTestGateway(gw));

  it('GET /docs serves Swagger UI (no key, as devshardctl) over the same document as /openapi.json', async () => {
    const page = await fetch(gw.url + '/docs/', { redirect: 'follow' });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await page.text()).toContain('swagger-ui');
    const viaUi = await gw.call('/docs/json', { key: 'none' });
    expect(viaUi.status).toBe(200);
    expect(viaUi.json).toEqual((await gw.call('/openapi.json', { key: 'none' })).json);
  });

  it('keeps serving while the gateway is disabled (an operator reads the docs during a migration)', async () => {
    expect((await gw.call('/v1/admin/settings', { body: { disabled: { enabled: true, new_url: 'https://new.example' } } })).status).toBe(200);
    expect((await gw.call('/v1/models', { key: 'client' })).status).toBe(308);
    expect((await fetch(gw.url + '/docs/json')).status).toBe(200);
    expect((await gw.call('/v1/admin/settings', { body: { disabled: { enabled: false } } })).status).toBe(200);
  });
});

/** Every route registered on the gateway's fastify instance (from its onRoute-independent table). */
function routeList(gw: TestGateway): { method: string; url: string }[] {
  const out: { method: string; url: string }[] = [];
  const text = gw.app.printRoutes({ commonPrefix: false, includeMeta: false });
  // printRoutes (tree) gives lines like "├── /v1/models (GET, HEAD)"; rebuild full paths from depth.
  const stack: string[] = [];
  for (const raw of text.split('\n')) {
    const m = /^([│ ]*)(?:├── |└── )(\S*)(?: \(([A-Z, ]+)\))?$/.exec(raw);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    stack.length = depth;
    stack[depth] = m[2]!;
    if (m[3]) for (const method of m[3].split(', ')) out.push({ method, url: stack.join('') });
  }
  return out;
}
