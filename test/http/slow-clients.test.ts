/**
 * Issue 39 (1): clients that never read their streams. A chat request holds its concurrency slot
 * until its answer left the gateway (not until the host finished), a stream waits for its client
 * (backpressure, at most GATEWAY_SLOW_CLIENT_MAX_UNSENT_BYTES held), and a client that does not take
 * its bytes within GATEWAY_SLOW_CLIENT_TIMEOUT_MS has its connection ended, giving the slot back.
 *
 * The real broker routes over a gateway stand-in whose host streams big chunks (the OS socket
 * buffers of a loopback connection take a few MB; the simulated hosts' answers are smaller than
 * that). Clients are raw sockets on 127.0.0.1 that send a request and never read (socket.pause()).
 */
import { connect, type Socket } from 'node:net';
import type { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Limiter } from '../../src/gateway/write/limiter.js';
import type { ChatCommand } from '../../src/gateway/chat/chat.js';
import type { GatewayPort } from '../../src/gateway/port.js';
import { createHttpApp, type HttpServerLimits } from '../../src/http/app.js';
import { createAuthenticator } from '../../src/http/auth.js';
import { createLogger } from '../../src/http/logger.js';
import { createGatewayMetrics, MetricsRegistry } from '../../src/http/metrics.js';
import { registerBrokerRoutes } from '../../src/http/routes/broker.js';
import type { ChatChunk } from '../../src/network/port.js';
import { ADMIN_KEY, captureLogs, CLIENT_KEY } from './helpers.js';

const MODEL = 'm';
// Long enough for a loaded CI to look at the unread streams before they are cut.
const SLOW_MS = 1500;

/** Waits until `cond()` holds, polling; fails after `boundMs`. */
async function until(what: string, cond: () => boolean, boundMs = 8000): Promise<void> {
  const deadline = Date.now() + boundMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const chunk = (content: string): ChatChunk => ({ id: 'c', object: 'chat.completion.chunk', created: 1, model: MODEL, choices: [{ index: 0, delta: { content }, finish_reason: null }] }) as ChatChunk;

interface Ended {
  usage: unknown;
  error?: string;
}

/** The broker routes over a stand-in whose every stream is `total` bytes of content in `piece`-byte chunks. */
async function brokerApp(opts: { server: HttpServerLimits; maxConcurrent: number; piece: number; total: number; whole?: boolean }) {
  const logs = captureLogs();
  const metrics = createGatewayMetrics(new MetricsRegistry({ defaultMetrics: false }));
  const app = createHttpApp({ logger: createLogger({ level: 'info', stream: logs.stream }), metrics, server: opts.server, fastify: { forceCloseConnections: true } });
  const limiter = new Limiter({ maxConcurrentRequests: opts.maxConcurrent, maxInputTokensInFlight: 0 });
  const ended: Ended[] = [];
  const hostDone: boolean[] = [];
  const content = 'x'.repeat(opts.piece);
  const gateway = {
    servedModels: () => [MODEL],
    isServedModel: (m: string) => m === MODEL,
    chatSettings: () => ({ default_request_max_tokens: 100, request_max_tokens_cap: 4096 }),
    streamFailure: (err: unknown, usage: unknown) => ({ error: err, usage }),
    // As src/gateway/chat/chat.ts: the slot is taken at open and given back by session.end; the outcome
    // is recorded once, by `record` (before a whole answer's last byte) or by `end`.
    openChat: async (cmd: ChatCommand) => {
      const release = limiter.acquire(1);
      let done = false;
      const finish = (outcome: Ended) => {
        if (done) return;
        done = true;
        ended.push(outcome);
      };
      const i = hostDone.push(false) - 1;
      async function* chunks() {
        for (let sent = 0; sent < opts.total && !cmd.signal.aborted; sent += opts.piece) yield chunk(content);
        hostDone[i] = true;
      }
      const usage = { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 };
      if (opts.whole) hostDone[i] = true;
      const completion = () => ({ id: 'c', object: 'chat.completion', created: 1, model: MODEL, usage, choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'x'.repeat(opts.total) } }] });
      return {
        escrowId: '1',
        nonce: i + 1,
        result: opts.whole ? { kind: 'completion', completion: completion() } : { kind: 'stream', chunks: chunks(), usage: () => usage },
        record: async (outcome: Ended) => finish(outcome),
        end: (outcome: Ended) => {
          finish(outcome);
          release();
        },
      };
    },
  } as unknown as GatewayPort;
  const responses: ServerResponse[] = [];
  app.addHook('onRequest', (_request, reply, done) => {
    responses.push(reply.raw as ServerResponse);
    done();
  });
  registerBrokerRoutes(app, gateway, metrics, createAuthenticator({ adminApiKey: ADMIN_KEY, apiKeys: [CLIENT_KEY] }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as AddressInfo).port;
  return { app, port, limiter, ended, hostDone, responses, logs };
}

const body = JSON.stringify({ model: MODEL, stream: true, max_tokens: 4096, messages: [{ role: 'user', content: 'hi' }] });

const wholeBody = JSON.stringify({ model: MODEL, stream: false, max_tokens: 4096, messages: [{ role: 'user', content: 'hi' }] });

/** A client that sends a stream request (or `payload`) and never reads the answer. */
function pausedClient(port: number, payload = body): Socket {
  const s = connect(port, '127.0.0.1');
  s.pause();
  s.on('error', () => {});
  s.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${CLIENT_KEY}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`);
  return s;
}

const chat = (port: number) => fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' }, body });


describe('clients that never read their streams', () => {
  const cleanup: (() => unknown)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it('hold their slots while unread (backpressure, bounded unsent bytes), get 429 beyond the limit, are ended after the slow-client timeout, and the slots come back', async () => {
    const maxUnsentBytes = 16_384;
    const piece = 32_768;
    // An endless host: only backpressure stops it.
    const gw = await brokerApp({ server: { maxUnsentBytes, slowClientTimeoutMs: SLOW_MS }, maxConcurrent: 3, piece, total: Number.MAX_SAFE_INTEGER });
    cleanup.push(() => gw.app.close());
    const clients = [pausedClient(gw.port), pausedClient(gw.port), pausedClient(gw.port)];
    cleanup.push(() => clients.forEach((s) => s.destroy()));

    // Unread: every one is admitted and waits on its client with bytes in the gateway.
    await until('three streams waiting on their clients', () => gw.responses.length === 3 && gw.responses.every((r) => r.writableLength > 0));
    expect(gw.limiter.counts().active_requests).toBe(3);
    // What the gateway holds for each is bounded: the high-water mark plus one frame.
    for (const r of gw.responses) expect(r.writableLength).toBeLessThanOrEqual(maxUnsentBytes + piece + 512);

    // A fourth request is over the limit.
    const refused = await chat(gw.port);
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('concurrency_limit_exceeded');

    // After the slow-client timeout the connections are ended and the slots come back.
    await until('the slots to come back', () => gw.limiter.counts().active_requests === 0);
    expect(gw.ended).toHaveLength(3);
    for (const e of gw.ended) expect(e.error).toMatch(/client too slow/);
    await until('the slow connections to close', () => gw.responses.slice(0, 3).every((r) => r.destroyed));
    const lines = gw.logs.parsed().filter((l) => l.msg === 'request' && l.route === '/v1/chat/completions');
    expect(lines.filter((l) => l.error_code === 'slow_client')).toHaveLength(3);

    // The slots are usable again: the next request is admitted (its endless answer is then dropped).
    const ok = await chat(gw.port);
    expect(ok.status).toBe(200);
    await ok.body?.cancel();
    await until('the dropped stream to give its slot back', () => gw.limiter.counts().active_requests === 0);
  });

  it('keeps the slot until a finished answer has left the gateway (the host is done, the tail is unsent), then ends the connection', async () => {
    // Each write fits under the high-water mark, so the host finishes; the OS takes a few MB of the
    // 24 MB, the rest waits in the gateway after the [DONE].
    const gw = await brokerApp({ server: { maxUnsentBytes: 64 * 1024 * 1024, slowClientTimeoutMs: SLOW_MS }, maxConcurrent: 1, piece: 256 * 1024, total: 24 * 1024 * 1024 });
    cleanup.push(() => gw.app.close());
    const s = pausedClient(gw.port);
    cleanup.push(() => s.destroy());
    await until('the host to finish', () => gw.hostDone[0] === true);
    await until('the answer to be ended with bytes unsent', () => gw.responses[0]!.writableEnded);
    // Host done, bytes unsent: the slot is still held (before issue 39 it was given back here).
    expect(gw.responses[0]!.writableFinished).toBe(false);
    expect(gw.responses[0]!.writableLength).toBeGreaterThan(0);
    expect(gw.limiter.counts().active_requests).toBe(1);
    expect((await chat(gw.port)).status).toBe(429);
    await until('the slot to come back', () => gw.limiter.counts().active_requests === 0);
    // The answer was whole when its [DONE] was written: recorded finished before that last byte
    // (billed as served); the log line says the client was too slow.
    expect(gw.ended).toEqual([{ usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } }]);
    expect(gw.responses[0]!.destroyed).toBe(true);
    expect(gw.logs.parsed().filter((l) => l.msg === 'request' && l.error_code === 'slow_client')).toHaveLength(1);
  });

  it('a whole (non-stream) answer also keeps its slot until it has left the gateway, then the connection is ended', async () => {
    // 24 MB of content: the OS takes a few MB, the rest waits in the gateway.
    const gw = await brokerApp({ server: { slowClientTimeoutMs: SLOW_MS }, maxConcurrent: 1, piece: 0, total: 24 * 1024 * 1024, whole: true });
    cleanup.push(() => gw.app.close());
    const s = pausedClient(gw.port, wholeBody);
    cleanup.push(() => s.destroy());
    await until('the answer to be ended with bytes unsent', () => gw.responses[0]?.writableEnded === true);
    expect(gw.responses[0]!.writableFinished).toBe(false);
    // The host is done and the outcome recorded; the slot is still held (before this fix it was given back before the send).
    expect(gw.limiter.counts().active_requests).toBe(1);
    expect((await chat(gw.port)).status).toBe(429);
    await until('the slot to come back', () => gw.limiter.counts().active_requests === 0);
    // The host's answer was whole: the request ends finished (billed as executed), the log says slow_client.
    expect(gw.ended[0]).toEqual({ usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } });
    expect(gw.responses[0]!.destroyed).toBe(true);
    const lines = gw.logs.parsed().filter((l) => l.msg === 'request' && l.route === '/v1/chat/completions');
    expect(lines.filter((l) => l.error_code === 'slow_client')).toHaveLength(1);
  });

  it('a whole answer read by its client ends the request normally (200, slot back)', async () => {
    const gw = await brokerApp({ server: { slowClientTimeoutMs: SLOW_MS }, maxConcurrent: 1, piece: 0, total: 2 * 1024 * 1024, whole: true });
    cleanup.push(() => gw.app.close());
    const res = await fetch(`http://127.0.0.1:${gw.port}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' }, body: wholeBody });
    expect(res.status).toBe(200);
    const json = (await res.json()) as { choices: { message: { content: string } }[] };
    expect(json.choices[0]!.message.content).toHaveLength(2 * 1024 * 1024);
    await until('the slot to come back', () => gw.limiter.counts().active_requests === 0);
    expect(gw.ended).toEqual([{ usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } }]);
  });

  it('a client that reads its whole answer ends the request normally (200, slot back)', async () => {
    const gw = await brokerApp({ server: { slowClientTimeoutMs: SLOW_MS }, maxConcurrent: 1, piece: 64 * 1024, total: 2 * 1024 * 1024 });
    cleanup.push(() => gw.app.close());
    const res = await chat(gw.port);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    await until('the slot to come back', () => gw.limiter.counts().active_requests === 0);
    expect(gw.ended).toEqual([{ usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } }]);
  });
});

describe('the HTTP server limits', () => {
  it('are set explicitly on the server', async () => {
    const app = createHttpApp({ logger: createLogger({ level: 'silent' }), server: { maxConnections: 7, headersTimeoutMs: 1234, requestReceiveTimeoutMs: 5678, maxUnsentBytes: 4096 } });
    try {
      expect(app.server.maxConnections).toBe(7);
      expect(app.server.headersTimeout).toBe(1234);
      expect(app.server.requestTimeout).toBe(5678);
      expect(app.clientLimits.slowClientTimeoutMs).toBe(30_000);
    } finally {
      await app.close();
    }
  });

  it('answers 408 and closes a connection whose headers do not arrive within the headers timeout', async () => {
    const app = createHttpApp({ logger: createLogger({ level: 'silent' }), server: { headersTimeoutMs: 300, requestReceiveTimeoutMs: 300 } });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const s = connect((app.server.address() as AddressInfo).port, '127.0.0.1');
    s.on('error', () => {});
    try {
      let received = '';
      s.on('data', (d: Buffer) => (received += d.toString('latin1')));
      s.write('GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\n'); // never finished
      await new Promise((r) => s.once('close', r));
      expect(received).toMatch(/^HTTP\/1\.1 408 /);
    } finally {
      s.destroy();
      await app.close();
    }
  });

  it('closes a connection beyond maxConnections at once', async () => {
    const app = createHttpApp({ logger: createLogger({ level: 'silent' }), server: { maxConnections: 1 } });
    app.get('/x', async () => ({ ok: true }));
    await app.listen({ host: '127.0.0.1', port: 0 });
    const port = (app.server.address() as AddressInfo).port;
    const first = connect(port, '127.0.0.1');
    first.on('error', () => {});
    try {
      await new Promise((r) => first.once('connect', r));
      await until('the first connection to be counted', () => (app.server as unknown as { _connections: number })._connections === 1);
      const second = connect(port, '127.0.0.1');
      second.on('error', () => {});
      second.resume();
      await new Promise((r) => second.once('close', r));
      expect(first.destroyed).toBe(false);
    } finally {
      first.destroy();
      await app.close();
    }
  });
});
