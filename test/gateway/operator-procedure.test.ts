/**
 * The spec's operator procedure end to end on a real gateway and the embedded devnet: status,
 * create (and a not-allowlisted failure), access mode flip, chat, finalize, settle (the chain says
 * settled, the creator got the refund), settle again (no second tx), deactivate, delete; the
 * finalize path rules; and a settle deferred while a streamed request is in flight.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeys } from '../../src/config/index.js';
import { planCompletion } from '../../src/devnet/hosts/completion-plan.js';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { requestRecords } from '../helpers/request-records.js';
import { expectedRefund, settlementCharges } from '../helpers/settlement.js';

const AMOUNT = 10_000_000_000n;
const chatBody = (content = 'hello there') => ({ model: MODEL, messages: [{ role: 'user', content }], max_tokens: 16 });

async function chainEscrow(gw: TestGateway, id: string): Promise<{ id: string; settled: boolean; creator: string; amount: string }> {
  const r = await fetch(`${gw.devnet!.url}/productscience/inference/inference/devshard_escrow/${id}`);
  expect(r.status).toBe(200);
  return ((await r.json()) as { escrow: { id: string; settled: boolean; creator: string; amount: string } }).escrow;
}

async function balanceOf(gw: TestGateway, address: string): Promise<bigint> {
  const r = await fetch(`${gw.devnet!.url}/cosmos/bank/v1beta1/balances/${address}`);
  expect(r.status).toBe(200);
  const j = (await r.json()) as { balances: { denom: string; amount: string }[] };
  return BigInt(j.balances.find((b) => b.denom === 'ngonka')?.amount ?? '0');
}

const eventsOfType = (gw: TestGateway, type: string) => [...gw.store.readAll()].filter((r) => r.type === type);

describe('operator procedure', () => {
  let gw: TestGateway;
  const keys = generateKeys();
  // The settle key is named by private_key_env: a variable other than DEVSHARD_PRIVATE_KEY.
  const SETTLE_ENV = 'OPERATOR_CREATOR_KEY';
  beforeAll(async () => {
    gw = await startTestGateway({ keys, env: { [SETTLE_ENV]: keys.privateKey } });
  });
  afterAll(() => disposeTestGateway(gw));

  let a: string;
  let creator: string;

  it('5. GET /v1/status answers JSON without a key', async () => {
    const r = await gw.call('/v1/status', { key: 'none' });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/application\/json/);
    // devshardctl's `runtimes` is an integer (the devshards loaded); ours per model is `model_runtimes`.
    expect(r.json.runtimes).toBe(0);
    expect(Array.isArray(r.json.model_runtimes)).toBe(true);
    expect(typeof r.json.capacity.models).toBe('object');
    expect(r.json.active_requests).toBe(0);
  });

  it('6a. a creator not on the allowlist: 403 naming the rule and the remedy, no tx sent, no fee spent', async () => {
    const bad = gw.devnet!.notAllowlisted;
    const before = await balanceOf(gw, bad.address);
    const r = await gw.call('/v1/admin/escrows', { body: { amount: AMOUNT.toString(), model_id: MODEL, private_key: bad.privateKeyHex, chain_id: 'shardgate-devnet', register: true } });
    expect(r.status, r.text).toBeGreaterThanOrEqual(400);
    expect(r.status).toBeLessThan(500);
    expect(r.json.error.code).toBe('not_allowlisted');
    expect(r.json.error.message).toMatch(/allowlist/i);
    expect(r.text).not.toContain(bad.privateKeyHex);
    expect(r.status).toBe(403);
    // Refused by the pre-check: no intent, nothing registered, not even the fee spent.
    expect(eventsOfType(gw, 'EscrowCreateRequested')).toHaveLength(0);
    expect(eventsOfType(gw, 'EscrowCreateFailed')).toHaveLength(0);
    expect((await gw.call('/v1/admin/devshards')).json.data).toEqual([]);
    expect(await balanceOf(gw, bad.address)).toBe(before);
  });

  it('6b. create and register an escrow: the answer names it, the chain has it', async () => {
    creator = gw.devnet!.creators[0]!.address;
    const before = await balanceOf(gw, creator);
    const r = await gw.call('/v1/admin/escrows', { body: { amount: AMOUNT.toString(), model_id: MODEL, private_key: keys.privateKey, chain_id: 'shardgate-devnet', register: true } });
    expect(r.status, r.text).toBe(200);
    a = r.json.id;
    expect(a).toMatch(/^[0-9]+$/);
    expect(r.json.escrow_id).toBe(Number(a));
    expect(r.json.tx_hash).toMatch(/^[0-9A-F]{64}$/);
    expect(r.json.creator).toBe(creator);
    expect(Number.isInteger(r.json.epoch_index)).toBe(true);
    expect(r.json.state).toBe('active');
    expect(r.text).not.toContain(keys.privateKey);
    const onChain = await chainEscrow(gw, a);
    expect(onChain.settled).toBe(false);
    expect(onChain.creator).toBe(creator);
    expect(onChain.amount).toBe(AMOUNT.toString());
    expect(before - (await balanceOf(gw, creator))).toBeGreaterThanOrEqual(AMOUNT);
    const status = await gw.call('/v1/status', { key: 'none' });
    expect(status.json.capacity.models[MODEL].routable_devshard_ids).toEqual([a]);
    expect(status.json.capacity.models[MODEL].routable_devshards).toBe(1);
    expect(status.json.capacity.models[MODEL].access_mode).toBe('admin_only');
    // DELETE before settlement is refused.
    const del = await gw.call(`/v1/admin/devshards/${a}`, { method: 'DELETE' });
    expect(del.status).toBe(409);
    expect(del.json.error.code).toBe('not_settled');
  });

  it('6c. access mode: admin_only refuses a client key; api_key lets it chat', async () => {
    const refused = await gw.call('/v1/chat/completions', { key: 'client', body: chatBody() });
    expect(refused.status).toBe(401);
    expect(refused.json.error.message).toContain('requires an admin API key');
    const s = await gw.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }] } });
    expect(s.status, s.text).toBe(200);
    expect(s.json.model_limits).toEqual([{ model_id: MODEL, access_mode: 'api_key' }]);
    expect((await gw.call('/v1/admin/settings')).json.model_limits).toEqual([{ model_id: MODEL, access_mode: 'api_key' }]);
    const ok = await gw.call('/v1/chat/completions', { key: 'client', body: chatBody() });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.headers.get('x-devshard-escrow-id')).toBe(a);
    expect((await gw.call('/v1/status', { key: 'none' })).json.capacity.models[MODEL].access_mode).toBe('api_key');
  });

  it('7a. serve, then finalize (/v1/finalize with one escrow): settlement data; no new requests', async () => {
    for (let i = 0; i < 3; i++) expect((await gw.call('/v1/chat/completions', { key: 'client', body: chatBody(`request ${i}`) })).status).toBe(200);
    const view = (await gw.call(`/v1/admin/devshards/${a}`)).json;
    expect(view.nonce).toBe(4);
    // Settle before finalize finalizes first (devshardctl), but only once the key is usable: an
    // unset variable is a 400 naming it, and nothing is finalized. (It used to be a 409 naming
    // finalize; devshardctl's settle finalizes itself, test/compat/devshardctl.test.ts.)
    const early = await gw.call(`/v1/admin/devshards/${a}/settle`, { body: { private_key_env: 'NO_SUCH_KEY_VAR' } });
    expect(early.status).toBe(400);
    expect(early.json.error.message).toContain('NO_SUCH_KEY_VAR');
    expect((await gw.call(`/v1/admin/devshards/${a}`)).json.state).toBe('active');
    const f = await gw.call('/v1/finalize', { method: 'POST' });
    expect(f.status, f.text).toBe(200);
    const doc = f.json;
    // Exactly the settlement file of the devshard protocol (docs/protocol.md step 9).
    expect(doc.escrow_id).toBe(a);
    expect(doc.version).toBe('v4.1');
    expect(typeof doc.fees).toBe('number');
    // MsgFinalizeRound at nonce 5, then one diff per slot: the Settlement phase at 5 + 3.
    expect(doc.nonce).toBe(8);
    expect(Buffer.from(doc.state_root, 'base64')).toHaveLength(32);
    expect(doc.host_stats).toHaveLength(3);
    const claimed = doc.host_stats.reduce((n: bigint, h: { cost: number }) => n + BigInt(h.cost), 0n);
    expect(claimed).toBe(BigInt(view.spent));
    expect(doc.signatures.length).toBeGreaterThanOrEqual(3);
    expect((await gw.call(`/v1/admin/devshards/${a}`)).json.state).toBe('finalized');
    const after = await gw.call('/v1/chat/completions', { key: 'client', body: chatBody() });
    expect(after.status).toBe(503);
    expect(after.json.error.code).toBe('no_active_escrow');
    expect(Number(after.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  let refund: bigint;
  it('7b. settle with private_key_env: the chain says settled, the creator got the refund', async () => {
    const spent = BigInt((await gw.call(`/v1/admin/devshards/${a}`)).json.spent);
    const before = await balanceOf(gw, creator);
    // A variable that is not set: 400 naming it, nothing broadcast.
    const unset = await gw.call(`/v1/admin/devshards/${a}/settle`, { body: { private_key_env: 'NO_SUCH_KEY_VAR' } });
    expect(unset.status).toBe(400);
    expect(unset.json.error.message).toContain('NO_SUCH_KEY_VAR');
    expect((await gw.call(`/v1/admin/devshards/${a}`)).json.state).toBe('finalized');
    const r = await gw.call(`/v1/admin/devshards/${a}/settle`, { body: { private_key_env: SETTLE_ENV } });
    expect(r.status, r.text).toBe(200);
    expect(r.json.status).toBe('settled');
    expect(r.json.settled).toBe(true);
    expect(r.json.already).toBe(false);
    expect(r.json.tx_hash).toMatch(/^[0-9A-F]{64}$/);
    refund = BigInt(r.json.refund);
    expect(settlementCharges(gw.store, a).hostCosts).toBe(spent);
    expect(refund).toBe(expectedRefund(gw.store, a, AMOUNT));
    expect((await chainEscrow(gw, a)).settled).toBe(true);
    // The unused deposit is back with the creator, minus the settle tx's gas fee.
    const gasFee = gw.ctx.config.chain.txFeeAmount;
    expect((await balanceOf(gw, creator)) - before).toBe(refund - gasFee);
    // The record names the env var, never the key.
    const requested = eventsOfType(gw, 'EscrowSettleRequested');
    expect(JSON.stringify(requested)).toContain(SETTLE_ENV);
    expect(JSON.stringify([...gw.store.readAll()])).not.toContain(keys.privateKey);
  });

  it('7c. settling a settled escrow answers its state and sends no second tx', async () => {
    const seq = gw.devnet!.chain.state.accounts[creator]!.sequence;
    const balance = await balanceOf(gw, creator);
    const first = eventsOfType(gw, 'EscrowSettled');
    const r = await gw.call(`/v1/admin/devshards/${a}/settle`, { body: { private_key_env: SETTLE_ENV } });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ status: 'settled', settled: true, already: true, refund: refund.toString() });
    await gw.devnet!.chain.waitForHeight(gw.devnet!.chain.height + 2);
    expect(gw.devnet!.chain.state.accounts[creator]!.sequence).toBe(seq);
    expect(await balanceOf(gw, creator)).toBe(balance);
    expect(eventsOfType(gw, 'EscrowSettled')).toHaveLength(first.length);
    expect(eventsOfType(gw, 'EscrowSettleRequested')).toHaveLength(1);
  });

  it('7d. deactivate, then delete the settled escrow; the chain record remains', async () => {
    const d = await gw.call(`/v1/admin/devshards/${a}/deactivate`, { method: 'POST' });
    expect(d.status, d.text).toBe(200);
    expect(d.json.state).toBe('deactivated');
    expect(d.json.settled).toBe(true);
    const del = await gw.call(`/v1/admin/devshards/${a}`, { method: 'DELETE' });
    expect(del.status, del.text).toBe(200);
    expect(del.json).toMatchObject({ escrow_id: a, removed: true });
    expect((await gw.call(`/v1/admin/devshards/${a}`)).status).toBe(404);
    expect((await gw.call('/v1/admin/devshards')).json.data.map((e: { escrow_id: string }) => e.escrow_id)).not.toContain(a);
    expect((await chainEscrow(gw, a)).settled).toBe(true);
  });

  it('finalize paths: /devshard//v1/finalize is 404 with an empty body; /v1/finalize needs exactly one escrow', async () => {
    const empty = await gw.call('/devshard//v1/finalize', { method: 'POST' });
    expect(empty.status).toBe(404);
    expect(empty.text).toBe('');
    const none = await gw.call('/v1/finalize', { method: 'POST' });
    expect(none.status).toBe(400);
    expect(none.json.error.code).toBe('not_single_escrow');

    const b = await createEscrowViaApi(gw);
    const c = await createEscrowViaApi(gw);
    const two = await gw.call('/v1/finalize', { method: 'POST' });
    expect(two.status).toBe(400);
    expect(two.json.error.code).toBe('not_single_escrow');
    expect(two.json.error.message).toContain('/devshard/{id}/v1/finalize');
    // Nothing was finalized by the refused call.
    expect((await gw.call(`/v1/admin/devshards/${b}`)).json.state).toBe('active');
    expect((await gw.call(`/v1/admin/devshards/${c}`)).json.state).toBe('active');

    // Deactivating one escrow leaves the other serving; deleting an unsettled one is refused.
    expect((await gw.call(`/v1/admin/devshards/${b}/deactivate`, { method: 'POST' })).json.state).toBe('deactivated');
    for (let i = 0; i < 3; i++) {
      const r = await gw.call('/v1/chat/completions', { key: 'client', body: chatBody(`after deactivate ${i}`) });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-devshard-escrow-id')).toBe(c);
    }
    const del = await gw.call(`/v1/admin/devshards/${b}`, { method: 'DELETE' });
    expect(del.status).toBe(409);
    // A deactivated escrow can still be finalized and settled (the operator gets the deposit back).
    const f = await gw.call(`/devshard/${b}/v1/finalize`, { method: 'POST' });
    expect(f.status, f.text).toBe(200);
    expect(f.json.escrow_id).toBe(b);
    const s = await gw.call(`/v1/admin/devshards/${b}/settle`, { body: { private_key_env: SETTLE_ENV } });
    expect(s.status, s.text).toBe(200);
    expect(s.json.refund).toBe(expectedRefund(gw.store, b, AMOUNT).toString());
    expect(settlementCharges(gw.store, b).hostCosts).toBe(0n); // it served nothing: only the session's fees
    expect((await gw.call(`/v1/admin/devshards/${b}`, { method: 'DELETE' })).status).toBe(200);
    // An unknown id is 404 on the per-escrow routes.
    expect((await gw.call('/devshard/999999/v1/finalize', { method: 'POST' })).status).toBe(404);
  });
});

/** A prompt whose simulated answer is long (many streamed chunks), found with the hosts' own planner. */
function longPrompt(minPieces: number): string {
  for (let i = 0; i < 500; i++) {
    const content = `tell me a long story ${i}`;
    const plan = planCompletion({ model: MODEL, messages: [{ role: 'user', content }] });
    if (plan.pieces.length >= minPieces) return content;
  }
  throw new Error('no long prompt found');
}

describe('settle deferred while a streamed request is in flight', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    // One request at a time: a second chat while a stream is in flight meets the limiter.
    gw = await startTestGateway({ env: { DEVNET_TOKEN_DELAY_MS: '50', GATEWAY_MAX_CONCURRENT_REQUESTS: '1' } });
  });
  afterAll(() => disposeTestGateway(gw));

  it('answers 202 deferred, the stream ends normally, then the settle completes by itself', async () => {
    const id = await createEscrowViaApi(gw);
    const content = longPrompt(40);
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content }], stream: true, stream_options: { include_usage: true } }),
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = decoder.decode((await reader.read()).value);
    expect(text).toContain('data: ');
    expect((await gw.call(`/v1/admin/devshards/${id}`)).json.in_flight).toBe(1);
    const limited = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'second' }], max_tokens: 4 } });
    expect(limited.status).toBe(429);
    expect(limited.json.error.type).toBe('rate_limit_error');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await gw.call('/v1/status', { key: 'none' })).json.active_requests).toBe(1);

    const f = await gw.call(`/devshard/${id}/v1/finalize`, { method: 'POST' });
    expect(f.status, f.text).toBe(200);
    const s = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { private_key_env: 'DEVSHARD_PRIVATE_KEY' } });
    expect(s.status, s.text).toBe(202);
    expect(s.json).toMatchObject({ status: 'deferred', settled: false, in_flight: 1 });
    expect((await gw.call(`/v1/admin/devshards/${id}`)).json.state).toBe('settleDeferred');
    expect((await chainEscrow(gw, id)).settled).toBe(false);

    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(text).not.toContain('"error"');
    const usageChunk = text
      .split('\n\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)) as { usage?: { total_tokens: number } })
      .find((c) => c.usage);
    expect(usageChunk?.usage?.total_tokens).toBeGreaterThan(40);

    const deadline = Date.now() + 10_000;
    while (!(await chainEscrow(gw, id)).settled) {
      if (Date.now() > deadline) throw new Error('deferred settle did not complete');
      await new Promise((r) => setTimeout(r, 100));
    }
    // The chain commits first; the gateway records the outcome when the broadcast returns.
    let view = (await gw.call(`/v1/admin/devshards/${id}`)).json;
    while (view.state !== 'settled' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      view = (await gw.call(`/v1/admin/devshards/${id}`)).json;
    }
    expect(view.state).toBe('settled');
    expect(view.in_flight).toBe(0);
    // The chain refunds what the recorded settlement leaves. It was made at finalize, while the
    // request was in flight: over the devshard protocol nothing after MsgFinalizeRound enters it, so
    // the streamed request is not in host_stats (the log bills it; the chain does not).
    const settled = [...gw.store.readAll()].filter((r) => r.type === 'EscrowSettled').at(-1)!;
    const { refund, totalPayout } = settled.data as { refund: string; totalPayout: string };
    expect(BigInt(refund)).toBe(expectedRefund(gw.store, id, AMOUNT));
    // Once settled the view shows the chain's numbers, and its breakdown names the request the
    // settlement did not pay: billed by the log, unreconciled by the same amount.
    const bill = BigInt(usageChunk!.usage!.total_tokens) * 1000n;
    expect(BigInt(view.spent)).toBe(BigInt(totalPayout));
    expect(BigInt(view.balance)).toBe(BigInt(refund));
    expect(BigInt(view.chain_settlement.spent_breakdown.billed_requests)).toBe(bill);
    expect(BigInt(view.chain_settlement.spent_breakdown.unreconciled)).toBe(-bill);
  });

  it('a client that disconnects mid-stream cancels the host request; the usage so far is accounted', async () => {
    const id = await createEscrowViaApi(gw);
    const content = longPrompt(40);
    const abort = new AbortController();
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content }], stream: true }),
      signal: abort.signal,
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let seen = '';
    while ((seen.match(/"content":"/g) ?? []).length < 4) seen += new TextDecoder().decode((await reader.read()).value);
    abort.abort();
    const deadline = Date.now() + 5000;
    let view = (await gw.call(`/v1/admin/devshards/${id}`)).json;
    while (view.in_flight !== 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      view = (await gw.call(`/v1/admin/devshards/${id}`)).json;
    }
    expect(view.in_flight).toBe(0);
    expect(view.reserved).toBe('0');
    const ended = requestRecords(gw.store.readStream(`escrow-${id}`)).filter((r) => r.type === 'InferenceFailed' || r.type === 'InferenceFinished');
    expect(ended).toHaveLength(1);
    expect(ended[0]!.type).toBe('InferenceFailed');
    const data = ended[0]!.data as { nonce: number; reason: string; usage: { promptTokens: number; completionTokens: number; totalTokens: number }; cost: string };
    expect(data.nonce).toBe(1);
    expect(data.reason).toMatch(/disconnect|abort|closed/i);
    // Billed for what was delivered: the prompt and some, not all, of the answer.
    expect(data.usage.completionTokens).toBeGreaterThanOrEqual(3);
    expect(data.usage.completionTokens).toBeLessThan(planCompletion({ model: MODEL, messages: [{ role: 'user', content }] }).pieces.length);
    expect(BigInt(data.cost)).toBe(BigInt(data.usage.totalTokens) * 1000n);
    expect(view.spent).toBe(data.cost);
    // The interrupted request settles; the chain pays the host's own count (its Finish), which may
    // exceed what the client received (docs/protocol.md: the bill after an abort is our count).
    expect((await gw.call(`/devshard/${id}/v1/finalize`, { method: 'POST' })).status).toBe(200);
    const s = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: {} });
    expect(s.status, s.text).toBe(200);
    expect(BigInt(s.json.refund)).toBe(expectedRefund(gw.store, id, AMOUNT));
  });
});
