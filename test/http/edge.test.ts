import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Limiter } from '../../src/gateway/write/limiter.js';
import { answerFor } from '../../src/http/gateway-answers.js';
import { createGatewayMetrics, MetricsRegistry } from '../../src/http/metrics.js';
import { openSse } from '../../src/http/sse.js';
import { sendApiError } from '../../src/http/errors.js';
import { ADMIN_KEY, bearer, buildTestApp, CLIENT_KEY } from './helpers.js';

describe('limiter', () => {
  it('refuses over the concurrency limit with 429 and Retry-After, and frees on release', () => {
    const limiter = new Limiter({ maxConcurrentRequests: 2, maxInputTokensInFlight: 0 });
    const a = limiter.acquire(10);
    const b = limiter.tryAcquire(10);
    expect(b.ok).toBe(true);
    const c = limiter.tryAcquire(10);
    expect(c.ok).toBe(false);
    if (!c.ok) {
      const answer = answerFor(c.error);
      expect(answer.status).toBe(429);
      expect(answer.headers['retry-after']).toBe('1');
      expect(answer.toBody().error.type).toBe('rate_limit_error');
    }
    expect(limiter.counts()).toMatchObject({ active_requests: 2, input_tokens_in_flight: 20, rejected_total: 1 });
    a();
    a(); // idempotent
    expect(limiter.counts().active_requests).toBe(1);
    expect(limiter.tryAcquire(1).ok).toBe(true);
  });

  it('limits input tokens in flight when configured, and admits a lone large request', () => {
    const limiter = new Limiter({ maxConcurrentRequests: 100, maxInputTokensInFlight: 100 });
    const big = limiter.acquire(500); // alone: admitted, else it could never run
    expect(limiter.tryAcquire(1).ok).toBe(false);
    big();
    const a = limiter.acquire(60);
    expect(limiter.tryAcquire(50).ok).toBe(false);
    expect(limiter.tryAcquire(40).ok).toBe(true);
    a();
  });

  it('answers 429 through a route', async () => {
    const { app } = buildTestApp();
    const limiter = new Limiter({ maxConcurrentRequests: 1, maxInputTokensInFlight: 0 });
    limiter.acquire(1);
    app.get('/limited', async (_req, reply) => {
      const a = limiter.tryAcquire(1);
      if (!a.ok) return sendApiError(reply, a.error);
      a.release();
      return {};
    });
    const res = await app.inject({ method: 'GET', url: '/limited' });
    expect(res.statusCode).toBe(429);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.json().error.code).toBe('concurrency_limit_exceeded');
    await app.close();
  });
});

describe('metrics', () => {
  it('renders valid Prometheus exposition format', async () => {
    const m = createGatewayMetrics(new MetricsRegistry());
    m.chatRequests.inc({ model: 'Qwen/Q "x"\\y\n', status: 200 });
    m.chatRequests.inc({ model: 'Qwen/Q "x"\\y\n', status: 200 }, 2);
    m.tokens.inc({ model: 'm', kind: 'prompt' }, 12);
    m.chatLatency.observe({ model: 'm', stream: 'false' }, 0.3);
    m.chatLatency.observe({ model: 'm', stream: 'false' }, 7);
    m.escrowBalance.set({ escrow_id: '5', model: 'm' }, 1e9);
    m.activeRequests.set({}, 3);
    const text = await m.registry.render();
    expect(text.endsWith('\n')).toBe(true);
    expect(text).toContain('# TYPE shardgate_chat_requests_total counter');
    expect(text).toContain('shardgate_chat_requests_total{model="Qwen/Q \\"x\\"\\\\y\\n",status="200"} 3');
    expect(text).toContain('shardgate_chat_latency_seconds_bucket{le="0.5",model="m",stream="false"} 1');
    expect(text).toContain('shardgate_chat_latency_seconds_bucket{le="10",model="m",stream="false"} 2');
    expect(text).toContain('shardgate_chat_latency_seconds_bucket{le="+Inf",model="m",stream="false"} 2');
    expect(text).toContain('shardgate_chat_latency_seconds_sum{model="m",stream="false"} 7.3');
    expect(text).toContain('shardgate_chat_latency_seconds_count{model="m",stream="false"} 2');
    expect(text).toContain('shardgate_escrow_balance{escrow_id="5",model="m"} 1000000000');
    expect(text).toContain('shardgate_active_requests 3');
    // every sample line: name{labels} value (prom-client writes NaN as 'Nan'; Prometheus reads both)
    const sample = /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\["\\n])*",?)*\})? (-?[0-9.]+(e[+-]?[0-9]+)?|\+Inf|-Inf|NaN|Nan)$/;
    for (const line of text.trim().split('\n')) {
      if (line === '' || line.startsWith('# HELP ') || line.startsWith('# TYPE ')) continue;
      expect(line).toMatch(sample);
    }
    m.escrowBalance.remove({ escrow_id: '5', model: 'm' });
    expect(await m.registry.render()).not.toContain('escrow_id="5"');
  });

  it('refuses bad names and unknown labels', () => {
    const r = new MetricsRegistry();
    expect(() => r.counter('bad-name', 'x')).toThrow();
    const c = r.counter('ok_total', 'x', ['a']);
    expect(() => c.inc({ b: 1 })).toThrow(/label "b"/);
  });
});

describe('SSE writer', () => {
  let server: Server;
  let url: string;
  let lastSignal: AbortSignal | undefined;
  let releaseSlow: (() => void) | undefined;
  beforeAll(async () => {
    const serve = async (req: IncomingMessage, res: ServerResponse) => {
      const sse = openSse(res, { keepAliveMs: 40 });
      lastSignal = sse.signal;
      if (req.url === '/slow') {
        // Silent until the test has read its keep-alives and releases it (a late timer cannot cut them short).
        await new Promise<void>((r) => (releaseSlow = r));
      }
      if (req.url === '/hang') return; // the client will leave
      await sse.send({ id: 'c1', choices: [{ delta: { role: 'assistant' } }] });
      await sse.send({ id: 'c1', choices: [{ delta: { content: 'hi\n' } }] });
      sse.done();
    };
    server = createServer((req, res) => void serve(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('frames data lines, ends with [DONE], sets the streaming headers', async () => {
    const res = await fetch(`${url}/fast`);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('x-accel-buffering')).toBe('no');
    expect(res.headers.get('connection')).toBe('keep-alive');
    expect(await res.text()).toBe(
      'data: {"id":"c1","choices":[{"delta":{"role":"assistant"}}]}\n\n' + 'data: {"id":"c1","choices":[{"delta":{"content":"hi\\n"}}]}\n\n' + 'data: [DONE]\n\n',
    );
  });

  it('sends keep-alive comments while silent', async () => {
    const reader = (await fetch(`${url}/slow`)).body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const read = async () => {
      const { value, done } = await reader.read();
      if (!done) text += decoder.decode(value, { stream: true });
      return !done;
    };
    while ((text.match(/: keep-alive\n\n/g) ?? []).length < 2 && (await read()));
    releaseSlow!();
    while (await read());
    expect(text.startsWith(': keep-alive\n\n')).toBe(true);
    expect(text.match(/: keep-alive\n\n/g)!.length).toBeGreaterThanOrEqual(2);
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('aborts its signal when the client disconnects', async () => {
    await new Promise<void>((resolve) => {
      const req = httpRequest(`${url}/hang`, (res) => {
        res.once('data', () => req.destroy());
        setTimeout(() => req.destroy(), 100);
      });
      req.on('error', () => {});
      req.on('close', () => resolve());
      req.end();
    });
    // The server side learns of the close in its own time: wait for the abort itself.
    const signal = lastSignal!;
    if (!signal.aborted) await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
    expect(signal.aborted).toBe(true);
  });

  it('works on a fastify reply (hijacked, request id header kept, one log line)', async () => {
    const { app, logs } = buildTestApp();
    app.get('/stream', async (request, reply) => {
      request.logFields.model = 'm';
      const sse = openSse(reply, { keepAliveMs: 0 });
      await sse.send({ a: 1 });
      sse.done();
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const res = await fetch(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/stream`, { headers: { 'x-request-id': 'abc-123' } });
    expect(res.headers.get('x-request-id')).toBe('abc-123');
    expect(await res.text()).toBe('data: {"a":1}\n\ndata: [DONE]\n\n');
    await app.close();
    const lines = logs.parsed().filter((l) => l.msg === 'request');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ reqId: 'abc-123', route: '/stream', status: 200, model: 'm' });
  });
});

describe('disabled gate', () => {
  const { app, setDisabled } = buildTestApp();
  beforeAll(() => app.ready());
  afterAll(() => app.close());

  it('308 with Location and {status, message, new_url} on non-admin routes; admin routes keep working', async () => {
    setDisabled({ enabled: true, message: 'moved', new_url: 'https://new.example/v1' });
    for (const [method, url] of [['POST', '/v1/chat/completions'], ['GET', '/v1/models'], ['GET', '/v1/status'], ['GET', '/nope']] as const) {
      const res = await app.inject({ method, url, headers: bearer(CLIENT_KEY), ...(method === 'POST' ? { payload: {} } : {}) });
      expect(res.statusCode, url).toBe(308);
      expect(res.headers.location).toBe('https://new.example/v1');
      expect(res.json()).toEqual({ status: 'disabled', message: 'moved', new_url: 'https://new.example/v1' });
    }
    const admin = await app.inject({ method: 'POST', url: '/devshard/4/v1/finalize', headers: bearer(ADMIN_KEY) });
    expect(admin.statusCode).toBe(200);
    const off = await app.inject({ method: 'POST', url: '/v1/admin/settings', headers: bearer(ADMIN_KEY), payload: { disabled: { enabled: false } } });
    expect(off.statusCode).toBe(200);
    expect((await app.inject({ method: 'GET', url: '/v1/status' })).statusCode).toBe(200);
    setDisabled({ enabled: true, message: 'x', new_url: 'https://n' });
    expect((await app.inject({ method: 'GET', url: '/openapi.json' })).statusCode).toBe(200);
    setDisabled({ enabled: false });
  });
});

describe('request log line and redaction', () => {
  it('one line per request with handler fields; no authorization header or private key anywhere', async () => {
    const { app, logs } = buildTestApp();
    await app.ready();
    const privateKey = 'ef'.repeat(32);
    await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(CLIENT_KEY), payload: { model: 'm', messages: [{ role: 'user', content: 'hi' }] } });
    await app.inject({ method: 'POST', url: '/v1/admin/escrows', headers: bearer(ADMIN_KEY), payload: { amount: 5, model_id: 'm', private_key: privateKey } });
    await app.inject({ method: 'POST', url: '/v1/admin/escrows', headers: bearer(ADMIN_KEY), payload: { amount: 5, model_id: 'm', private_key: 'zz' + privateKey } });
    await app.inject({ method: 'GET', url: '/boom', headers: bearer(CLIENT_KEY) });
    await app.close();
    const all = logs.lines.join('\n');
    expect(all).not.toContain(CLIENT_KEY);
    expect(all).not.toContain(ADMIN_KEY);
    expect(all).not.toContain(privateKey);
    const requestLines = logs.parsed().filter((l) => l.msg === 'request');
    expect(requestLines).toHaveLength(4);
    expect(requestLines[0]).toMatchObject({ method: 'POST', route: '/v1/chat/completions', status: 200, model: 'm', escrow_id: '7', nonce: 3, key_id: expect.stringMatching(/^key-/) });
    expect(typeof requestLines[0]!.latency_ms).toBe('number');
    expect(logs.parsed().some((l) => l.msg === 'escrow requested' && (l.body as Record<string, unknown>).private_key === '[redacted]')).toBe(true);
    // the unexpected error's details are in the log, not in the response
    expect(all).toContain('secret internal detail');
  });
});

describe('OpenAPI document', () => {
  it('lists every route with its schema and security', async () => {
    const { app } = buildTestApp();
    const res = await app.inject({ method: 'GET', url: '/openapi.json' });
    await app.close();
    const doc = res.json();
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.paths['/v1/chat/completions'].post.requestBody.content['application/json'].schema.required).toEqual(['model', 'messages']);
    expect(doc.paths['/v1/chat/completions'].post.security).toEqual([{ clientKey: [] }, { adminKey: [] }]);
    expect(doc.paths['/devshard/{id}/v1/finalize'].post.parameters[0]).toMatchObject({ name: 'id', in: 'path', required: true });
    expect(doc.paths['/v1/admin/settings'].post.security).toEqual([{ adminKey: [] }]);
    expect(doc.paths['/openapi.json']).toBeUndefined();
  });
});

describe('a statechart refusal that no use case caught', () => {
  it('is a 409 naming the escrow, its state and the remedy (was a 500)', async () => {
    const { TransitionRefused } = await import('../../src/gateway/write/engine.js');
    const answer = answerFor(new TransitionRefused('7', 'EscrowSettleRequested', 'removed'));
    expect(answer.status).toBe(409);
    const body = answer.toBody().error;
    expect(body.code).toBe('transition_refused');
    expect(body.message).toContain('Escrow 7 is removed; EscrowSettleRequested is not allowed there.');
    expect(body.message).toContain('GET /v1/admin/escrows/{id}');
  });

  it('reaches the client as 409 through the error handler of a route that throws it', async () => {
    const { TransitionRefused } = await import('../../src/gateway/write/engine.js');
    const { app } = buildTestApp();
    app.get('/throws-refusal', async () => {
      throw new TransitionRefused('9', 'EscrowFinalizeRequested', 'settled');
    });
    try {
      const res = await app.inject({ method: 'GET', url: '/throws-refusal', headers: bearer(ADMIN_KEY) });
      expect(res.statusCode).toBe(409);
      expect(res.json().error.code).toBe('transition_refused');
    } finally {
      await app.close();
    }
  });
});
