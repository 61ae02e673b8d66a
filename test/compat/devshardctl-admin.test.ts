/**
 * devshardctl's admin status codes and bodies where our spec is silent (issue 30), each pinned to
 * the function of gonka devshard/cmd/devshardctl at 8a35022 it comes from; and where devshardctl
 * is unsafe, our refusal, which says why in the body.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventsFile } from '../../src/events/storage-path.js';
import { startClientGateway } from '../clients/helpers.js';
import { openStream } from './open-stream.js';
import { startFaultGateway, type FaultGateway } from '../faults/helpers.js';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { generateKeys } from '../../src/config/index.js';
import { deterministicKeyHex } from '../../src/chain/keys.js';
import { createEscrowBodySchema, settleBodySchema } from '../../src/http/schemas/admin.js';

async function chainEscrow(gw: TestGateway, id: string): Promise<{ settled: boolean; creator: string }> {
  const res = await fetch(`${gw.devnet!.url}/productscience/inference/inference/devshard_escrow/${id}`);
  return ((await res.json()) as { escrow: { settled: boolean; creator: string } }).escrow;
}

const stateOf = async (gw: TestGateway, id: string): Promise<string> => (await gw.call(`/v1/admin/devshards/${id}`)).json.state;

describe('devshardctl admin: create, register, settle, delete', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = (await startClientGateway({ tokenDelayMs: 20, escrow: false })).gw;
  });
  afterAll(() => disposeTestGateway(gw));

  it('POST /v1/admin/escrows with devshardctl\'s body: the key from DEVSHARD_PRIVATE_KEY, registered by default, its 200 shape (gateway.go handleAdminEscrows)', async () => {
    const r = await gw.call('/v1/admin/escrows', { body: { amount: 10_000_000_000, model_id: MODEL } });
    expect(r.status, r.text).toBe(200);
    const b = r.json;
    // escrow_id a number (uint64), tx_hash, creator, registered true (the default), id, model, storage_path.
    expect(typeof b.escrow_id).toBe('number');
    expect(b.id).toBe(String(b.escrow_id));
    expect(b.tx_hash).toMatch(/^[0-9A-F]{64}$/);
    expect(b.creator).toBe(gw.devnet!.creators[0]!.address);
    expect(b.registered).toBe(true);
    expect(b.model).toBe(MODEL);
    expect(b.storage_path).toBe(eventsFile(gw.storageDir));
    // Ours beside.
    expect(b.state).toBe('active');
    expect(b.model_id).toBe(MODEL);
    expect(r.text).not.toContain(gw.keys.privateKey);
    // The key is recorded by its variable's name, never itself.
    const requested = [...gw.store.readAll()].filter((e) => e.type === 'EscrowCreateRequested').at(-1)!;
    expect((requested.data as { keySource: unknown }).keySource).toEqual({ kind: 'env', name: 'DEVSHARD_PRIVATE_KEY' });
    expect(JSON.stringify([...gw.store.readAll()])).not.toContain(gw.keys.privateKey);
    const status = (await gw.call('/v1/status', { key: 'none' })).json;
    expect(status.devshards.find((d: any) => d.id === b.id)).toMatchObject({ active: true });
  });

  it('POST /v1/admin/escrows: register false, and key errors as 400s naming the rule', async () => {
    const unregistered = await gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, register: false, private_key_env: 'DEVSHARD_PRIVATE_KEY' } });
    expect(unregistered.status, unregistered.text).toBe(200);
    expect(unregistered.json).toMatchObject({ registered: false, state: 'created' });
    const unset = await gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key_env: 'NO_SUCH_KEY_VAR' } });
    expect(unset.status).toBe(400);
    expect(unset.json.error).toMatchObject({ code: 'creator_key_unavailable', param: 'private_key_env' });
    expect(unset.json.error.message).toContain('NO_SUCH_KEY_VAR');
    const both = await gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key: gw.keys.privateKey, private_key_env: 'DEVSHARD_PRIVATE_KEY' } });
    expect(both.status).toBe(400);
    expect(both.json.error.code).toBe('ambiguous_key');
    expect(both.text).not.toContain(gw.keys.privateKey);
  });

  it('POST /v1/admin/devshards: 409 "devshard already active"; re-activates a deactivated id with {id, active, model, storage_path} (gateway.go handleAdminAddDevshard)', async () => {
    const id = await createEscrowViaApi(gw);
    const again = await gw.call('/v1/admin/devshards', { body: { id } });
    expect(again.status).toBe(409);
    expect(again.json.error.message).toContain('devshard already active');
    expect(again.json.error.code).toBe('already_active');
    expect((await gw.call(`/v1/admin/devshards/${id}/deactivate`, { method: 'POST' })).json.state).toBe('deactivated');
    const back = await gw.call('/v1/admin/devshards', { body: { id: Number(id), private_key_env: 'DEVSHARD_PRIVATE_KEY', model: MODEL } });
    expect(back.status, back.text).toBe(200);
    expect(back.json).toMatchObject({ id, active: true, model: MODEL, storage_path: eventsFile(gw.storageDir), state: 'active' });
    const status = (await gw.call('/v1/status', { key: 'none' })).json;
    expect(status.devshards.find((d: any) => d.id === id)).toMatchObject({ active: true });
    // A model the devshard does not serve is refused before anything changes.
    await gw.call(`/v1/admin/devshards/${id}/deactivate`, { method: 'POST' });
    const wrong = await gw.call('/v1/admin/devshards', { body: { id, model: 'other/model' } });
    expect(wrong.status).toBe(400);
    expect(wrong.json.error.code).toBe('model_mismatch');
    expect(await stateOf(gw, id)).toBe('deactivated');
  });

  it('POST …/{id}/settle on an active devshard finalizes first: 200 {id, escrow_id:<number>, active:false, tx_hash, settler} (gateway.go handleAdminSettleDevshard, escrow_rotator.go settleDevshardOnChain)', async () => {
    const id = await createEscrowViaApi(gw);
    const chat = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 } });
    expect(chat.status).toBe(200);
    const r = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { private_key_env: 'DEVSHARD_PRIVATE_KEY' } });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ id, escrow_id: Number(id), active: false, tx_hash: expect.stringMatching(/^[0-9A-F]{64}$/), settler: gw.devnet!.creators[0]!.address });
    // Ours beside.
    expect(r.json).toMatchObject({ status: 'settled', settled: true, already: false });
    expect((await chainEscrow(gw, id)).settled).toBe(true);
    const types = gw.store.readStream(`escrow-${id}`).map((e) => e.type);
    expect(types.indexOf('EscrowFinalized')).toBeGreaterThan(-1);
    expect(types.indexOf('EscrowFinalized')).toBeLessThan(types.indexOf('EscrowSettleRequested'));
    // DELETE of the settled devshard: devshardctl's {id, deleted:true} (gateway.go handleAdminCleanDevshard).
    const del = await gw.call(`/v1/admin/devshards/${id}`, { method: 'DELETE' });
    expect(del.status, del.text).toBe(200);
    expect(del.json).toMatchObject({ id, deleted: true, escrow_id: id, removed: true });
    expect((await gw.call(`/v1/admin/devshards/${id}`)).status).toBe(404);
  });

  it('settle: 409 while requests are in flight on an unfinalized devshard, 404 not loaded, 400 key errors (gateway.go handleAdminSettleDevshard)', async () => {
    // The only routable devshard, so the stream runs on it.
    for (const d of (await gw.call('/v1/admin/devshards')).json.data) {
      if (d.state === 'active') await gw.call(`/v1/admin/devshards/${d.escrow_id}/deactivate`, { method: 'POST' });
    }
    const id = await createEscrowViaApi(gw);
    const stream = await openStream(gw);
    const busy = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: {} });
    expect(busy.status).toBe(409);
    expect(busy.json.error.code).toBe('devshard_busy');
    expect(busy.json.error.message).toContain(`devshard ${id} has active requests`);
    await stream.finish();
    expect(await stateOf(gw, id)).toBe('active');
    const unknown = await gw.call('/v1/admin/devshards/987654321/settle', { body: {} });
    expect(unknown.status).toBe(404);
    const badKey = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { private_key_env: 'NO_SUCH_KEY_VAR' } });
    expect(badKey.status).toBe(400);
    expect(badKey.json.error.message).toContain('NO_SUCH_KEY_VAR');
    expect(await stateOf(gw, id)).toBe('active');
  });

  it('DELETE of a devshard that is not settled: 409 naming the risk (devshardctl deletes an inactive one, and its deposit is pruned to the hosts)', async () => {
    const id = await createEscrowViaApi(gw);
    const active = await gw.call(`/v1/admin/devshards/${id}`, { method: 'DELETE' });
    expect(active.status).toBe(409);
    expect(active.json.error.code).toBe('not_settled');
    await gw.call(`/v1/admin/devshards/${id}/deactivate`, { method: 'POST' });
    const inactive = await gw.call(`/v1/admin/devshards/${id}`, { method: 'DELETE' });
    expect(inactive.status).toBe(409);
    expect(inactive.json.error.code).toBe('not_settled');
    expect(inactive.json.error.message).toContain('pruned to the hosts');
    expect(inactive.json.error.message).toContain(`/v1/admin/devshards/${id}/settle`);
    expect(await stateOf(gw, id)).toBe('deactivated');
  });

  it('/v1/finalize with several devshards: 400, POST and GET (gateway.go handleSingleOnly)', async () => {
    for (const method of ['POST', 'GET']) {
      const r = await gw.call('/v1/finalize', { method });
      expect(r.status, `${method} ${r.text}`).toBe(400);
      expect(r.json.error.code).toBe('not_single_escrow');
      expect(r.json.error.message).toContain('/devshard/{id}/v1/finalize');
    }
  });
});

describe('devshardctl admin: GET finalize with one devshard', () => {
  let gw: TestGateway;
  let id: string;
  beforeAll(async () => {
    gw = await startTestGateway();
    id = await createEscrowViaApi(gw);
  });
  afterAll(() => disposeTestGateway(gw));

  it('GET /v1/finalize: 409 "session not yet finalized" until finalize, then the settlement document (proxy.go handleGetFinalize)', async () => {
    for (const path of ['/v1/finalize', `/devshard/${id}/v1/finalize`]) {
      const r = await gw.call(path, { method: 'GET' });
      expect(r.status, r.text).toBe(409);
      expect(r.json.error.message).toContain('session not yet finalized');
    }
    expect(await stateOf(gw, id)).toBe('active');
    const posted = await gw.call('/v1/finalize', { method: 'POST' });
    expect(posted.status, posted.text).toBe(200);
    for (const path of ['/v1/finalize', `/devshard/${id}/v1/finalize`]) {
      const r = await gw.call(path, { method: 'GET' });
      expect(r.status, r.text).toBe(200);
      expect(r.json).toEqual(posted.json);
    }
    expect((await gw.call('/devshard/987654321/v1/finalize', { method: 'GET' })).status).toBe(404);
  });
});

describe('devshardctl admin: a create whose inclusion is slow', () => {
  let fgw: FaultGateway;
  beforeAll(async () => {
    fgw = await startFaultGateway();
  });
  afterAll(() => fgw?.dispose());

  it('POST /v1/admin/escrows, inclusion slow: 202 with the pending intent and why (devshardctl: 502 that invites a duplicate create)', async () => {
    const faults = fgw.devnet.chain.faults;
    faults.holdMempool = true;
    let r;
    try {
      r = await fgw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL } });
    } finally {
      faults.holdMempool = false;
    }
    expect(r.status, r.text).toBe(202);
    expect(r.json).toMatchObject({ status: 'pending', escrow_id: null, registered: false, intent_id: expect.any(String), tx_hash: expect.stringMatching(/^[0-9A-F]{64}$/) });
    expect(r.json.message).toContain('Do not send the create again');
    expect(r.json.message).toContain('second deposit');
    // It lands and is registered without a second create.
    const deadline = Date.now() + 10_000;
    const created = () => [...fgw.store.readAll()].some((e) => e.type === 'EscrowCreated' && (e.data as { txHash: string }).txHash === r!.json.tx_hash);
    while (!created() && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    expect(created()).toBe(true);
  });
});

describe("devshardctl admin: private_key in register and settle bodies (gateway.go adminDevshardRequest, adminSettleEscrowRequest)", () => {
  // A second creator, allowlisted and funded on the devnet, whose key is in no environment variable.
  const other = deterministicKeyHex('test/compat/other-creator');
  const keys = generateKeys();
  let gw: TestGateway;
  let id: string;
  let otherAddress: string;
  const noKeyIn = (text: string) => {
    for (const k of [other, keys.privateKey]) {
      expect(text).not.toContain(k);
      expect(text.toLowerCase()).not.toContain(k.toLowerCase());
    }
  };
  const entry = async () => (await gw.call('/v1/admin/devshards')).json.devshards.find((d: any) => d.id === id);
  beforeAll(async () => {
    const opts = { keys, devnet: { creators: [keys.privateKey, other] } };
    gw = await startTestGateway(opts);
    const created = await gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key: other, register: false } });
    expect(created.status, created.text).toBe(200);
    id = created.json.id;
    otherAddress = created.json.creator;
    expect(otherAddress).not.toBe(gw.devnet!.creators[0]!.address);
    // While the process holds the request's key: private_key_env null, the key came from a request.
    expect(await entry()).toMatchObject({ private_key_env: null, private_key_source: 'request' });
    // A restart forgets a key given in a request (it is never persisted).
    gw = await gw.restart();
  });
  afterAll(() => disposeTestGateway(gw));

  it("GET /v1/admin/devshards: private_key_env null and the reason when the creator's key is not held; never the key", async () => {
    const d = await entry();
    expect(d).toMatchObject({ id, private_key_env: null, private_key_source: 'not_held', protocol_version: 'v4.1', route_prefix: '/devshard/v4.1', state_root_version: 'v4.1', active: false });
    expect(d.private_key).toBeUndefined();
  });

  it('register: private_key is checked against the creator and held in memory; wrong or doubled keys are 400s that never echo a key', async () => {
    const none = await gw.call('/v1/admin/devshards', { body: { id } });
    expect(none.status).toBe(400);
    expect(none.json.error.code).toBe('creator_key_unavailable');
    const wrong = await gw.call('/v1/admin/devshards', { body: { id, private_key: keys.privateKey } });
    expect(wrong.status).toBe(400);
    expect(wrong.json.error).toMatchObject({ code: 'wrong_creator_key', param: 'private_key' });
    noKeyIn(wrong.text);
    const both = await gw.call('/v1/admin/devshards', { body: { id, private_key: other, private_key_env: 'DEVSHARD_PRIVATE_KEY' } });
    expect(both.status).toBe(400);
    expect(both.json.error.code).toBe('ambiguous_key');
    noKeyIn(both.text);
    const malformed = await gw.call('/v1/admin/devshards', { body: { id, private_key: `0x${other}` } });
    expect(malformed.status).toBe(400);
    expect(malformed.json.error.param).toBe('private_key');
    noKeyIn(malformed.text);
    const ok = await gw.call('/v1/admin/devshards', { body: { id, private_key: other, model: MODEL } });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.json).toMatchObject({ id, active: true, model: MODEL, state: 'active' });
    noKeyIn(ok.text);
    expect(await entry()).toMatchObject({ private_key_env: null, private_key_source: 'request', active: true });
    // It serves chat, signed with the held key.
    const chat = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 } });
    expect(chat.status, chat.text).toBe(200);
  });

  it('settle: private_key of another account is 400 wrong_settler; the creator\'s settles (200 with devshardctl\'s fields); the log records only {kind:"request"}', async () => {
    const wrong = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { private_key: keys.privateKey } });
    expect(wrong.status).toBe(400);
    expect(wrong.json.error).toMatchObject({ code: 'wrong_settler', param: 'private_key' });
    noKeyIn(wrong.text);
    const both = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { private_key: other, private_key_env: 'DEVSHARD_PRIVATE_KEY' } });
    expect(both.status).toBe(400);
    expect(both.json.error.code).toBe('ambiguous_key');
    expect(await stateOf(gw, id)).toBe('active');
    const r = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { private_key: other } });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ id, escrow_id: Number(id), active: false, settler: otherAddress, settled: true });
    noKeyIn(r.text);
    expect((await chainEscrow(gw, id)).settled).toBe(true);
    const requested = gw.store.readStream(`escrow-${id}`).filter((e) => e.type === 'EscrowSettleRequested').at(-1)!;
    expect((requested.data as { keySource: unknown }).keySource).toEqual({ kind: 'request' });
    // Neither key anywhere in the event log or the gateway's log lines.
    noKeyIn(JSON.stringify([...gw.store.readAll()]));
    noKeyIn(gw.logs.join('\n'));
  });
});

describe('devshardctl admin: the create and settle body fields (gateway.go adminCreateEscrowRequest, adminSettleEscrowRequest)', () => {
  // The json tags of the two structs at gonka 8a35022 (devshard/cmd/devshardctl/gateway.go). Every
  // one is accepted; chain_id must be ours, fee_denom/fee_amount/gas_limit sign that one tx
  // (newGatewayRESTChainTxClient), as test/gateway/tx-fee-override.test.ts reads back from the chain.
  const CREATE_FIELDS = ['private_key', 'private_key_env', 'amount', 'model_id', 'register', 'storage_path', 'protocol_version', 'chain_id', 'fee_denom', 'fee_amount', 'gas_limit'];
  const SETTLE_FIELDS = ['private_key', 'private_key_env', 'chain_id', 'fee_denom', 'fee_amount', 'gas_limit'];
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  });
  afterAll(() => disposeTestGateway(gw));

  it('the body schemas name every field of the structs', () => {
    expect(Object.keys(createEscrowBodySchema.properties)).toEqual(expect.arrayContaining(CREATE_FIELDS));
    expect(Object.keys(settleBodySchema.properties)).toEqual(expect.arrayContaining(SETTLE_FIELDS));
    // uint64 in Go: a JSON number (or, here, a decimal string for values above 2^53).
    for (const f of ['fee_amount', 'gas_limit'] as const) {
      expect(createEscrowBodySchema.properties[f]).toBe(settleBodySchema.properties[f]);
    }
  });

  it('a devshardctl script\'s full create and settle bodies: 200 with devshardctl\'s fields', async () => {
    const chainId = gw.devnet!.chainId;
    const tx = { chain_id: chainId, fee_denom: 'ngonka', fee_amount: 1_000_000, gas_limit: 500_000 };
    const create = { private_key_env: 'DEVSHARD_PRIVATE_KEY', amount: 10_000_000_000, model_id: MODEL, register: true, storage_path: '/data/devshards/x', protocol_version: '4.1', ...tx };
    expect(Object.keys(create).sort()).toEqual(CREATE_FIELDS.filter((f) => f !== 'private_key').sort());
    const c = await gw.call('/v1/admin/escrows', { body: create });
    expect(c.status, c.text).toBe(200);
    expect(c.json).toMatchObject({ escrow_id: expect.any(Number), tx_hash: expect.stringMatching(/^[0-9A-F]{64}$/), registered: true, model: MODEL });
    // devshardctl's ParseProtocolVersion form: "4.1" is v4.1, on its route, with its tag.
    expect((await gw.call(`/v1/admin/devshards/${c.json.id}`)).json).toMatchObject({ protocol_version: 'v4.1', route_prefix: '/devshard/v4.1', state_root_version: 'v4.1' });
    const settle = { private_key_env: 'DEVSHARD_PRIVATE_KEY', ...tx };
    expect(Object.keys(settle).sort()).toEqual(SETTLE_FIELDS.filter((f) => f !== 'private_key').sort());
    const s = await gw.call(`/v1/admin/devshards/${c.json.id}/settle`, { body: settle });
    expect(s.status, s.text).toBe(200);
    expect(s.json).toMatchObject({ id: c.json.id, escrow_id: c.json.escrow_id, active: false, tx_hash: expect.stringMatching(/^[0-9A-F]{64}$/), settler: c.json.creator });
  });

  it('chain_id of another chain: 400 naming the rule and the remedy (devshardctl would sign for it and the node refuse)', async () => {
    const r = await gw.call('/v1/admin/escrows', { body: { amount: 10_000_000_000, model_id: MODEL, chain_id: 'gonka-mainnet' } });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ type: 'invalid_request_error', code: 'wrong_chain_id', param: 'chain_id' });
    expect(r.json.error.message).toContain('leave it out');
  });
});
