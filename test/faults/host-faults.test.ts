/**
 * Host faults (simulated hosts' switches): an error status, a stream that stalls (the stall timeout
 * cancels it and bills what was delivered), a truncated stream (and a half JSON body), a slow host.
 * The client always gets either a complete answer or a clear OpenAI-style error, and the escrow's
 * accounting stays exact: spent = sum of the ended requests' costs, balance = deposit − spent,
 * nothing reserved or in flight afterwards; then finalize + settle succeed over the devshard protocol
 * (the hosts sign the Settlement root; the chain pays by their host_stats).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { HostFaults } from '../../src/devnet/hosts/index.js';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';
import { accountingOf, setHostFaults } from './helpers.js';
import { requestRecords } from '../helpers/request-records.js';

let gw: TestGateway;
let escrowId: string;

const body = (stream: boolean, max_tokens = 24) => ({ model: MODEL, messages: [{ role: 'user', content: 'tell me something long enough' }], max_tokens, stream });
const chat = (stream: boolean, max_tokens?: number) => gw.call('/v1/chat/completions', { body: body(stream, max_tokens) });

const setFaults = (f: HostFaults): void => setHostFaults(gw.devnet!, f);

/** SSE frames of a stream body. */
const frames = (text: string) =>
  text
    .split('\n\n')
    .map((f) => f.replace(/^data: /, '').trim())
    .filter(Boolean);

function expectExact(): void {
  const view = gw.ctx.engine.escrow(escrowId)!.context;
  const { costs, started, ended, nonces } = accountingOf(gw, escrowId);
  expect(started).toBe(ended);
  expect(view.inFlight).toBe(0);
  expect(view.reserved).toBe('0');
  expect(BigInt(view.spent)).toBe(costs);
  expect(BigInt(view.balance)).toBe(BigInt(view.deposit) - costs);
  expect(new Set(nonces).size).toBe(nonces.length);
}

describe('host faults', () => {
  beforeAll(async () => ({ gw, escrowId } = await startGatewayWithEscrow({ env: { GATEWAY_STALL_TIMEOUT_MS: '400', GATEWAY_REQUEST_TIMEOUT_MS: '1500', DEVNET_TOKEN_DELAY_MS: '2' } })));
  beforeEach(() => setFaults({}));
  afterAll(async () => {
    if (gw) setFaults({});
    await disposeTestGateway(gw);
  });

  it('a host error status is a clear 502 OpenAI error, billed nothing', async () => {
    const before = accountingOf(gw, escrowId).costs;
    for (const status of [500, 503, 429]) {
      setFaults({ failStatus: status, failMessage: 'boom', remaining: 1 });
      const r = await chat(false);
      expect(r.status).toBe(502);
      expect(r.json.error).toMatchObject({ type: 'upstream_error', code: expect.stringMatching(/^upstream_/) });
      expect(r.json.error.message).toMatch(/inference host failed/);
    }
    setFaults({ failStatus: 500, remaining: 1 });
    const s = await chat(true);
    expect(s.status).toBe(502);
    expect(accountingOf(gw, escrowId).costs).toBe(before);
    expectExact();
    expect((await chat(false)).status).toBe(200); // the next request is fine
    expectExact();
  });

  it('a stalled stream is cancelled by the stall timeout and billed what was delivered', async () => {
    setFaults({ stallAfterChunks: 4, remaining: 1 });
    const before = accountingOf(gw, escrowId).costs;
    const t0 = Date.now();
    const r = await chat(true);
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(r.status).toBe(200); // headers went out with the first chunk
    const fs = frames(r.text);
    expect(fs).not.toContain('[DONE]');
    const last = JSON.parse(fs.at(-1)!);
    expect(last.error).toMatchObject({ code: 'upstream_timeout', type: 'upstream_error' });
    const delivered = fs.filter((f) => f.startsWith('{') && JSON.parse(f).choices?.[0]?.delta?.content).length;
    expect(delivered).toBeGreaterThan(0);
    const failed = requestRecords(gw.store.readAll()).filter((e) => e.type === 'InferenceFailed').at(-1)!;
    expect((failed.data as { reason: string }).reason).toMatch(/sent nothing for 400 ms/);
    const cost = BigInt((failed.data as { cost: string }).cost);
    expect(cost).toBeGreaterThan(0n); // prompt + the tokens that got through
    expect(accountingOf(gw, escrowId).costs - before).toBe(cost);
    expectExact();
  });

  it('a non-stream answer that never comes is a 504 after GATEWAY_REQUEST_TIMEOUT_MS, billed nothing', async () => {
    // The receipt, then silence (a non-stream answer is one event after the receipt).
    setFaults({ stallAfterChunks: 0, remaining: 1 });
    const before = accountingOf(gw, escrowId).costs;
    const t0 = Date.now();
    const r = await chat(false);
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(r.status).toBe(504);
    expect(accountingOf(gw, escrowId).costs).toBe(before);
    expect(r.json.error).toMatchObject({ code: 'upstream_timeout' });
    expectExact();
  });

  it('a truncated stream ends with an error frame, billed what was delivered', async () => {
    setFaults({ truncateAfterChunks: 3, remaining: 1 });
    const r = await chat(true);
    expect(r.status).toBe(200);
    const fs = frames(r.text);
    expect(fs).not.toContain('[DONE]');
    expect(JSON.parse(fs.at(-1)!).error).toMatchObject({ type: 'upstream_error' });
    expectExact();
  });

  it('a truncated JSON answer is a clear 502', async () => {
    setFaults({ truncateAfterChunks: 1, remaining: 1 });
    const r = await chat(false);
    expect(r.status).toBe(502);
    expect(r.json.error.type).toBe('upstream_error');
    expectExact();
  });

  it('a host slower than the stall timeout before its first token is a clear 504, billed nothing', async () => {
    setFaults({ latencyMs: 900, remaining: 1 });
    const before = accountingOf(gw, escrowId).costs;
    const r = await chat(true);
    const last = r.status === 200 ? JSON.parse(frames(r.text).at(-1)!) : r.json;
    expect(last.error).toMatchObject({ code: 'upstream_timeout' });
    expect(accountingOf(gw, escrowId).costs).toBe(before);
    expectExact();
  });

  it('a client that leaves before a non-streamed answer: the request ends billed as the host executed it; the escrow is exact', async () => {
    setFaults({ latencyMs: 1200, remaining: 1 });
    const endedBefore = accountingOf(gw, escrowId).ended;
    const abort = new AbortController();
    const started = Date.now();
    const sent = fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body(false)),
      signal: abort.signal,
    });
    while (gw.ctx.engine.escrow(escrowId)!.context.inFlight === 0 && Date.now() - started < 10_000) await new Promise((r) => setTimeout(r, 10));
    expect(gw.ctx.engine.escrow(escrowId)!.context.inFlight, 'the request in flight').toBe(1);
    abort.abort();
    await expect(sent).rejects.toThrow();
    // Over the devshard protocol the host's answer is read on after the client left (as devshardctl
    // does, for the host's Finish): the request ends once the host has answered (1.2 s here).
    while (accountingOf(gw, escrowId).ended === endedBefore && Date.now() - started < 10_000) await new Promise((r) => setTimeout(r, 10));
    expect(accountingOf(gw, escrowId).ended, 'the request ended after its host answered').toBe(endedBefore + 1);
    const last = requestRecords(gw.store.readStream(`escrow-${escrowId}`)).filter((r) => r.type === 'InferenceFailed' || r.type === 'InferenceFinished').at(-1)!;
    // The host executed it and its Finish charges it: billed what the host counted, like any answer.
    expect(last.type).toBe('InferenceFinished');
    expect(BigInt((last.data as { cost: string }).cost)).toBeGreaterThan(0n);
    expectExact();
  });

  it('a slow host within the timeouts still gives a complete answer', async () => {
    setFaults({ latencyMs: 250, remaining: 2 });
    const a = await chat(false);
    expect(a.status).toBe(200);
    expect(a.json.choices[0].message.content.length).toBeGreaterThan(0);
    const b = await chat(true);
    expect(b.status).toBe(200);
    expect(frames(b.text).at(-1)).toBe('[DONE]');
    expectExact();
  });

  it('a stall on one host only: the other slots keep answering', async () => {
    setFaults({ stallAfterChunks: 1, hosts: [0] });
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => chat(i % 2 === 0)));
    expect(results.every((r) => r.status === 200 || r.status === 504)).toBe(true);
    expect(results.some((r) => r.status === 200 && !r.text.includes('upstream_timeout'))).toBe(true);
    setFaults({});
    expectExact();
  });

  it('after all the faults: finalize and settle succeed (hosts sign), deposit = host costs + fees + refund', async () => {
    const f = await gw.call(`/devshard/${escrowId}/v1/finalize`, { method: 'POST' });
    expect(f.status).toBe(200);
    expect(f.json.signatures.length).toBeGreaterThanOrEqual(Math.floor((2 * f.json.host_stats.length) / 3) + 1);
    const s = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: {} });
    expect(s.status, s.text).toBe(200);
    const onChain = (await gw.ctx.chain.escrow(escrowId))!;
    expect(onChain.settled).toBe(true);
    // The chain pays what the hosts' state says (host_stats, from their Finish), not the log's count.
    const hostCosts = (f.json.host_stats as { cost: number }[]).reduce((n, h) => n + BigInt(h.cost), 0n);
    expect(hostCosts + BigInt(f.json.fees) + BigInt(s.json.refund)).toBe(onChain.amount);
  });
});
