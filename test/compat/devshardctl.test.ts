/**
 * devshardctl's admin and status shapes, served by shardgate as a superset (issue 30): every field
 * pinned here with its type comes from the network's own gateway, gonka devshard/cmd/devshardctl at
 * 8a35022, in the file and function named beside it. Our own fields stay beside theirs; where a
 * name of ours had another type, theirs won and ours moved (runtimes -> model_runtimes,
 * capacity.models[].routable_devshards -> routable_devshard_ids, devshards[].balance ->
 * balance_exact, rotation latest -> latest_by_model). And the spec's hot-swap drain check as an
 * operator's script runs it: `jq '[.devshards[].active_requests]'` all zero.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { eventsFile } from '../../src/events/storage-path.js';
import { startClientGateway } from '../clients/helpers.js';
import { openStream } from './open-stream.js';
import { parseEpoch } from '../../src/chain/rest-queries.js';
import { readFileSync } from 'node:fs';

/** `jq '[.devshards[].active_requests]'`: null where jq would fail on a missing array. */
const activeRequestsOf = (status: any): unknown => (Array.isArray(status?.devshards) ? status.devshards.map((d: any) => d.active_requests) : null);

const isUint = (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= 0;

describe('devshardctl shapes: two devshards (pooled)', () => {
  let gw: TestGateway;
  let ids: string[];
  beforeAll(async () => {
    // 20 ms between streamed tokens: a stream of 50 tokens is in flight for a second.
    gw = (await startClientGateway({ tokenDelayMs: 20, escrow: false })).gw;
    ids = [await createEscrowViaApi(gw), await createEscrowViaApi(gw)];
  });
  afterAll(() => disposeTestGateway(gw));

  it('GET /v1/status: the pooled shape (gateway.go handlePooledStatus, runtimeStatus, gatewayModelCapacityStatus)', async () => {
    await gw.tasks.pruneWatch.tick(); // the chain's epoch, as devshardctl's phase gate polls it
    const r = await gw.call('/v1/status', { key: 'none' });
    expect(r.status).toBe(200);
    const s = r.json;
    // handlePooledStatus: mode, devshards, limiter, capacity, runtimes (len(runtimes), an integer).
    expect(typeof s.mode).toBe('string');
    expect(s.runtimes).toBe(2);
    expect(typeof s.limiter).toBe('object');
    expect(typeof s.capacity.models).toBe('object');
    // runtimeStatus: id string, model string, active bool, phase string, nonce and balance numbers,
    // active_requests and reserved_tokens integers, requests_blocked bool.
    expect(s.devshards.map((d: any) => d.id).sort()).toEqual([...ids].sort());
    for (const d of s.devshards) {
      expect(d).toMatchObject({ model: MODEL, active: true, phase: 'active', active_requests: 0, reserved_tokens: 0, requests_blocked: false });
      expect(typeof d.id).toBe('string');
      expect(isUint(d.nonce)).toBe(true);
      expect(isUint(d.balance)).toBe(true);
      expect(d.block_reason).toBeUndefined(); // omitempty
      // runtimeStatus.ProtocolVersion and the phase gate's ChainPhaseSnapshot fields (phase_gate.go):
      // chain_phase the epoch phase, confirmation_poc_phase the confirmation PoC phase name (strings).
      // protocol_version is the escrow's version: a new escrow speaks the newest we speak that the
      // chain approves (v4.1 on the devnet), on its route, with its state-root tag beside.
      expect(d.protocol_version).toBe('v4.1');
      expect(d.route_prefix).toBe('/devshard/v4.1');
      expect(d.state_root_version).toBe('v4.1');
      expect(d.chain_phase).toBe('Inference');
      expect(d.confirmation_poc_phase).toBe('CONFIRMATION_POC_INACTIVE');
      // Ours beside: the exact balance as a decimal string.
      expect(String(d.balance)).toBe(d.balance_exact);
      expect(d.escrow_id).toBe(d.id);
    }
    // gatewayModelCapacityStatus: active_devshards and routable_devshards integers, routable and
    // access_enabled bools, access_mode string. Ours: the routable ids.
    expect(s.capacity.models[MODEL]).toMatchObject({ active_devshards: 2, routable_devshards: 2, routable: true, access_enabled: true, access_mode: 'api_key' });
    expect([...s.capacity.models[MODEL].routable_devshard_ids].sort()).toEqual([...ids].sort());
    expect(s.model_runtimes).toEqual([{ model: MODEL, mode: 'pool', escrows: 2, routable: 2 }]);
    // With several devshards there is no single runtime to describe (proxy.go statusResponse).
    expect(s.escrow_id).toBeUndefined();
    expect(s.config).toBeUndefined();
  });

  it("the drain check: jq '[.devshards[].active_requests]' counts the stream in flight, then is all zero; reserved_tokens follows", async () => {
    const stream = await openStream(gw);
    const during = (await gw.call('/v1/status', { key: 'none' })).json;
    expect((activeRequestsOf(during) as number[]).sort()).toEqual([0, 1]);
    const busy = during.devshards.find((d: any) => d.active_requests === 1);
    // The stream reserved its prompt plus max_tokens (the default) tokens.
    expect(busy.reserved_tokens).toBeGreaterThan(0);
    expect(BigInt(busy.reserved_tokens) * gw.ctx.chainInfo.tokenPrice).toBe(BigInt(busy.reserved));
    await stream.finish();
    await gw.ctx.engine.idle();
    const deadline = Date.now() + 5000;
    let after = (await gw.call('/v1/status', { key: 'none' })).json;
    while ((activeRequestsOf(after) as number[]).some((n) => n !== 0) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 25));
      after = (await gw.call('/v1/status', { key: 'none' })).json;
    }
    expect(activeRequestsOf(after)).toEqual([0, 0]);
  });

  it('GET /v1/admin/devshards: settings, devshards with runtime, limiter, capacity (gateway.go handleAdminState, gateway_store.go GatewayDevshardState); never a private key', async () => {
    const r = await gw.call('/v1/admin/devshards');
    expect(r.status).toBe(200);
    const a = r.json;
    expect(typeof a.settings).toBe('object');
    expect(a.settings.model_limits).toBeDefined();
    expect(typeof a.limiter).toBe('object');
    expect(a.capacity.models[MODEL].routable_devshards).toBe(2);
    expect(a.devshards.map((d: any) => d.id).sort()).toEqual([...ids].sort());
    for (const d of a.devshards) {
      // GatewayDevshardState: id string, model string, active bool, rotation_role string, rotation_epoch number.
      expect(d).toMatchObject({ model: MODEL, active: true, rotation_role: 'regular' });
      expect(isUint(d.rotation_epoch)).toBe(true);
      // created_at / updated_at: RFC 3339 times (the stream's first and last commits); storage_path
      // a path (ours: the one event log every escrow is kept in).
      expect(Date.parse(d.created_at)).toBeGreaterThan(0);
      expect(Date.parse(d.updated_at)).toBeGreaterThanOrEqual(Date.parse(d.created_at));
      expect(d.storage_path).toBe(eventsFile(gw.storageDir));
      // adminDevshardView.runtime: the runtimeStatus of /v1/status, with active_requests.
      expect(d.runtime).toMatchObject({ id: d.id, model: MODEL, active: true, active_requests: 0 });
      expect(d.private_key).toBeUndefined();
      // RuntimeConfig.private_key_env (gateway.go): the variable the creator's key comes from, a
      // string; ours beside: where it comes from. protocol_version a string (the escrow's version),
      // beside it its route and state-root tag.
      expect(d.private_key_env).toBe('DEVSHARD_PRIVATE_KEY');
      expect(d.private_key_source).toBe('env');
      expect(d).toMatchObject({ protocol_version: 'v4.1', route_prefix: '/devshard/v4.1', state_root_version: 'v4.1' });
      // The runtime carries runtimeStatus's fields, protocol_version and chain_phase among them.
      expect(typeof d.runtime.protocol_version).toBe('string');
      expect(typeof d.runtime.chain_phase).toBe('string');
      expect(typeof d.runtime.reserved_tokens).toBe('number');
    }
    // jq '[.devshards[].runtime.active_requests]' on the admin document too.
    expect(a.devshards.map((d: any) => d.runtime.active_requests)).toEqual([0, 0]);
    // Ours beside: the list of devshard views.
    expect(a.object).toBe('list');
    expect(a.data.map((d: any) => d.escrow_id).sort()).toEqual([...ids].sort());
    expect(r.text).not.toContain(gw.keys.privateKey);
    expect(r.text.toLowerCase()).not.toContain(gw.keys.privateKey.toLowerCase());
  });

  it('GET /v1/debug/rotation: enabled at the top and in settings, chain timing with devshardctl names, latest an array (gateway.go handleDebugRotation)', async () => {
    const r = await gw.call('/v1/debug/rotation');
    expect(r.status).toBe(200);
    const d = r.json;
    expect(d.enabled).toBe(false);
    expect(d.settings.enabled).toBe(false);
    expect(d.settings.pre_poc_blocks).toEqual(expect.any(Number));
    expect(Array.isArray(d.settings.models)).toBe(true);
    expect(d.chain).toMatchObject({ block_height: expect.any(Number), epoch_index: expect.any(Number), blocks_until_next_rotation: expect.any(Number) });
    expect(d.chain.epoch_switch_block_height).toBe(d.chain.next_boundary_height);
    expect(d.chain.blocks_to_epoch_switch).toBe(d.chain.blocks_until_boundary);
    // GatewayRotationStatus rows (gateway_store.go): none before any rotation ran.
    expect(d.latest).toEqual([]);
    expect(typeof d.latest_by_model).toBe('object');
  });
});

describe('devshardctl shapes: one devshard (the single-runtime fields on top)', () => {
  let gw: TestGateway;
  let id: string;
  beforeAll(async () => {
    gw = await startTestGateway();
    id = await createEscrowViaApi(gw);
  });
  afterAll(() => disposeTestGateway(gw));

  it('GET /v1/status: the pooled shape and proxy.go statusResponse at the top level', async () => {
    const chat = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 } });
    expect(chat.status).toBe(200);
    await gw.tasks.pruneWatch.tick();
    const s = (await gw.call('/v1/status', { key: 'none' })).json;
    // Pooled (handlePooledStatus), so `[.devshards[].active_requests]` works on one devshard too.
    expect(s.runtimes).toBe(1);
    expect(activeRequestsOf(s)).toEqual([0]);
    // statusResponse: escrow_id (`EscrowID string` there, so a string here too), nonce and balance
    // numbers, phase, chain_phase and confirmation_poc_phase strings, requests_blocked bool, config
    // (statusSessionConfig, numbers).
    expect(s.escrow_id).toBe(id);
    expect(typeof s.escrow_id).toBe('string');
    expect(s.chain_phase).toBe('Inference');
    expect(s.confirmation_poc_phase).toBe('CONFIRMATION_POC_INACTIVE');
    expect(s.devshards[0]).toMatchObject({ protocol_version: 'v4.1', route_prefix: '/devshard/v4.1', state_root_version: 'v4.1', chain_phase: 'Inference' });
    // The live session: how far each host applied the diffs; the request's host applied nonce 1.
    expect(s.devshards[0].hosts_applied).toEqual(expect.arrayContaining([{ host: expect.any(String), nonce: 1 }]));
    expect(s.devshards[0].protocol_error).toBeUndefined();
    expect(s.nonce).toBe(1);
    expect(s.phase).toBe('active');
    expect(s.balance).toBe(s.devshards[0].balance);
    expect(isUint(s.balance)).toBe(true);
    expect(s.requests_blocked).toBe(false);
    expect(s.block_reason).toBeUndefined();
    expect(s.config.token_price).toBe(Number(gw.ctx.chainInfo.tokenPrice));
    // statusSessionConfig: every member, a JSON number (int64/uint64/uint32 there).
    const members = ['refusal_timeout', 'execution_timeout', 'token_price', 'create_devshard_fee', 'fee_per_nonce', 'vote_threshold', 'validation_rate', 'inference_seal_grace_nonces', 'inference_seal_grace_seconds', 'auto_seal_every_n_nonces'];
    expect(Object.keys(s.config).sort()).toEqual([...members].sort());
    for (const m of members) expect(isUint(s.config[m]), m).toBe(true);
    const params = gw.ctx.chainInfo.params;
    expect(s.config).toMatchObject({ create_devshard_fee: Number(params.createDevshardFee), fee_per_nonce: Number(params.feePerNonce) });
    expect(s.config.refusal_timeout).toBeGreaterThan(0);
    expect(s.config.execution_timeout).toBeGreaterThan(0);
  });

  it('after finalize: phase settlement, requests blocked (the phase names of proxy.go handleStatus)', async () => {
    expect((await gw.call(`/devshard/${id}/v1/finalize`, { method: 'POST' })).status).toBe(200);
    const s = (await gw.call('/v1/status', { key: 'none' })).json;
    expect(s.phase).toBe('settlement');
    expect(s.devshards[0]).toMatchObject({ phase: 'settlement', active: false, requests_blocked: true, block_reason: 'finalized' });
  });
});

describe("the chain's phase as devshardctl's gate reads /v1/epochs/latest (phase_gate.go deriveChainPhaseSnapshot)", () => {
  const base = (JSON.parse(readFileSync(new URL('../fixtures/chain/public_epochs_latest.json', import.meta.url), 'utf8')) as { response: Record<string, unknown> }).response;

  it('no confirmation PoC event: none read (status then says CONFIRMATION_POC_INACTIVE)', () => {
    expect(parseEpoch(base).confirmationPocPhase).toBeUndefined();
    expect(parseEpoch(base).phase).toBe('Inference');
  });

  it('an active event: its phase by name, or by number mapped as confirmationPoCPhaseValue.UnmarshalJSON does; the blocking ones block', () => {
    const withEvent = (phase: unknown) => parseEpoch({ ...base, is_confirmation_poc_active: true, active_confirmation_poc_event: { phase, trigger_height: 24805 } });
    expect(withEvent('CONFIRMATION_POC_GENERATION')).toMatchObject({ confirmationPocPhase: 'CONFIRMATION_POC_GENERATION', pocActive: true });
    expect(withEvent(3)).toMatchObject({ confirmationPocPhase: 'CONFIRMATION_POC_VALIDATION', pocActive: true });
    expect(withEvent(1)).toMatchObject({ confirmationPocPhase: 'CONFIRMATION_POC_GRACE_PERIOD', pocActive: true });
    expect(withEvent(4)).toMatchObject({ confirmationPocPhase: 'CONFIRMATION_POC_COMPLETED', pocActive: false });
    expect(withEvent(0)).toMatchObject({ confirmationPocPhase: 'CONFIRMATION_POC_INACTIVE', pocActive: false });
  });
});

describe('hot swap: the temporary instance (DEVSHARDS_JSON=[])', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ env: { DEVSHARDS_JSON: '[]' } });
  });
  afterAll(() => disposeTestGateway(gw));

  it("jq '[.devshards[].active_requests]' is an empty array (drained), never null", async () => {
    const s = (await gw.call('/v1/status', { key: 'none' })).json;
    expect(activeRequestsOf(s)).toEqual([]);
    expect(s.runtimes).toBe(0);
    expect((await gw.call('/v1/admin/devshards')).json.devshards).toEqual([]);
  });
});
