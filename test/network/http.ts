/** Raw signed requests to a simulated host, for the checks a transport would never get wrong. */
import { request } from 'undici';
import { createRequestSigner } from '../../src/network/signature.js';
import type { SseEvent } from '../../src/network/sse.js';
import { SseParser } from '../../src/network/sse.js';

export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json(): any;
  events(): SseEvent[];
}

export async function signedPost(
  url: string,
  escrowId: string,
  body: unknown,
  opts: { keyHex: string; nonce?: number; ts?: number; signature?: string; headers?: Record<string, string> },
): Promise<RawAnswer> {
  const payload = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  const ts = opts.ts ?? Math.floor(Date.now() / 1000);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'x-devshard-timestamp': String(ts),
    'x-devshard-signature': opts.signature ?? createRequestSigner(opts.keyHex).sign(escrowId, payload, ts),
    ...(opts.nonce !== undefined ? { 'x-devshard-nonce': String(opts.nonce) } : {}),
    ...opts.headers,
  };
  const res = await request(`${url}/devshard/v1/sessions/${escrowId}/chat/completions`, { method: 'POST', headers, body: payload });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    headers: res.headers,
    text,
    json: () => JSON.parse(text),
    events() {
      const p = new SseParser();
      const out: SseEvent[] = [];
      p.push(Buffer.from(text), out);
      p.end(out);
      return out;
    },
  };
}
