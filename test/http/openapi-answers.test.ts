/**
 * Issue 38 item 8: /openapi.json describes the answers. Every operation documents a 2xx with a real
 * body schema and the error statuses it can answer (the OpenAI-style `Error` component); and those
 * docs never change what is served: the routes declare no fastify `response` schema (which would make
 * fast-json-stringify drop undocumented members and coerce types), and the same routes with their
 * `answers` stripped answer byte-identical bodies.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpApp } from '../../src/http/app.js';
import { createLogger } from '../../src/http/logger.js';
import { createGatewayMetrics } from '../../src/http/metrics.js';
import { registerRoutes } from '../../src/http/routes/index.js';
import type { GatewayPort } from '../../src/gateway/port.js';
import { disposeTestGateway, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { ADMIN_KEY, CLIENT_KEY, captureLogs } from './helpers.js';

type Schema = Record<string, unknown>;
interface Media {
  schema?: Schema;
}
interface Response {
  description?: string;
  content?: Record<string, Media>;
  headers?: Record<string, unknown>;
}
interface Operation {
  security?: unknown[];
  parameters?: { in: string; name: string }[];
  requestBody?: unknown;
  responses?: Record<string, Response>;
}
interface OpenApiDoc {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
}

const ERROR_REF = '#/components/schemas/Error';

function operations(doc: OpenApiDoc): { id: string; path: string; method: string; op: Operation }[] {
  return Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ id: `${method.toUpperCase()} ${path}`, path, method, op })));
}

/** The schema a $ref names (one level), or the schema itself. */
function deref(doc: OpenApiDoc, schema: Schema | undefined): Schema | undefined {
  const r = schema?.$ref;
  if (typeof r !== 'string') return schema;
  expect(r.startsWith('#/components/schemas/'), `non-local $ref ${r}`).toBe(true);
  return doc.components.schemas[r.slice('#/components/schemas/'.length)];
}

/** A body schema says something: a type, members, or a combination of such schemas. */
function isReal(doc: OpenApiDoc, schema: Schema | undefined, depth = 0): boolean {
  const s = deref(doc, schema);
  if (!s || depth > 5) return false;
  if (Array.isArray(s.allOf) || Array.isArray(s.anyOf) || Array.isArray(s.oneOf)) {
    return ((s.allOf ?? s.anyOf ?? s.oneOf) as Schema[]).every((x) => isReal(doc, x, depth + 1));
  }
  if (s.type === 'object') return typeof s.properties === 'object' && Object.keys(s.properties as object).length > 0;
  return typeof s.type === 'string' || Array.isArray(s.type);
}

/** Every `$ref` anywhere in the document. */
function refs(value: unknown, out: string[] = []): string[] {
  if (Array.isArray(value)) value.forEach((v) => refs(v, out));
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else refs(v, out);
    }
  }
  return out;
}

describe('/openapi.json documents every answer', () => {
  let gw: TestGateway;
  let doc: OpenApiDoc;
  beforeAll(async () => {
    gw = await startTestGateway();
    const res = await gw.call('/openapi.json', { key: 'none' });
    expect(res.status).toBe(200);
    doc = res.json as OpenApiDoc;
  });
  afterAll(() => disposeTestGateway(gw));

  it('has the OpenAI-style error body as a shared component, and every $ref resolves', () => {
    const error = doc.components.schemas.Error as { required: string[]; properties: { error: { required: string[]; properties: Record<string, unknown> } } };
    expect(error.required).toEqual(['error']);
    expect(error.properties.error.required).toEqual(['message', 'type', 'param', 'code']);
    expect(Object.keys(error.properties.error.properties).sort()).toEqual(['code', 'message', 'param', 'type']);
    const unresolved = refs(doc).filter((r) => !r.startsWith('#/components/schemas/') || !(r.slice('#/components/schemas/'.length) in doc.components.schemas));
    expect(unresolved).toEqual([]);
  });

  it('every operation has a 2xx answer with a real body schema, and its error statuses with the Error body', () => {
    const ops = operations(doc);
    expect(ops.length).toBeGreaterThanOrEqual(20);
    const problems: string[] = [];
    for (const { id, op } of ops) {
      const responses = op.responses ?? {};
      const success = Object.entries(responses).filter(([status]) => /^2\d\d$/.test(status));
      if (success.length === 0) problems.push(`${id}: no 2xx response`);
      for (const [status, r] of success) {
        const media = Object.entries(r.content ?? {});
        if (media.length === 0) problems.push(`${id} ${status}: no content`);
        for (const [type, m] of media) if (!isReal(doc, m.schema)) problems.push(`${id} ${status} ${type}: no real schema`);
      }
      const need = (status: string, why: string) => {
        if (!responses[status]) problems.push(`${id}: no ${status} (${why})`);
      };
      if ((op.security ?? []).length > 0) need('401', 'authenticated');
      if (op.requestBody) for (const s of ['400', '413', '415']) need(s, 'takes a body');
      if ((op.parameters ?? []).some((p) => p.in === 'path')) for (const s of ['400', '404']) need(s, 'path parameter');
      need('500', 'every operation');
      need('default', 'every operation');
      for (const [status, r] of Object.entries(responses)) {
        if (!/^[45]\d\d$/.test(status) && status !== 'default') continue;
        if (r.content?.['application/json']?.schema?.$ref !== ERROR_REF) problems.push(`${id} ${status}: not the Error body`);
        if (!r.description || r.description === 'Default Response') problems.push(`${id} ${status}: no description`);
      }
      if (responses['401'] && !responses['401'].headers?.['www-authenticate']) problems.push(`${id} 401: no WWW-Authenticate header`);
    }
    expect(problems).toEqual([]);
  });

  it('chat documents the completion, the streamed chunk and its statuses (400 401 404 413 415 429 502 503 504)', () => {
    const chat = doc.paths['/v1/chat/completions']!.post!;
    const ok = chat.responses!['200']!;
    expect(deref(doc, ok.content!['application/json']!.schema)).toBe(doc.components.schemas.ChatCompletion);
    expect(deref(doc, ok.content!['text/event-stream']!.schema)).toBe(doc.components.schemas.ChatCompletionChunk);
    const completion = doc.components.schemas.ChatCompletion as { properties: Record<string, unknown>; additionalProperties: unknown };
    expect(Object.keys(completion.properties)).toEqual(expect.arrayContaining(['id', 'object', 'created', 'model', 'choices', 'usage']));
    expect(completion.additionalProperties).toBe(true);
    for (const s of ['400', '401', '404', '413', '415', '429', '502', '503', '504']) expect(chat.responses![s], s).toBeDefined();
    expect(chat.responses!['429']!.headers?.['retry-after']).toBeDefined();
  });

  it('names the main answers: model list, status, escrow create (200 and 202), devshard view, settlement file, settings', () => {
    const body = (path: string, method: string, status = '200') => deref(doc, doc.paths[path]?.[method]?.responses?.[status]?.content?.['application/json']?.schema);
    const c = doc.components.schemas;
    expect(body('/v1/models', 'get')).toBe(c.ModelList);
    expect(body('/v1/status', 'get')).toBe(c.Status);
    expect(body('/v1/admin/escrows', 'post')).toBe(c.EscrowCreated);
    expect(body('/v1/admin/escrows', 'post', '202')).toBe(c.EscrowCreatePending);
    expect(body('/v1/admin/devshards/{id}', 'get')).toBe(c.DevshardView);
    expect(body('/v1/admin/devshards', 'get')).toBe(c.DevshardList);
    expect(body('/devshard/{id}/v1/finalize', 'post')).toBe(c.SettlementDocument);
    expect(body('/devshard/{id}/v1/finalize', 'get')).toBe(c.SettlementDocument);
    expect(body('/v1/admin/settings', 'get')).toBe(c.Settings);
    expect(body('/v1/admin/settings', 'post')).toBe(c.Settings);
    expect(body('/v1/admin/devshards/{id}/settle', 'post', '202')).toBe(c.SettleAnswer);
    // Partial on purpose: more members are served than documented.
    for (const name of ['ModelList', 'Status', 'EscrowCreated', 'DevshardView', 'SettlementDocument', 'Settings']) expect(c[name]!.additionalProperties, name).toBe(true);
    // Route-specific refusals (docs/http.md "Status codes").
    expect(doc.paths['/v1/admin/devshards/{id}']!.delete!.responses!['409']!.description).toContain('not_settled');
    expect(doc.paths['/devshard/{id}/v1/finalize']!.get!.responses!['409']!.description).toContain('not_finalized');
    expect(doc.paths['/v1/finalize']!.post!.responses!['400']!.description).toContain('not_single_escrow');
    expect(doc.paths['/v1/admin/escrows']!.post!.responses!['403']!.description).toContain('not_allowlisted');
    expect(doc.paths['/v1/admin/escrows']!.post!.responses!['422']).toBeDefined();
  });

  it('the routes behind the kill switch document its 308; the admin routes do not', () => {
    for (const [path, method] of [
      ['/v1/chat/completions', 'post'],
      ['/v1/models', 'get'],
      ['/v1/status', 'get'],
    ] as const) {
      const r = doc.paths[path]![method]!.responses!['308'];
      expect(r, `${method} ${path}`).toBeDefined();
      expect(deref(doc, r!.content!['application/json']!.schema)).toBe(doc.components.schemas.Disabled);
    }
    expect(doc.paths['/v1/admin/settings']!.get!.responses!['308']).toBeUndefined();
    expect(doc.paths['/metrics']!.get!.responses!['308']).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------
// Serialization is unchanged by the docs.

const MODEL = 'm/one';
/** Answers that break the documented schemas on purpose: undocumented members (nested too) and wrong types. */
const FIXTURES = {
  status: () => ({
    status: 'ok',
    mode: 'pool',
    runtimes: '1', // documented integer: fast-json-stringify would make it 1
    model_runtimes: [{ model: MODEL, mode: 'pool', escrows: 1, routable: 1, undocumented: [1, { x: null }] }],
    devshards: [{ id: '7', model: MODEL, active: true, phase: 'active', nonce: 3, active_requests: 0, hosts_applied: [{ host: 'h', nonce: 2 }], balance: 1.5 }],
    limiter: { active_requests: 0, max_concurrent_requests: 512, our_own_member: 'kept' },
    capacity: { models: { [MODEL]: { active_devshards: 1, routable_devshard_ids: ['7'], in_flight: 0, access_enabled: true } } },
    instance: 'gw-a',
    escrow_id: 7, // documented string
    config: { token_price: 1000, refusal_timeout: 60 },
    blocks_until_prune: null,
  }),
  view: (id: string) => ({ escrow_id: id, model_id: MODEL, state: 'active', nonce: '4', settled: false, epoch_index: '3', amount: 10, chain_settlement: { tx_hash: 'T', spent_breakdown: { a: '1' } }, slots: [{ slot_id: 0, host: 'h', url: 'u', extra: true }] }),
  list: () => ({ object: 'list', data: [FIXTURES.view('7')], devshards: [{ id: '7', model: MODEL, active: true, private_key_env: null, runtime: { id: '7', prune: { prune_epoch: 2 } } }], settings: FIXTURES.settings(), limiter: {}, capacity: { models: {} }, extra: 1 }),
  settings: () => ({ default_request_max_tokens: 3072, request_max_tokens_cap: 4096, model_limits: [{ model_id: MODEL, access_mode: 'api_key', note: 'x' }], disabled: { enabled: false, message: '', new_url: '' }, escrow_rotation: { enabled: false, pre_poc_blocks: 300, models: [] }, future_member: { a: [1, 2] } }),
  settlement: (id: string) => ({ escrow_id: id, version: 'v4.1', state_root: 'AAA=', nonce: 6, fees: '12000', rest_hash: 'B=', host_stats: [{ slot_id: 0, missed: 0, cost: 1, extra: 'e' }], signatures: [{ slot_id: 0, signature: 'S' }], our_extra: null }),
  rotation: () => ({ enabled: false, chain: { block_height: 10, poc_end_height: 60 }, settings: {}, history: [{ a: 1 }], latest: [], latest_by_model: { [MODEL]: { completed: true, prune_risk: null } } }),
  removed: (id: string) => ({ id, deleted: true, escrow_id: id, removed: true, extra: 'x' }),
  settled: (id: string) => ({ status: 'settled', id, escrow_id: Number(id), active: false, tx_hash: 'T', settler: 'c', refund: '5', already: false, spent_breakdown: { fees: '1' } }),
  completion: () => ({ id: 'c-1', object: 'chat.completion', created: 1, model: 'host-model', system_fingerprint: 'fp', choices: [{ index: 0, message: { role: 'assistant', content: 'hi', reasoning_content: 'r' }, finish_reason: 'stop', extra: 1 }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2, prompt_tokens_details: { cached_tokens: 0 } }, host_extra: { a: 1 } }),
};

/** A GatewayPort stand-in answering the fixtures (only what the routes under test call). */
function stubPort(): GatewayPort {
  const port: Partial<GatewayPort> = {
    servedModels: () => [MODEL],
    isServedModel: (m) => m === MODEL,
    chatSettings: () => FIXTURES.settings() as never,
    openChat: async () => ({ escrowId: '7', nonce: 1, result: { kind: 'completion', completion: FIXTURES.completion() } as never, end: () => undefined, record: async () => undefined }),
    status: () => FIXTURES.status() as never,
    devshardList: () => FIXTURES.list() as never,
    devshard: (id) => FIXTURES.view(id) as never,
    settings: () => FIXTURES.settings() as never,
    changeSettings: async () => FIXTURES.settings() as never,
    finalizedEscrow: (id) => FIXTURES.settlement(id) as never,
    finalizeEscrow: async (id) => FIXTURES.settlement(id) as never,
    rotationDebug: () => FIXTURES.rotation() as never,
    removeEscrow: async (id) => FIXTURES.removed(id) as never,
    deactivateEscrow: async (id) => FIXTURES.view(id) as never,
    settleEscrow: async (id) => FIXTURES.settled(id) as never,
    disabled: () => ({ enabled: false, message: '', new_url: '' }),
    liveEscrows: () => [],
    admission: () => ({ active_requests: 0, input_tokens_in_flight: 0 }) as never,
    storagePath: () => '/data/events.sqlite',
  };
  return port as GatewayPort;
}

/** The real routes over the stub; `stripDocs` removes every route's `answers` before fastify sees it. */
function buildApp(opts: { stripDocs: boolean; seen?: { url: string; method: unknown; response: unknown }[] }): FastifyInstance {
  const app = createHttpApp({ logger: createLogger({ level: 'silent', stream: captureLogs().stream }) });
  app.addHook('onRoute', (route) => {
    const schema = route.schema as Record<string, unknown> | undefined;
    opts.seen?.push({ url: route.url, method: route.method, response: schema?.response });
    if (opts.stripDocs && schema && 'answers' in schema) {
      const { answers: _answers, ...rest } = schema;
      route.schema = rest;
    }
  });
  registerRoutes(app, stubPort(), { keys: { adminApiKey: ADMIN_KEY, apiKeys: [CLIENT_KEY] }, metrics: createGatewayMetrics() });
  return app;
}

const admin = { authorization: `Bearer ${ADMIN_KEY}` };
/** Representative routes, each with the answer it must serve exactly as JSON.stringify writes it. */
const REQUESTS: { method: 'GET' | 'POST' | 'DELETE'; url: string; body?: unknown; expected?: unknown }[] = [
  { method: 'GET', url: '/v1/status', expected: FIXTURES.status() },
  { method: 'GET', url: '/v1/models', expected: undefined },
  { method: 'POST', url: '/v1/chat/completions', body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }] }, expected: { ...FIXTURES.completion(), model: MODEL } },
  { method: 'GET', url: '/v1/admin/devshards', expected: FIXTURES.list() },
  { method: 'GET', url: '/v1/admin/devshards/7', expected: FIXTURES.view('7') },
  { method: 'POST', url: '/v1/admin/devshards/7/deactivate', expected: FIXTURES.view('7') },
  { method: 'GET', url: '/v1/admin/settings', expected: FIXTURES.settings() },
  { method: 'POST', url: '/v1/admin/settings', body: {}, expected: FIXTURES.settings() },
  { method: 'GET', url: '/devshard/7/v1/finalize', expected: FIXTURES.settlement('7') },
  { method: 'POST', url: '/devshard/7/v1/finalize', expected: FIXTURES.settlement('7') },
  { method: 'GET', url: '/v1/debug/rotation', expected: FIXTURES.rotation() },
  { method: 'POST', url: '/v1/admin/devshards/7/settle', expected: FIXTURES.settled('7') },
  { method: 'DELETE', url: '/v1/admin/devshards/7', expected: FIXTURES.removed('7') },
  // Error answers too.
  { method: 'GET', url: '/v1/admin/devshards/x' },
  { method: 'POST', url: '/v1/admin/settings', body: { nope: 1 } },
];

describe('the documented answers do not change what is served', () => {
  const seen: { url: string; method: unknown; response: unknown }[] = [];
  let documented: FastifyInstance;
  let stripped: FastifyInstance;
  beforeAll(async () => {
    documented = buildApp({ stripDocs: false, seen });
    stripped = buildApp({ stripDocs: true });
    await Promise.all([documented.ready(), stripped.ready()]);
  });
  afterAll(async () => {
    await Promise.all([documented.close(), stripped.close()]);
  });

  it('no route declares a fastify response schema (the answers are documentation only)', () => {
    expect(seen.length).toBeGreaterThanOrEqual(20);
    expect(seen.filter((r) => r.response !== undefined).map((r) => `${String(r.method)} ${r.url}`)).toEqual([]);
  });

  it('stripping the docs removes them from /openapi.json (so the comparison below compares something)', async () => {
    const withDocs = (await documented.inject({ method: 'GET', url: '/openapi.json' })).json() as OpenApiDoc;
    const without = (await stripped.inject({ method: 'GET', url: '/openapi.json' })).json() as OpenApiDoc;
    expect(withDocs.paths['/v1/status']!.get!.responses!['200']!.content).toBeDefined();
    expect(without.paths['/v1/status']!.get!.responses!['200']?.content).toBeUndefined();
  });

  it('representative routes answer byte-identical bodies with and without the docs, undocumented members and types kept', async () => {
    for (const r of REQUESTS) {
      const init = { method: r.method, url: r.url, headers: admin, ...(r.body !== undefined ? { payload: r.body as object } : {}) };
      const [a, b] = await Promise.all([documented.inject(init), stripped.inject(init)]);
      const what = `${r.method} ${r.url}`;
      expect(a.statusCode, what).toBe(b.statusCode);
      expect(a.headers['content-type'], what).toBe(b.headers['content-type']);
      expect(a.body, what).toBe(b.body);
      if (r.expected !== undefined) {
        expect(a.statusCode, what).toBe(200);
        // What JSON.stringify writes: every undocumented member, every type as given.
        expect(a.body, what).toBe(JSON.stringify(r.expected));
      }
    }
    const status = JSON.parse((await documented.inject({ method: 'GET', url: '/v1/status' })).body) as Record<string, unknown>;
    expect(status.runtimes).toBe('1');
    expect(status.escrow_id).toBe(7);
    expect((status.limiter as Record<string, unknown>).our_own_member).toBe('kept');
  });
});
