/**
 * Money an operator can reconcile (issue 38, item 6): after settle, the devshard view
 * (GET /v1/admin/devshards/{id}) shows the chain's numbers, and says how the log's bill adds up to
 * them. Over the devshard protocol the chain pays each host its Finishes' costs plus a share of the
 * protocol fees (the create fee and fee_per_nonce for every Active diff, which no request's bill
 * holds); what a host charged beyond a request's bill (a client that left mid-stream) is in the log
 * as UsageRecovered; an inference whose Finish never reached a diff is billed by the log and not paid
 * by the chain. The view's `balance` is the chain's refund, `spent` its total payout, and
 * `chain_settlement.spent_breakdown` sums to it; `explain request` shows one request's bill against
 * its host's charge and the event that carries the difference.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { explainRequest, formatRequestExplanation } from '../../src/cli/commands/explain.js';
import { escrowStream } from '../../src/events/catalog.js';
import type { ProtocolTransport } from '../../src/network/devshard/protocol-transport.js';
import { setHostFaults, waitFor } from '../faults/helpers.js';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';
import { requestRecords } from '../helpers/request-records.js';

const CREATE_FEE = 10_000n; // the devnet's create_devshard_fee (src/devnet/chain/params.ts)
const FEE_PER_NONCE = 1_000n; // and its fee_per_nonce

const ask = (gw: TestGateway, i: number) => gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: `question ${i}` }], max_tokens: 24 } });

/** A streamed chat the client leaves after the first content chunk. */
async function leaveMidStream(gw: TestGateway): Promise<void> {
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
}

/** What the log's ends billed each nonce. */
function bills(gw: TestGateway, escrowId: string): Map<number, bigint> {
  const out = new Map<number, bigint>();
  for (const r of requestRecords(gw.store.readStream(escrowStream(escrowId)))) {
    if (r.type !== 'InferenceFinished' && r.type !== 'InferenceFailed') continue;
    const d = r.data as { nonce: number; cost: string };
    out.set(d.nonce, (out.get(d.nonce) ?? 0n) + BigInt(d.cost));
  }
  return out;
}

/** Finalize, then settle; answers the settle's JSON and the creator's balance change over the settle. */
async function finalizeAndSettle(gw: TestGateway, escrowId: string) {
  const f = await gw.call(`/devshard/${escrowId}/v1/finalize`, { method: 'POST' });
  expect(f.status, f.text).toBe(200);
  const creator = gw.ctx.engine.escrow(escrowId)!.context.creator!;
  const before = await gw.ctx.chain.balance(creator);
  const s = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: {} });
  expect(s.status, s.text).toBe(200);
  const creatorDelta = (await gw.ctx.chain.balance(creator)) - before;
  return { file: f.json, settle: s.json, creatorDelta };
}

/** The view agrees with the chain: balance = refund, spent = total payout, and the breakdown sums to spent. */
function expectChainNumbers(view: any, settle: any, creatorDelta: bigint, gw: TestGateway, escrowId: string) {
  const settled = gw.store.readStream(escrowStream(escrowId)).find((r) => r.type === 'EscrowSettled')!.data as { refund: string; totalPayout: string; fees: string };
  // The chain's refund, as the keeper's event says and as the creator received it (less the settle tx's fee).
  expect(view.balance).toBe(settled.refund);
  expect(view.balance).toBe(settle.refund);
  expect(BigInt(view.balance)).toBe(creatorDelta + (gw.ctx.chain.txFee?.().amount ?? 0n));
  expect(view.usable_balance).toBe(settled.refund);
  expect(view.spent).toBe(settled.totalPayout);
  expect(BigInt(view.spent) + BigInt(view.balance)).toBe(BigInt(view.amount));
  expect(view.chain_settlement).toMatchObject({ refund: settled.refund, total_payout: settled.totalPayout, fees: settled.fees, deposit: view.amount, tx_hash: settle.tx_hash });
  const b = view.chain_settlement.spent_breakdown;
  expect(b.protocol_fees).toBe(settled.fees);
  expect(BigInt(b.billed_requests) + BigInt(b.billed_before_import) + BigInt(b.recovered_usage) + BigInt(b.protocol_fees) + BigInt(b.unreconciled)).toBe(BigInt(view.spent));
  return b;
}

describe('after settle the devshard view shows the chain\'s money; a client that left mid-stream is billed what its host charged', () => {
  let gw: TestGateway;
  let escrowId: string;

  beforeAll(async () => {
    // Tokens slow enough to leave mid-stream.
    ({ gw, escrowId } = await startGatewayWithEscrow({ env: { DEVSHARD_HOST_PROTOCOL: 'devshard', DEVNET_TOKEN_DELAY_MS: '15' } }));
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  it('balance = the chain\'s refund, spent = billed requests + recovered usage + protocol fees = the total payout; explain shows the Finish and the UsageRecovered', async () => {
    for (let i = 1; i <= 2; i++) expect((await ask(gw, i)).status).toBe(200);
    await leaveMidStream(gw);
    // The gateway reads the host's stream on: its Finish of inference 3 waits for the next diff (the finalize round's).
    const session = (gw.ctx.network as ProtocolTransport).session(escrowId)!;
    await waitFor(() => session.pendingTxs().some((t) => t.tx.case === 'finishInference' && t.tx.value.inferenceId === 3n), 'the host Finish of inference 3', 15_000);
    await gw.ctx.engine.idle();
    const billed = bills(gw, escrowId);

    const { file, settle, creatorDelta } = await finalizeAndSettle(gw, escrowId);
    await gw.ctx.engine.idle();
    // 3 requests, each an Active diff paying fee_per_nonce (the finalize round and the Settlement diffs pay none).
    expect(BigInt(file.fees)).toBe(CREATE_FEE + 3n * FEE_PER_NONCE);
    const hostCosts = file.host_stats.reduce((n: bigint, h: { cost: number }) => n + BigInt(h.cost), 0n);
    expect(BigInt(settle.total_payout)).toBe(hostCosts + BigInt(file.fees));

    const view = (await gw.call(`/v1/admin/devshards/${escrowId}`)).json;
    expect(view.state).toBe('settled');
    const b = expectChainNumbers(view, settle, creatorDelta, gw, escrowId);
    // The host charged inference 3 in full; the log billed what the client got and recorded the rest.
    const recovered = gw.store.readStream(escrowStream(escrowId)).filter((r) => r.type === 'UsageRecovered');
    expect(recovered).toHaveLength(1);
    const charged3 = billed.get(3)! + BigInt((recovered[0]!.data as { cost: string }).cost);
    expect(b).toEqual({
      billed_requests: [...billed.values()].reduce((n, c) => n + c, 0n).toString(),
      billed_before_import: '0',
      recovered_usage: (recovered[0]!.data as { cost: string }).cost,
      protocol_fees: String(file.fees),
      unreconciled: '0',
    });
    expect(view.chain_settlement.host_costs).toBe(hostCosts.toString());
    // The same in the admin list (its data[] entries are the view).
    const listed = (await gw.call('/v1/admin/devshards')).json.data.find((d: { escrow_id: string }) => d.escrow_id === escrowId);
    expect(listed).toMatchObject({ balance: view.balance, spent: view.spent, chain_settlement: view.chain_settlement });

    // explain request: what the client was billed, what the host's Finish charged, and the event between.
    const x = explainRequest(gw.store, `devshard-${escrowId}-3`)!;
    expect(x.billing).toMatchObject({ billed: billed.get(3)!.toString(), charged: charged3.toString(), chargedBy: { kind: 'Finish' }, unbilled: '0', inSettlement: true });
    expect(x.billing!.recovered).toEqual([{ position: recovered[0]!.position, cost: (recovered[0]!.data as { cost: string }).cost, slotId: 0 }]);
    expect(x.billing!.chargedBy!.nonce).toBeLessThanOrEqual(file.nonce);
    const text = formatRequestExplanation(x);
    expect(text).toContain(`billing: the client was billed ${billed.get(3)}`);
    expect(text).toContain(`the host's MsgFinishInference charged ${charged3}`);
    expect(text).toContain(`UsageRecovered at position ${recovered[0]!.position}: ${(recovered[0]!.data as { cost: string }).cost} to slot 0`);
    // A request answered in full: billed what its Finish charged, nothing recovered.
    const x1 = explainRequest(gw.store, `devshard-${escrowId}-1`)!;
    expect(x1.billing).toMatchObject({ billed: billed.get(1)!.toString(), charged: billed.get(1)!.toString(), recovered: [], unbilled: '0' });

    // After a restart the view is the same (read back from the log).
    gw = await gw.restart();
    expect((await gw.call(`/v1/admin/devshards/${escrowId}`)).json).toMatchObject({ balance: view.balance, spent: view.spent, chain_settlement: view.chain_settlement });
  }, 90_000);
});

describe('an inference whose Finish never reaches a diff: billed by the log, not paid by the chain', () => {
  let gw: TestGateway;
  let escrowId: string;

  beforeAll(async () => {
    ({ gw, escrowId } = await startGatewayWithEscrow({ env: { DEVSHARD_HOST_PROTOCOL: 'devshard', GATEWAY_STALL_TIMEOUT_MS: '400', DEVNET_TOKEN_DELAY_MS: '2' } }));
  }, 60_000);
  afterAll(async () => {
    if (gw?.devnet) setHostFaults(gw.devnet, {});
    await disposeTestGateway(gw);
  });

  it('the view\'s balance is still the chain\'s refund; the breakdown names the difference (unreconciled < 0) and explain says the settlement pays nothing for it', async () => {
    expect((await ask(gw, 1)).status).toBe(200);
    // The executor of nonce 2 goes silent after a few chunks: the stall timeout ends the request, billed
    // what was delivered, and its host never sends a MsgFinishInference.
    setHostFaults(gw.devnet!, { stallAfterChunks: 3, remaining: 1 });
    const stalled = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'stall' }], max_tokens: 24, stream: true }),
    });
    await stalled.text();
    await gw.ctx.engine.idle();
    const billed = bills(gw, escrowId);
    expect(billed.get(2)).toBeGreaterThan(0n);

    const { file, settle, creatorDelta } = await finalizeAndSettle(gw, escrowId);
    await gw.ctx.engine.idle();
    const view = (await gw.call(`/v1/admin/devshards/${escrowId}`)).json;
    const b = expectChainNumbers(view, settle, creatorDelta, gw, escrowId);
    expect(b.recovered_usage).toBe('0');
    expect(BigInt(b.protocol_fees)).toBe(CREATE_FEE + 2n * FEE_PER_NONCE);
    // The settlement charges nonce 1 only; nonce 2's bill is the log's alone, and the refund returns it.
    expect(BigInt(b.unreconciled)).toBe(-billed.get(2)!);
    expect(BigInt(file.host_stats.reduce((n: number, h: { cost: number }) => n + h.cost, 0))).toBe(billed.get(1)!);

    const x = explainRequest(gw.store, `devshard-${escrowId}-2`)!;
    expect(x.billing).toMatchObject({ billed: billed.get(2)!.toString(), charged: null, recovered: [], unbilled: (-billed.get(2)!).toString(), inSettlement: false });
    expect(x.billing!.chargedBy).toBeUndefined();
    const text = formatRequestExplanation(x);
    expect(text).toContain('no diff carries its Finish or Timeout');
    expect(text).toContain(`the log billed ${billed.get(2)} more than the protocol charged`);
  }, 90_000);
});
