/**
 * Issue 41 item 8: a body over the limit gets a readable 413, never a broken pipe.
 *
 * Before, fastify answered 413 with `Connection: close` and Node's server closed the socket as soon
 * as the answer was written, while the client was still sending: the kernel reset the connection
 * over the unread bytes, and `fetch` failed with EPIPE about half the time for a 10-30 MB body. Now
 * the rest of the body is read and discarded (up to a bound), then the connection is closed.
 *
 * Real servers on loopback (not inject). `fetch` runs in a worker thread and curl in its own
 * process: with the client in the server's event loop the failure did not show. Nothing waits on a
 * clock: each step waits for an answer, an exit or a socket event.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BODY_BYTES_DEFAULT } from '../../src/config/index.js';
import { bearer, buildTestApp, CLIENT_KEY } from './helpers.js';

const MB30 = 30_000_000;
const CHAT = '/v1/chat/completions';

/** A chat body of exactly `size` bytes (ASCII). */
function chatBody(size: number): Buffer {
  const head = '{"model":"m","messages":[{"role":"user","content":"';
  const tail = '"}]}';
  return Buffer.from(head + 'x'.repeat(size - head.length - tail.length) + tail);
}

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

interface Answer {
  status?: number;
  connection?: string | null;
  text?: string;
  error?: string;
}

/** POSTs a `size`-byte chat body with fetch from a worker thread (its own event loop). */
async function fetchFromWorker(url: string, size: number, chunked = false): Promise<Answer> {
  const worker = new Worker(new URL('./post-in-worker.mjs', import.meta.url), { workerData: { url, size, chunked, authorization: bearer(CLIENT_KEY).authorization } });
  const [answer] = (await once(worker, 'message')) as [Answer];
  await once(worker, 'exit');
  return answer;
}

/** POSTs a file with curl; its exit code, the status and the body it read. */
async function curlPost(url: string, file: string): Promise<{ exit: number | null; status: number; text: string; stderr: string }> {
  const curl = spawn('curl', ['-sS', '-w', '\n%{http_code}', '-H', `authorization: ${bearer(CLIENT_KEY).authorization}`, '-H', 'content-type: application/json', '--data-binary', `@${file}`, url]);
  let out = '';
  let stderr = '';
  curl.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
  curl.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const [exit] = (await once(curl, 'close')) as [number | null];
  const cut = out.lastIndexOf('\n');
  return { exit, status: Number(out.slice(cut + 1)), text: out.slice(0, cut), stderr };
}

/**
 * Sends headers announcing `total` body bytes and then the bytes, on a raw socket, as fast as the
 * server takes them, until it has sent them all or the server cut the connection; then waits for
 * the connection to close. Returns what was sent and what the server answered.
 */
async function rawPost(base: string, total: number): Promise<{ sent: number; answer: string; cut: boolean; serverEnded: boolean }> {
  const { port } = new URL(base);
  // allowHalfOpen: keep sending after the server's FIN, as a client that does not read would.
  const socket = connect({ port: Number(port), host: '127.0.0.1', allowHalfOpen: true });
  let answer = '';
  let cut = false;
  let serverEnded = false;
  socket.on('end', () => (serverEnded = true));
  socket.on('data', (d: Buffer) => (answer += d.toString('utf8')));
  socket.on('error', () => (cut = true)); // EPIPE / ECONNRESET: the server cut the connection
  // Not events.once: it rejects on 'error', which is an outcome here.
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const drained = () => new Promise<void>((resolve) => socket.once('drain', () => resolve()));
  await once(socket, 'connect');
  socket.write(`POST ${CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${bearer(CLIENT_KEY).authorization}\r\nContent-Type: application/json\r\nContent-Length: ${total}\r\n\r\n`);
  const piece = Buffer.alloc(64 * 1024, 'x');
  let sent = 0;
  while (sent < total && !socket.destroyed) {
    const n = Math.min(piece.length, total - sent);
    sent += n;
    if (!socket.write(n === piece.length ? piece : piece.subarray(0, n))) await Promise.race([drained(), closed]);
  }
  socket.end();
  await closed;
  return { sent, answer, cut, serverEnded };
}

function expectTooLarge(answer: { status?: number; text?: string }, limitText: string): void {
  expect(answer.status, JSON.stringify(answer).slice(0, 300)).toBe(413);
  const body = JSON.parse(answer.text!) as { error: { message: string; type: string; code: string } };
  expect(body.error.code).toBe('request_too_large');
  expect(body.error.type).toBe('invalid_request_error');
  expect(body.error.message).toContain(limitText);
  expect(body.error.message).toContain('GATEWAY_MAX_BODY_BYTES');
}

describe('a body over the default limit (a real server on loopback)', () => {
  const { app } = buildTestApp();
  let base: string;
  let dir: string;
  const limitText = `${MAX_BODY_BYTES_DEFAULT / (1024 * 1024)} MiB (${MAX_BODY_BYTES_DEFAULT} bytes)`;

  beforeAll(async () => {
    base = await listen(app);
    dir = mkdtempSync(join(tmpdir(), 'shardgate-large-body-'));
  });
  afterAll(async () => {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the default limit is the largest served context times 32 JSON bytes a token: 8 MiB', () => {
    expect(MAX_BODY_BYTES_DEFAULT).toBe(262_144 * 32);
    expect(MAX_BODY_BYTES_DEFAULT).toBe(8 * 1024 * 1024);
  });

  it('30 MB with fetch: 413 with the OpenAI-style error body naming the limit and the variable, then the connection closes', async () => {
    // Several times: the broken pipe came about one time in three.
    for (let i = 0; i < 5; i++) {
      const answer = await fetchFromWorker(base + CHAT, MB30);
      expectTooLarge(answer, limitText);
      expect(answer.connection).toBe('close');
    }
  });

  it('30 MB sent chunked (no Content-Length, found too large while reading) with fetch: the same 413', async () => {
    expectTooLarge(await fetchFromWorker(base + CHAT, MB30, true), limitText);
  });

  it('30 MB with curl: 413 with the JSON error body, curl exits 0 (not 55, failed sending)', async () => {
    const file = join(dir, 'body.json');
    writeFileSync(file, chatBody(MB30));
    for (let i = 0; i < 5; i++) {
      const r = await curlPost(base + CHAT, file);
      expect(r.exit, r.stderr).toBe(0);
      expectTooLarge(r, limitText);
    }
  });

  it('a body of exactly the limit is accepted; one byte more is a 413', async () => {
    const at = await fetch(base + CHAT, { method: 'POST', headers: { 'content-type': 'application/json', ...bearer(CLIENT_KEY) }, body: chatBody(MAX_BODY_BYTES_DEFAULT) });
    expect(at.status, (await at.text()).slice(0, 300)).toBe(200);
    const over = await fetchFromWorker(base + CHAT, MAX_BODY_BYTES_DEFAULT + 1);
    expectTooLarge(over, limitText);
  });
});

describe('what is read of a refused body', () => {
  const limit = 1024;
  const withinBound = buildTestApp({ app: { bodyLimit: limit } });
  const bound = 256 * 1024;
  const smallBound = buildTestApp({ app: { bodyLimit: limit, server: { discardBodyBytes: bound } } });
  beforeAll(async () => {
    await listen(withinBound.app);
    await listen(smallBound.app);
  });
  afterAll(async () => {
    await withinBound.app.close();
    await smallBound.app.close();
  });
  const baseOf = (app: FastifyInstance) => `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

  it('within the bound (64 MiB by default): all 30 MB are read and discarded, the 413 arrives, then the server closes', async () => {
    // More than the kernel buffers of a loopback connection hold: a server that closed at once
    // (as before) cut this client off mid-body.
    const r = await rawPost(baseOf(withinBound.app), MB30);
    expect(r.cut).toBe(false);
    expect(r.sent).toBe(MB30);
    expect(r.answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(r.answer.toLowerCase()).toContain('connection: close');
    expect(r.serverEnded).toBe(true);
    expect(JSON.parse(r.answer.slice(r.answer.indexOf('\r\n\r\n') + 4)).error.message).toContain('1 KiB (1024 bytes)');
  });

  it('beyond the bound: the connection is cut before the client sent it all', async () => {
    const r = await rawPost(baseOf(smallBound.app), MB30);
    // The kernel buffers a few MB of the client's writes; the server read the limit and the bound.
    expect(r.cut).toBe(true);
    expect(r.sent).toBeLessThan(MB30);
    // The request's log line says what was answered.
    expect(smallBound.logs.parsed().some((l) => l.msg === 'request' && l.status === 413)).toBe(true);
  });

  it('a route with its own limit names its limit and not the variable, which does not raise it', async () => {
    // A route cannot be added to a listening app: a fresh one.
    const other = buildTestApp({ app: { bodyLimit: limit } }).app;
    other.post('/own-limit', { bodyLimit: 2048 }, async () => ({ ok: true }));
    const headers = { 'content-type': 'application/json', ...bearer(CLIENT_KEY) };
    const res = await other.inject({ method: 'POST', url: '/own-limit', headers, payload: JSON.stringify({ a: 'x'.repeat(4096) }) });
    expect(res.statusCode).toBe(413);
    expect(res.json().error.message).toContain('2 KiB (2048 bytes)');
    expect(res.json().error.message).not.toContain('GATEWAY_MAX_BODY_BYTES');
    const global = await other.inject({ method: 'POST', url: CHAT, headers, payload: JSON.stringify({ a: 'x'.repeat(4096) }) });
    expect(global.json().error.message).toContain('GATEWAY_MAX_BODY_BYTES');
    await other.close();
  });
});
