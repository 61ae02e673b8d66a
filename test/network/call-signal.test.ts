import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent } from 'undici';
import { describe, expect, it } from 'vitest';
import { CallController } from '../../src/network/call-signal.js';

describe('CallController', () => {
  it('runs each listener once, in order, skips removed ones, and keeps the reason', () => {
    const c = new CallController();
    const seen: string[] = [];
    const a = () => seen.push('a');
    const b = () => seen.push('b');
    c.signal.addEventListener('abort', a, { once: true });
    c.signal.addEventListener('abort', b);
    c.signal.addEventListener('abort', () => seen.push('c'));
    c.signal.removeEventListener('abort', b);
    c.abort('gone');
    c.abort('again');
    expect(seen).toEqual(['a', 'c']);
    expect(c.signal).toMatchObject({ aborted: true, reason: 'gone' });
    const d = new CallController();
    d.abort();
    expect((d.signal.reason as DOMException).name).toBe('AbortError');
  });

  it('aborts an undici request in flight: the server sees the connection close', async () => {
    let closed!: () => void;
    const serverSawClose = new Promise<void>((r) => (closed = r));
    let arrived!: () => void;
    const atServer = new Promise<void>((r) => (arrived = r));
    // Never answers.
    const server = createServer((req) => {
      req.socket.once('close', closed);
      arrived();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const agent = new Agent();
    try {
      const c = new CallController();
      const pending = agent.request({ origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, path: '/', method: 'GET', signal: c.signal as never });
      await atServer; // aborted once the server has the request, so the close is one it sees
      c.abort(new Error('client left'));
      await expect(pending).rejects.toThrow('client left');
      await serverSawClose;
    } finally {
      await agent.close();
      server.close();
    }
  });
});
