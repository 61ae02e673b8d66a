/**
 * The log's bill follows the protocol's (src/gateway/session/billing.ts), through the whole stack:
 * a client that leaves a streamed answer early is billed in the log what it received; the host
 * finishes the answer (the gateway reads its stream on) and its MsgFinishInference, carried by a
 * later diff, charges all of it. The log then records the difference (UsageRecovered on the
 * executor's slot), so the escrow's spent in the log equals what the settlement pays the hosts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProtocolTransport } from '../../src/network/devshard/protocol-transport.js';
import { InferenceStatus } from '../../src/protocol/index.js';
import { escrowStream } from '../../src/events/catalog.js';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';
import { requestRecords } from '../helpers/request-records.js';
import { holdHostRequests } from '../helpers/waits.js';
import { isFinalizing } from '../../src/gateway/escrows/finalize-hold.js';
import { waitFor } from '../faults/helpers.js';

describe('billing over the devshard protocol: the host Finish decides what an inference costs', () => {
  let gw: TestGateway;
  let escrowId: string;

  beforeAll(async () => {
    // Tokens slow enough to leave mid-stream.
    ({ gw, escrowId } = await startGatewayWithEscrow({ env: { DEVSHARD_HOST_PROTOCOL: 'devshard', DEVNET_TOKEN_DELAY_MS: '15' } }));
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  const session = () => (gw.ctx.network as ProtocolTransport).session(escrowId)!;
  const spent = () => BigInt(gw.ctx.engine.escrow(escrowId)!.context.spent);
  const ask = (i: number) => gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: `question ${i}` }], max_tokens: 40 } });

  it('a client that leaves mid-stream: the log bills what it got, then what the host Finish charged; spent equals the hosts\' costs', async () => {
    const ac = new AbortController();
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'a long answer, please' }], max_tokens: 40, stream: true }),
      signal: ac.signal,
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('"content"')) text += new TextDecoder().decode((await reader.read()).value);
    ac.abort();
    await reader.cancel().catch(() => undefined);

    // The gateway reads the host's stream on: its Finish waits in the session for the next diff.
    await waitFor(() => session().pendingTxs().some((t) => t.tx.case === 'finishInference' && t.tx.value.inferenceId === 1n), 'the host Finish of inference 1 to reach the session', 15_000);
    await gw.ctx.engine.idle();
    const left = requestRecords(gw.store.readStream(escrowStream(escrowId))).find((r) => (r.type === 'InferenceFinished' || r.type === 'InferenceFailed') && (r.data as { nonce: number }).nonce === 1)!;
    const billedAtEnd = BigInt((left.data as { cost: string }).cost);

    // The next request's diff carries the Finish: the replica charges it, the log follows.
    expect((await ask(2)).status).toBe(200);
    await gw.ctx.engine.idle();
    const rec = session().replica.inference(1n)!;
    expect(rec.status).toBe(InferenceStatus.Finished);
    expect(rec.actualCost).toBeGreaterThan(billedAtEnd);
    const recovered = gw.store.readStream(escrowStream(escrowId)).filter((r) => r.type === 'UsageRecovered');
    expect(recovered).toHaveLength(1);
    expect(recovered[0]!.data).toMatchObject({ slotId: 1, cost: (rec.actualCost - billedAtEnd).toString() });
    expect((recovered[0]!.data as { reason: string }).reason).toMatch(/inference 1: its host's MsgFinishInference charged/);

    // Every Finish in (one more request carries nonce 2's): the log's spent is the hosts' cost.
    expect((await ask(3)).status).toBe(200);
    await gw.ctx.engine.idle();
    const hostCost = session().replica.hostStats().reduce((a, s) => a + s.cost, 0n);
    const billedInference3 = BigInt(
      (requestRecords(gw.store.readStream(escrowStream(escrowId))).find((r) => r.type === 'InferenceFinished' && (r.data as { nonce: number }).nonce === 3)!.data as { cost: string }).cost,
    );
    expect(spent()).toBe(hostCost + billedInference3);
    expect(gw.ctx.billing!.waiting(escrowId)).toEqual({ billed: 1, charged: 0 });
  }, 60_000);

  it('a request answered in full is billed once: no UsageRecovered when the host charged what the log billed', async () => {
    const before = gw.store.readStream(escrowStream(escrowId)).filter((r) => r.type === 'UsageRecovered').length;
    for (let i = 4; i < 8; i++) expect((await ask(i)).status).toBe(200);
    await gw.ctx.engine.idle();
    expect(gw.store.readStream(escrowStream(escrowId)).filter((r) => r.type === 'UsageRecovered')).toHaveLength(before);
  }, 60_000);
});

describe('finalize while requests are under way (devshard protocol)', () => {
  let gw: TestGateway;
  let escrowId: string;

  beforeAll(async () => {
    ({ gw, escrowId } = await startGatewayWithEscrow({ env: { DEVNET_TOKEN_DELAY_MS: '15', GATEWAY_FINALIZE_DRAIN_MS: '30000' } }));
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  it('takes no new chat, lets the requests in flight end, then finalizes: their Finishes are in the settlement and the log bills what it pays', async () => {
    const streamed = (i: number) =>
      fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `long ${i}` }], max_tokens: 30, stream: true }),
      }).then(async (r) => ({ status: r.status, text: await r.text() }));
    // The hosts hold the four until finalize holds the escrow: all are in flight when it starts.
    const { held, release } = holdHostRequests(gw.devnet!.simulatedHosts.faults, 4);
    const chats = [0, 1, 2, 3].map(streamed);
    let finalized: ReturnType<typeof gw.call>;
    try {
      await held;
      expect(gw.ctx.engine.escrow(escrowId)!.context.inFlight).toBe(4);
      finalized = gw.call(`/devshard/${escrowId}/v1/finalize`, { method: 'POST' });
      // Finalize holds the escrow before it waits for the four (finalize-hold.ts); no log event marks that.
      await waitFor(() => isFinalizing(gw.ctx, escrowId), 'finalize to hold the escrow');
      // held for finalize: no new chat is routed to it (the only escrow: 503, nothing started)
      const late = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'late' }], max_tokens: 4 } });
      expect(late.status).toBe(503);
    } finally {
      release();
    }
    const answers = await Promise.all(chats);
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.text).toContain('data: [DONE]');
    }
    const f = await finalized!;
    expect(f.status, f.text).toBe(200);
    await gw.ctx.engine.idle();
    const s = session(gw, escrowId);
    for (let id = 1n; id <= 4n; id++) expect(s.replica.inference(id)?.status ?? InferenceStatus.Finished, `inference ${id}`).toBe(InferenceStatus.Finished);
    const settlement = (gw.store.readStream(escrowStream(escrowId)).filter((r) => r.type === 'EscrowFinalized').at(-1)!.data as { settlement: { hostStats: { cost: string }[] } }).settlement;
    const hostCosts = settlement.hostStats.reduce((n, h) => n + BigInt(h.cost), 0n);
    expect(hostCosts).toBeGreaterThan(0n);
    expect(BigInt(gw.ctx.engine.escrow(escrowId)!.context.spent)).toBe(hostCosts);
  }, 60_000);
});

function session(gw: TestGateway, escrowId: string) {
  return (gw.ctx.network as ProtocolTransport).session(escrowId)!;
}
