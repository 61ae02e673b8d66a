/**
 * Hostile input, generated with fast-check, against every route the gateway documents in
 * /openapi.json: random JSON bodies, near-valid chat bodies, random path ids, random headers
 * (content types, authorization values, request ids). Whatever comes in: never a 5xx, the process
 * keeps serving, and every error is an OpenAI-style JSON body {"error":{"message","type","code"}}.
 * Also: invalid JSON, wrong content types and oversized bodies are refused with 400 / 415 / 413.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BODY_BYTES_DEFAULT } from '../../src/config/index.js';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

let gw: TestGateway;
const routes: { method: string; path: string }[] = [];
let escrowId: string;
const RUNS = 120;

/** Fills `{id}` with a value. */
const fill = (path: string, id: string) => path.replace('{id}', id);

async function send(method: string, path: string, init: { body?: string; headers?: Record<string, string> } = {}) {
  const res = await fetch(gw.url + path, { method: method.toUpperCase(), headers: init.headers, body: init.body, redirect: 'manual', signal: AbortSignal.timeout(15_000) });
  // A live event stream (the console's feed) never ends: its status and type are the answer.
  if (res.ok && res.headers.get('content-type')?.startsWith('text/event-stream')) {
    await res.body?.cancel();
    return { status: res.status, text: '', type: res.headers.get('content-type') ?? '' };
  }
  const text = await res.text();
  return { status: res.status, text, type: res.headers.get('content-type') ?? '' };
}

/** The rules every answer follows. */
function expectSane(r: { status: number; text: string; type: string }, what: string): void {
  expect(r.status, `${what}: ${r.text.slice(0, 300)}`).toBeLessThan(500);
  if (r.status >= 400 && r.text !== '') {
    expect(r.type, what).toMatch(/application\/json/);
    const body = JSON.parse(r.text);
    expect(body.error, what).toMatchObject({ message: expect.any(String), type: expect.any(String) });
    expect('code' in body.error, what).toBe(true);
    expect(r.text, what).not.toMatch(/at [A-Za-z]+ \(|node_modules|\.ts:\d+/); // no stack traces
  }
}

const admin = () => ({ authorization: `Bearer ${gw.keys.adminApiKey}` });
const asciiHeaderValue = fc.string({ unit: fc.constantFrom(...' !#$%&\'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`abcdefghijklmnopqrstuvwxyz{|}~'.split('')), maxLength: 80 });

describe('bad input: no 5xx, no crash, OpenAI-style errors', () => {
  beforeAll(async () => {
    gw = await startTestGateway({ env: { LOG_LEVEL: 'warn' } });
    escrowId = await createEscrowViaApi(gw);
    const spec = (await gw.call('/openapi.json', { key: 'none' })).json;
    for (const [path, ops] of Object.entries(spec.paths as Record<string, Record<string, unknown>>)) for (const method of Object.keys(ops)) routes.push({ method, path });
    expect(routes.length).toBeGreaterThanOrEqual(15);
  });
  afterAll(() => disposeTestGateway(gw));

  it('random JSON bodies on every route (admin key)', { timeout: 60_000 }, async () => {
    // Settings could legitimately switch the gateway off (308s); keep its body random but not that.
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), fc.jsonValue({ maxDepth: 3 }), fc.constantFrom(escrowId, '999999', '0', 'abc'), async (route, value, id) => {
        if (route.path === '/v1/admin/settings' && route.method === 'post' && JSON.stringify(value).includes('disabled')) return;
        const withBody = route.method === 'post' || route.method === 'delete';
        const r = await send(route.method, fill(route.path, id), withBody ? { body: JSON.stringify(value), headers: { ...admin(), 'content-type': 'application/json' } } : { headers: admin() });
        expectSane(r, `${route.method} ${route.path} ${JSON.stringify(value).slice(0, 200)}`);
      }),
      { numRuns: RUNS * 2 },
    );
  });

  it('near-valid chat bodies: 200 or a 4xx naming the problem', { timeout: 60_000 }, async () => {
    const message = fc.record(
      {
        role: fc.oneof(fc.constantFrom('system', 'user', 'assistant', 'tool'), fc.string({ maxLength: 8 })),
        content: fc.oneof(fc.string({ maxLength: 40 }), fc.constant(null), fc.integer(), fc.array(fc.record({ type: fc.constantFrom('text', 'image_url', 'x'), text: fc.string({ maxLength: 10 }) }), { maxLength: 2 })),
        name: fc.string({ maxLength: 10 }),
        tool_call_id: fc.string({ maxLength: 10 }),
      },
      { requiredKeys: ['role'] },
    );
    const chatBody = fc.record(
      {
        model: fc.oneof(fc.constant(MODEL), fc.constant(MODEL.toLowerCase()), fc.string({ maxLength: 20 })),
        messages: fc.oneof(fc.array(message, { maxLength: 3 }), fc.string({ maxLength: 5 })),
        temperature: fc.oneof(fc.double({ min: -5, max: 5, noNaN: true }), fc.string({ maxLength: 3 })),
        top_p: fc.double({ min: -1, max: 2, noNaN: true }),
        max_tokens: fc.oneof(fc.integer({ min: -10, max: 10_000 }), fc.constant(1.5), fc.constant('8')),
        stream: fc.oneof(fc.boolean(), fc.constant('yes')),
        stop: fc.oneof(fc.array(fc.string({ maxLength: 5 }), { maxLength: 5 }), fc.string({ maxLength: 5 }), fc.integer()),
        tool_choice: fc.oneof(fc.constantFrom('auto', 'none', 'required', 'other'), fc.record({ type: fc.constant('function') })),
        tools: fc.array(fc.record({ type: fc.constantFrom('function', 'code_interpreter'), function: fc.record({ name: fc.string({ maxLength: 8 }), parameters: fc.jsonValue({ maxDepth: 2 }) }, { requiredKeys: [] }) }), { maxLength: 2 }),
        presence_penalty: fc.double({ min: -4, max: 4, noNaN: true }),
        n: fc.integer({ min: -1, max: 3 }),
      },
      { requiredKeys: ['model', 'messages'] },
    );
    const validChat = fc.record({
      model: fc.constant(MODEL),
      messages: fc.array(fc.record({ role: fc.constantFrom('system', 'user', 'assistant'), content: fc.string({ maxLength: 40 }) }), { minLength: 1, maxLength: 3 }),
      temperature: fc.double({ min: 0, max: 2, noNaN: true }),
      max_tokens: fc.integer({ min: 1, max: 16 }),
      stream: fc.boolean(),
    });
    await createEscrowViaApi(gw); // the random bodies above may have finalized the first one
    await gw.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }] } });
    let ok = 0;
    await fc.assert(
      fc.asyncProperty(fc.oneof({ arbitrary: validChat, weight: 1 }, { arbitrary: chatBody, weight: 3 }) as fc.Arbitrary<Record<string, unknown>>, fc.constantFrom('admin', 'client'), async (b, key) => {
        const r = await send('post', '/v1/chat/completions', {
          body: JSON.stringify({ ...b, max_tokens: typeof b.max_tokens === 'number' && b.max_tokens > 0 ? Math.min(b.max_tokens, 16) : b.max_tokens }),
          headers: { authorization: `Bearer ${key === 'admin' ? gw.keys.adminApiKey : gw.keys.apiKey}`, 'content-type': 'application/json' },
        });
        expectSane(r, JSON.stringify(b).slice(0, 300));
        if (r.status === 200) ok++;
      }),
      { numRuns: RUNS },
    );
    expect(ok).toBeGreaterThan(0); // some of them are valid and served
  });

  it('random ids and path segments', { timeout: 60_000 }, async () => {
    const idRoutes = routes.filter((r) => r.path.includes('{id}'));
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...idRoutes), fc.oneof(fc.string({ maxLength: 30 }), fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String), fc.constantFrom('..', '%00', '1e3', '0x1', ' 1', '1/../../x', '-1')), async (route, id) => {
        const path = fill(route.path, encodeURIComponent(id));
        const r = await send(route.method, path, route.method === 'get' ? { headers: admin() } : { headers: { ...admin(), 'content-type': 'application/json' }, body: '{}' });
        if (path.startsWith('/devshard//')) expect(r.status).toBe(404);
        expectSane(r, `${route.method} ${path}`);
      }),
      { numRuns: RUNS },
    );
    // unknown paths: JSON 404s
    await fc.assert(
      fc.asyncProperty(fc.webPath(), fc.constantFrom('get', 'post', 'put', 'patch', 'delete', 'options'), async (p, method) => {
        const r = await send(method, p.startsWith('/') ? p : `/${p}`, { headers: admin() });
        expectSane(r, `${method} ${p}`);
      }),
      { numRuns: RUNS },
    );
  });

  it('random headers: content types, authorization values, request ids', { timeout: 60_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...routes),
        fc.oneof(asciiHeaderValue, fc.constantFrom('application/json', 'application/json; charset=latin1', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=utf-16')),
        fc.oneof(asciiHeaderValue, asciiHeaderValue.map((s) => `Bearer ${s}`), fc.constantFrom(`Bearer ${'sk-'.padEnd(51, '0')}`, 'Basic YWRtaW46YWRtaW4=', 'Bearer', '')),
        asciiHeaderValue,
        async (route, contentType, authorization, requestId) => {
          const headers: Record<string, string> = { 'content-type': contentType, 'x-request-id': requestId };
          if (authorization) headers.authorization = authorization;
          const r = await send(route.method, fill(route.path, escrowId), route.method === 'get' ? { headers } : { headers, body: '{"model":"x"}' });
          expectSane(r, `${route.method} ${route.path} ct=${contentType} auth=${authorization.slice(0, 20)}`);
          if (!route.path.startsWith('/v1/status') && route.path !== '/openapi.json') expect([401, 403, 400, 415, 404]).toContain(r.status);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('invalid JSON is a 400, a wrong content type or a compressed body a 415, an oversized body a 413', async () => {
    const h = { ...admin(), 'content-type': 'application/json' };
    for (const bad of ['{', '{"model":', 'nul', '[1,]', '{"a":1}}', '\u0000', '']) {
      for (const path of ['/v1/chat/completions', '/v1/admin/escrows', '/v1/admin/settings', `/v1/admin/devshards/${escrowId}/settle`]) {
        const r = await send('post', path, { body: bad, headers: h });
        expectSane(r, `${path} ${JSON.stringify(bad)}`);
        if (bad !== '' || path !== `/v1/admin/devshards/${escrowId}/settle`) expect([400, 409], `${path} ${JSON.stringify(bad)} -> ${r.text}`).toContain(r.status);
      }
    }
    const wrongType = await send('post', '/v1/chat/completions', { body: JSON.stringify({ model: MODEL, messages: [] }), headers: { ...admin(), 'content-type': 'text/plain' } });
    expect(wrongType.status).toBe(415);
    expectSane(wrongType, 'text/plain');
    const form = await send('post', '/v1/admin/escrows', { body: 'amount=1', headers: { ...admin(), 'content-type': 'application/x-www-form-urlencoded' } });
    expect(form.status).toBe(415);
    expectSane(form, 'form');
    // A compressed body is refused for what it is, not as invalid JSON.
    const { gzipSync } = await import('node:zlib');
    const gz = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { ...h, 'content-encoding': 'gzip' }, body: gzipSync(JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] })) });
    const gzText = await gz.text();
    expect(gz.status, gzText).toBe(415);
    expect(JSON.parse(gzText).error).toMatchObject({ code: 'unsupported_content_encoding', message: expect.stringContaining('gzip') });
    const identity = await send('post', '/v1/admin/settings', { body: '{}', headers: { ...h, 'content-encoding': 'identity' } });
    expect(identity.status, identity.text).toBe(200);
    const huge = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x'.repeat(MAX_BODY_BYTES_DEFAULT) }] });
    const big = await send('post', '/v1/chat/completions', { body: huge, headers: h });
    expect(big.status).toBe(413);
    expectSane(big, 'oversized');
  });

  it('a malformed percent-escape or an overlong path segment: OpenAI-style 400 / 414, the path not echoed', async () => {
    const long = '1'.repeat(150);
    for (const [method, path, status] of [
      ['get', '/v1/%zz', 400],
      ['post', '/v1/chat/%E0%A4%A', 400],
      ['get', `/v1/admin/devshards/%zz`, 400],
      ['get', `/v1/admin/devshards/${long}`, 414],
      ['post', `/devshard/${long}/v1/finalize`, 414],
    ] as const) {
      const r = await send(method, path, { headers: admin() });
      expect(r.status, `${method} ${path}: ${r.text}`).toBe(status);
      expectSane(r, `${method} ${path}`);
      expect(r.text).not.toContain(long);
      expect(r.text).not.toContain('FST_ERR');
    }
    // Refused before any route ran, yet counted like any request (logged too: see the next describe).
    const metrics = await (await fetch(`${gw.url}/metrics`, { headers: admin() })).text();
    expect(metrics).toMatch(/shardgate_http_requests_total\{method="GET",route="\(unmatched\)",status="414"\} 1/);
    expect(metrics).toMatch(/shardgate_http_requests_total\{method="POST",route="\(unmatched\)",status="400"\} 1/);
  });

  it('what the HTTP parser refuses (headers over the limit, a malformed request line): OpenAI-style 431 / 400', async () => {
    const { connect } = await import('node:net');
    const raw = (request: string) =>
      new Promise<string>((resolve, reject) => {
        const u = new URL(gw.url);
        const socket = connect(Number(u.port), u.hostname, () => socket.end(request));
        let out = '';
        socket.on('data', (d) => (out += String(d)));
        socket.on('close', () => resolve(out));
        socket.on('error', reject);
      });
    const parse = (answer: string) => {
      const [head, body] = answer.split('\r\n\r\n');
      return { status: Number(head!.split(' ')[1]), type: /content-type: ([^\r]+)/i.exec(head!)?.[1] ?? '', text: body ?? '' };
    };
    const big = parse(await raw(`GET /v1/status?${'a'.repeat(40_000)} HTTP/1.1\r\nHost: x\r\n\r\n`));
    expect(big.status).toBe(431);
    expectSane(big, 'header overflow');
    const broken = parse(await raw('GET /v1/status HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n'));
    expect(broken.status).toBe(400);
    expectSane(broken, 'malformed header');
    const metrics = await (await fetch(`${gw.url}/metrics`, { headers: admin() })).text();
    expect(metrics).toMatch(/shardgate_http_requests_total\{method="\(unparsed\)",route="\(unparsed\)",status="431"\} 1/);
    expect((await gw.call('/v1/status', { key: 'none' })).status).toBe(200);
  });

  it('an unknown member name of 300 KB is quoted cut in the 400', async () => {
    const r = await send('post', '/v1/admin/settings', { body: JSON.stringify({ ['k'.repeat(300_000)]: 1 }), headers: { ...admin(), 'content-type': 'application/json' } });
    expect(r.status).toBe(400);
    expectSane(r, 'long member name');
    expect(JSON.parse(r.text).error.code).toBe('unknown_parameter');
    expect(r.text.length).toBeLessThan(1000);
  });

  it('the gateway still serves and its log still verifies afterwards', async () => {
    await createEscrowViaApi(gw);
    const r = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'still there?' }], max_tokens: 8 } });
    expect(r.status).toBe(200);
    const { verifyLog } = await import('../../src/events/verify.js');
    const { projectionsCheck } = await import('../../src/projections/verify-check.js');
    await gw.ctx.projections.checkpoint(gw.store);
    expect(await verifyLog(`${gw.storageDir}/events.sqlite`, [projectionsCheck()])).toMatchObject({ ok: true });
  });
});

describe('refusals before routing are logged', () => {
  let info: TestGateway;
  beforeAll(async () => {
    info = await startTestGateway({ env: { LOG_LEVEL: 'info' } });
  });
  afterAll(() => disposeTestGateway(info));

  it('a malformed URL and an unparseable request each get a request log line with status and code, the URL not echoed', async () => {
    const long = '7'.repeat(150);
    expect((await fetch(`${info.url}/v1/admin/devshards/${long}`)).status).toBe(414);
    expect((await fetch(`${info.url}/v1/%zz`)).status).toBe(400);
    const { connect } = await import('node:net');
    const u = new URL(info.url);
    await new Promise<void>((resolve, reject) => {
      const socket = connect(Number(u.port), u.hostname, () => socket.end('GET /v1/status HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n'));
      socket.on('data', () => undefined);
      socket.on('close', () => resolve());
      socket.on('error', reject);
    });
    const lines = info.logs.filter((l) => l.includes('"msg":"request"') && l.includes('"error_code"'));
    expect(lines.some((l) => l.includes('"status":414') && l.includes('"error_code":"url_too_long"') && l.includes('"route":"(unmatched)"'))).toBe(true);
    expect(lines.some((l) => l.includes('"status":400') && l.includes('"error_code":"bad_url"') && l.includes('"reqId"'))).toBe(true);
    expect(lines.some((l) => l.includes('"status":400') && l.includes('"error_code":"bad_request"') && l.includes('"route":"(unparsed)"'))).toBe(true);
    expect(info.logs.some((l) => l.includes(long))).toBe(false);
  });
});
