/**
 * What the client-library tests share: a real gateway (HTTP -> engine -> embedded devnet and
 * simulated hosts over loopback) with one escrow whose model client keys may use, a fetch that
 * records every response the client library received, and the checks that an escrow's books
 * balance after a request was cut off.
 */
import { expect } from 'vitest';
import { planCompletion } from '../../src/devnet/hosts/completion-plan.js';
import { requestRecords } from '../helpers/request-records.js';
import { createEscrowViaApi, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

export { MODEL };

export interface ClientGateway {
  gw: TestGateway;
  escrowId: string;
}

/**
 * A gateway with one funded escrow; its model is open to client keys (access_mode api_key), as a
 * deployment serving applications has it. Streamed tokens are spaced by `tokenDelayMs`, so a
 * stream lasts long enough to be cut off.
 */
export async function startClientGateway(opts: { tokenDelayMs?: number; env?: Record<string, string>; escrow?: boolean } = {}): Promise<ClientGateway> {
  const gw = await startTestGateway({ env: { DEVNET_TOKEN_DELAY_MS: String(opts.tokenDelayMs ?? 2), ...opts.env } });
  const s = await gw.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }] } });
  if (s.status !== 200) throw new Error(`settings failed: ${s.status} ${s.text}`);
  const escrowId = opts.escrow === false ? '' : await createEscrowViaApi(gw);
  return { gw, escrowId };
}

export interface Seen {
  url: string;
  method: string;
  status: number;
  /** When the request left and when its response head came back (ms since the epoch). */
  sentAt: number;
  at: number;
  requestId: string | null;
  retryAfter: string | null;
  /** The response body as sent (a copy read beside the client's), when asked for. */
  body?: Promise<string>;
}

/** A fetch for a client library that records what came back (status, x-request-id, time). */
export function recordingFetch(opts: { bodies?: boolean } = {}): { fetch: typeof fetch; seen: Seen[] } {
  const seen: Seen[] = [];
  const f: typeof fetch = async (input, init) => {
    const sentAt = Date.now();
    const res = await fetch(input, init);
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    seen.push({ url, method: init?.method ?? 'GET', status: res.status, sentAt, at: Date.now(), requestId: res.headers.get('x-request-id'), retryAfter: res.headers.get('retry-after'), ...(opts.bodies ? { body: res.clone().text() } : {}) });
    return res;
  };
  return { fetch: f, seen };
}

/** Every response the client library got carried an x-request-id, all distinct. */
export function expectRequestIds(seen: Seen[]): void {
  expect(seen.length).toBeGreaterThan(0);
  for (const s of seen) expect(s.requestId, `${s.method} ${s.url} -> ${s.status} without x-request-id`).toMatch(/\S/);
  expect(new Set(seen.map((s) => s.requestId)).size).toBe(seen.length);
}

/** A user message whose simulated answer is at least `minTokens` tokens long. */
export function longPrompt(minTokens: number): string {
  for (let i = 0; i < 1000; i++) {
    const content = `Tell me a long story, please (${i}).`;
    if (planCompletion({ model: MODEL, messages: [{ role: 'user', content }] }).pieces.length >= minTokens) return content;
  }
  throw new Error('no long prompt found');
}

/**
 * The escrow's books balance once every request has ended: nothing in flight, nothing reserved,
 * every started inference ended (finished or failed) exactly once, and the spent amount is the sum
 * of what the ended ones cost. Waits up to 5 s for the ends to commit.
 */
export async function expectBooksBalanced(gw: TestGateway, escrowId: string): Promise<{ failed: { reason: string; usage: { completionTokens: number } }[] }> {
  const deadline = Date.now() + 5000;
  let view = (await gw.call(`/v1/admin/devshards/${escrowId}`)).json;
  while ((view.in_flight !== 0 || view.reserved !== '0') && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 25));
    view = (await gw.call(`/v1/admin/devshards/${escrowId}`)).json;
  }
  expect(view.in_flight).toBe(0);
  expect(view.reserved).toBe('0');
  await gw.ctx.engine.idle();
  const records = requestRecords(gw.store.readStream(`escrow-${escrowId}`));
  const started = records.filter((r) => r.type === 'InferenceStarted').map((r) => (r.data as { nonce: number }).nonce);
  const ended = records.filter((r) => r.type === 'InferenceFinished' || r.type === 'InferenceFailed');
  expect(ended.map((r) => (r.data as { nonce: number }).nonce).sort((a, b) => a - b)).toEqual([...started].sort((a, b) => a - b));
  // Spent: what the ends billed, plus what the hosts' Finish charged beyond it (a client that left
  // early is billed the whole answer its host finished: UsageRecovered, protocol-billing.ts).
  const recovered = records.filter((r) => r.type === 'UsageRecovered');
  const cost = [...ended, ...recovered].reduce((n, r) => n + BigInt((r.data as { cost: string }).cost), 0n);
  expect(view.spent).toBe(cost.toString());
  const status = (await gw.call('/v1/status', { key: 'none' })).json;
  expect(status.active_requests).toBe(0);
  return { failed: ended.filter((r) => r.type === 'InferenceFailed').map((r) => r.data as { reason: string; usage: { completionTokens: number } }) };
}

export const weatherTool = {
  name: 'get_weather',
  description: 'Weather for a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['c', 'f'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
    required: ['city', 'unit'],
  },
} as const;

export const timeTool = {
  name: 'get_time',
  description: 'Local time in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
} as const;

/** The `data:` frames of an SSE body, JSON-parsed, without the final [DONE] (which must be there). */
export function sseFrames(body: string): Record<string, any>[] {
  const data = body
    .split('\n\n')
    .map((f) => f.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n'))
    .filter((d) => d !== '');
  expect(data.at(-1)).toBe('[DONE]');
  return data.slice(0, -1).map((d) => JSON.parse(d) as Record<string, any>);
}
