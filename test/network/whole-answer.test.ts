/**
 * Non-streamed answers read whole over undici's dispatch (src/network/whole-answer.ts), against a
 * raw HTTP server on loopback that misbehaves in the ways a host can: a huge or endless error body,
 * a body cut mid-way, a caller that gives up.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallController } from '../../src/network/call-signal.js';
import { HostError } from '../../src/network/port.js';
import { createUpstreamPort } from '../../src/network/upstream.js';
import { fetchWhole, WholeAnswerError } from '../../src/network/whole-answer.js';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
let handler: Handler = (_req, res) => res.end('{}');
const closed: string[] = [];
let server: Server;
let origin: string;
const agent = new Agent();

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    res.on('close', () => {
      if (!res.writableFinished) closed.push(req.url ?? '');
    });
    handler(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  await agent.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const post = (path: string, signal = new CallController().signal, limit = 64 * 1024) =>
  fetchWhole(agent, { origin, path, method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }, signal, limit);

describe('fetchWhole', () => {
  it('reads a body sent in many chunks, multi-byte characters split across them, as one text', async () => {
    const text = JSON.stringify({ content: 'é€😀'.repeat(5_000) });
    const bytes = Buffer.from(text, 'utf8');
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      // Odd-sized writes: multi-byte characters are split across chunks.
      let at = 0;
      const next = () => {
        if (at >= bytes.length) return res.end();
        res.write(bytes.subarray(at, (at += 7 * 1024 + 3)), next);
      };
      next();
    };
    const r = await post('/chunks');
    expect(r.statusCode).toBe(200);
    expect(r.text).toBe(text);
  });

  it('keeps only the start of an error body that never ends, and does not wait for its end', async () => {
    handler = (_req, res) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      const timer = setInterval(() => res.write('x'.repeat(16 * 1024)), 5);
      res.on('close', () => clearInterval(timer));
    };
    const t0 = Date.now();
    const r = await post('/endless-error', undefined, 1000);
    expect(r.statusCode).toBe(500);
    expect(r.text).toBe('x'.repeat(1000));
    // The body never ends: any bound proves it was not awaited; a generous one stays true on a busy machine.
    expect(Date.now() - t0).toBeLessThan(10_000);
  });

  it('an error answer cut mid-body still gives its start (the message is best effort)', async () => {
    handler = (_req, res) => {
      res.writeHead(503, { 'content-length': '100' });
      res.write('overloaded, ');
      setTimeout(() => res.destroy(), 20);
    };
    const r = await post('/cut-error');
    expect(r).toEqual({ statusCode: 503, text: 'overloaded, ' });
  });

  it('a 2xx body cut mid-way rejects as an error after the headers', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('{"choices":');
      setTimeout(() => res.destroy(), 20);
    };
    const err = await post('/cut').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WholeAnswerError);
    expect((err as WholeAnswerError).afterHeaders).toBe(true);
  });

  it('aborting the signal closes the connection (the server sees it) and rejects', async () => {
    let arrived!: () => void;
    const atServer = new Promise<void>((r) => (arrived = r));
    handler = () => arrived(); // never answers
    const c = new CallController();
    const p = post('/slow', c.signal);
    await atServer; // aborted once the server has the request, so the close is one it sees
    c.abort(new Error('client disconnected'));
    const err = await p.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WholeAnswerError);
    expect((err as WholeAnswerError).afterHeaders).toBe(false);
    await expect.poll(() => closed, { timeout: 10_000 }).toContain('/slow');
  });
});

describe('a non-streamed chat through the upstream port', () => {
  const call = (signal = new CallController().signal) =>
    createUpstreamPort({ url: `${origin}/v1`, agent, timeoutMs: 500 }).chat({
      escrowId: '1',
      nonce: 0,
      hostUrl: '',
      body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
      signer: { signProtocol: () => new Uint8Array(65) },
      signal,
    });

  it('an error status with a JSON error is rejected with its message', async () => {
    handler = (_req, res) => res.writeHead(429, { 'content-type': 'application/json' }).end('{"error":{"message":"slow down"}}');
    expect(await call().catch((e: unknown) => e)).toMatchObject({ kind: 'rejected', status: 429, message: expect.stringContaining('slow down') });
  });

  it('an answer that does not come in time is a timeout, and the connection is closed', async () => {
    handler = () => undefined;
    const err = (await call().catch((e: unknown) => e)) as HostError;
    expect(err).toBeInstanceOf(HostError);
    expect(err.kind).toBe('timeout');
    await expect.poll(() => closed.filter((u) => u === '/v1/chat/completions').length, { timeout: 10_000 }).toBeGreaterThan(0);
  });

  it('a 200 body cut mid-way is truncated, not unreachable', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-length': '500' });
      res.write('{"id":"x","choices":[');
      setTimeout(() => res.destroy(), 20);
    };
    expect(await call().catch((e: unknown) => e)).toMatchObject({ kind: 'truncated', message: expect.stringContaining('broke its answer') });
  });

  it('a caller abort is aborted', async () => {
    handler = () => undefined;
    const c = new CallController();
    setTimeout(() => c.abort(), 30);
    expect(await call(c.signal).catch((e: unknown) => e)).toMatchObject({ kind: 'aborted' });
  });
});
