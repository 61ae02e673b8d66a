/**
 * Every limit of the spec through HTTP on a real gateway: each refusal is a 4xx with an OpenAI
 * error body `{"error":{"message","type","param","code"}}`, never a 5xx; max_tokens default and
 * cap as the engine records them (InferenceStarted) and as the host was asked (its usage).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BODY_BYTES_DEFAULT } from '../../src/config/index.js';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { requestRecords } from '../helpers/request-records.js';

describe('validation through HTTP', () => {
  let gw: TestGateway;
  let escrowId: string;
  // A variable holding 64 hex characters that are no secp256k1 key (zero), for the settle test.
  const ZERO_KEY_ENV = 'ZERO_CREATOR_KEY';
  beforeAll(async () => ({ gw, escrowId } = await startGatewayWithEscrow({ env: { [ZERO_KEY_ENV]: '0'.repeat(64) } })));
  afterAll(() => disposeTestGateway(gw));

  const base = { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 };
  const chat = (body: unknown, headers?: Record<string, string>) => gw.call('/v1/chat/completions', { body, ...(headers ? { headers } : {}) });

  function expectOpenAiError(res: { status: number; json: any; text: string }, status: number, param?: string | null) {
    expect(res.status, res.text).toBe(status);
    expect(Object.keys(res.json)).toEqual(['error']);
    expect(Object.keys(res.json.error).sort()).toEqual(['code', 'message', 'param', 'type']);
    expect(typeof res.json.error.message).toBe('string');
    expect(res.json.error.message.length).toBeGreaterThan(0);
    expect(typeof res.json.error.type).toBe('string');
    if (param !== undefined) expect(res.json.error.param).toBe(param);
    return res.json.error as { message: string; type: string; param: string | null; code: string | null };
  }

  const bad = async (body: unknown, param: string | null) => {
    const err = expectOpenAiError(await chat(body), 400, param);
    expect(err.type).toBe('invalid_request_error');
    return err;
  };

  it('temperature 0..2', async () => {
    await bad({ ...base, temperature: -0.1 }, 'temperature');
    await bad({ ...base, temperature: 2.1 }, 'temperature');
    expect((await chat({ ...base, temperature: 0 })).status).toBe(200);
    expect((await chat({ ...base, temperature: 2 })).status).toBe(200);
  });

  it('top_p 0..1', async () => {
    await bad({ ...base, top_p: 1.1 }, 'top_p');
    await bad({ ...base, top_p: -0.01 }, 'top_p');
    expect((await chat({ ...base, top_p: 1 })).status).toBe(200);
  });

  it('presence_penalty and frequency_penalty -2..2', async () => {
    await bad({ ...base, presence_penalty: 2.1 }, 'presence_penalty');
    await bad({ ...base, presence_penalty: -2.1 }, 'presence_penalty');
    await bad({ ...base, frequency_penalty: 2.1 }, 'frequency_penalty');
    await bad({ ...base, frequency_penalty: -2.1 }, 'frequency_penalty');
    expect((await chat({ ...base, presence_penalty: -2, frequency_penalty: 2 })).status).toBe(200);
  });

  it('tools: only type function', async () => {
    const err = await bad({ ...base, tools: [{ type: 'code_interpreter' }] }, 'tools[0].type');
    expect(err.message).toContain('function');
    await bad({ ...base, tools: [{ type: 'file_search', function: { name: 'x' } }] }, 'tools[0].type');
    await bad({ ...base, tools: [{ type: 'function' }] }, 'tools[0].function');
  });

  it('tool_choice: auto, none, required (or a named function)', async () => {
    const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }];
    await bad({ ...base, tools, tool_choice: 'sometimes' }, 'tool_choice');
    await bad({ ...base, tool_choice: 'required' }, 'tool_choice');
    await bad({ ...base, tools, tool_choice: { type: 'function', function: { name: 'g' } } }, 'tool_choice');
    for (const tc of ['auto', 'none', 'required']) expect((await chat({ ...base, tools, tool_choice: tc })).status).toBe(200);
  });

  it('roles: system, user, assistant, tool', async () => {
    const err = await bad({ ...base, messages: [{ role: 'wizard', content: 'hi' }] }, 'messages[0].role');
    expect(err.message).toMatch(/system|user|assistant|tool/);
    await bad({ ...base, messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].tool_call_id');
    await bad({ ...base, messages: [{ content: 'hi' }] }, 'messages[0].role');
  });

  it('messages and model are required', async () => {
    const err = await bad({ model: MODEL }, 'messages');
    expect(err.code).toBe('missing_required_parameter');
    await bad({ ...base, messages: [] }, 'messages');
    expect((await bad({ messages: base.messages }, 'model')).code).toBe('missing_required_parameter');
  });

  it('stop: strings, at most 4', async () => {
    await bad({ ...base, stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop');
    await bad({ ...base, stop: [1] }, 'stop[0]');
    expect((await chat({ ...base, stop: ['zz'] })).status).toBe(200);
  });

  it('model ids are case-sensitive: the lower-cased id is 404 model_not_found', async () => {
    const err = expectOpenAiError(await chat({ ...base, model: MODEL.toLowerCase() }), 404, 'model');
    expect(err.code).toBe('model_not_found');
    expect(err.message).toContain(MODEL.toLowerCase());
    const err2 = expectOpenAiError(await chat({ ...base, model: MODEL.toUpperCase() }), 404);
    expect(err2.code).toBe('model_not_found');
  });

  const startedEvents = () =>
    requestRecords(gw.store.readStream(`escrow-${escrowId}`)).filter((r) => r.type === 'InferenceStarted').map((r) => r.data as { maxTokens: number; reservedCost: string; inputTokens: number });

  it('an unknown model id of 200 KB: the 404 and the log line quote only its start', async () => {
    const model = 'm'.repeat(200_000);
    const res = await chat({ ...base, model });
    const err = expectOpenAiError(res, 404, 'model');
    expect(err.code).toBe('model_not_found');
    expect(res.text.length).toBeLessThan(2000);
    const line = gw.logs.find((l) => l.includes('"status":404') && l.includes('mmmmmmmm'));
    expect(line).toBeDefined();
    expect(line!.length).toBeLessThan(2000);
  });

  it('max_tokens: the default (3072) when absent, clamped to the cap (4096) above it', async () => {
    const n = startedEvents().length;
    const noMax = { model: MODEL, messages: base.messages };
    const r1 = await chat(noMax);
    expect(r1.status).toBe(200);
    const r2 = await chat({ ...noMax, max_tokens: 100_000 });
    expect(r2.status).toBe(200);
    const r3 = await chat({ ...noMax, max_tokens: 5 });
    expect(r3.status).toBe(200);
    const [e1, e2, e3] = startedEvents().slice(n);
    expect(e1!.maxTokens).toBe(3072);
    expect(e2!.maxTokens).toBe(4096);
    expect(e3!.maxTokens).toBe(5);
    // The reservation is the worst case of the effective max_tokens.
    expect(BigInt(e2!.reservedCost)).toBe(BigInt(e2!.inputTokens + 4096) * 1000n);
    // The host was asked for 5: its answer stops there.
    expect(r3.json.usage.completion_tokens).toBeLessThanOrEqual(5);
    // Settings change the default and cap without restart.
    expect((await gw.call('/v1/admin/settings', { body: { default_request_max_tokens: 7, request_max_tokens_cap: 9 } })).status).toBe(200);
    await chat(noMax);
    await chat({ ...noMax, max_tokens: 50 });
    const [e4, e5] = startedEvents().slice(n + 3);
    expect(e4!.maxTokens).toBe(7);
    expect(e5!.maxTokens).toBe(9);
    expect((await gw.call('/v1/admin/settings', { body: { default_request_max_tokens: 3072, request_max_tokens_cap: 4096 } })).status).toBe(200);
  });

  it('max_tokens must be a positive integer', async () => {
    await bad({ ...base, max_tokens: 0 }, 'max_tokens');
    await bad({ ...base, max_tokens: 2.5 }, 'max_tokens');
    await bad({ ...base, max_tokens: '10' }, 'max_tokens');
  });

  it('invalid JSON 400, wrong content type 415, oversized body 413', async () => {
    const badJson = expectOpenAiError(await chat('{"model": "x", "messages": [', { 'content-type': 'application/json' }), 400);
    expect(badJson.type).toBe('invalid_request_error');
    expectOpenAiError(await chat(JSON.stringify(base), { 'content-type': 'text/plain' }), 415);
    const huge = { ...base, messages: [{ role: 'user', content: 'x'.repeat(MAX_BODY_BYTES_DEFAULT) }] };
    const tooLarge = expectOpenAiError(await chat(huge), 413);
    expect(tooLarge.message).toContain('GATEWAY_MAX_BODY_BYTES');
    // The gateway is fine afterwards.
    expect((await chat(base)).status).toBe(200);
  });

  it('GATEWAY_MAX_BODY_BYTES sets the chat body limit, named in the 413', async () => {
    const small = await startTestGateway({ env: { GATEWAY_MAX_BODY_BYTES: '2048' } });
    try {
      const r = await small.call('/v1/chat/completions', { body: { ...base, messages: [{ role: 'user', content: 'x'.repeat(4096) }] } });
      expect(r.status, r.text).toBe(413);
      expect(r.json.error.code).toBe('request_too_large');
      expect(r.json.error.message).toMatch(/2 KiB|2048 bytes/);
    } finally {
      await disposeTestGateway(small);
    }
  });

  describe('admin bodies', () => {
    const create = (body: Record<string, unknown>) => gw.call('/v1/admin/escrows', { body });
    const good = () => ({ amount: '10000000000', model_id: MODEL, private_key: gw.keys.privateKey, chain_id: 'shardgate-devnet', register: true });

    it('private_key must be 64 hex without 0x; the message never echoes the value', async () => {
      for (const pk of ['0x' + gw.keys.privateKey.slice(2), gw.keys.privateKey.slice(1), gw.keys.privateKey + 'ab', 'zz' + gw.keys.privateKey.slice(2)]) {
        const res = await create({ ...good(), private_key: pk });
        const err = expectOpenAiError(res, 400, 'private_key');
        expect(res.text).not.toContain(pk);
        expect(res.text).not.toContain(gw.keys.privateKey.slice(4, 40));
        expect(err.message).toMatch(/64|hex|pattern|format/i);
      }
    });

    it('private_key outside the secp256k1 range (zero, >= the curve order) is a 400, not a 500; never echoed', async () => {
      const outOfRange = ['0'.repeat(64), 'f'.repeat(64), 'FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141'];
      for (const pk of outOfRange) {
        const res = await create({ ...good(), private_key: pk });
        const err = expectOpenAiError(res, 400, 'private_key');
        expect(err.message).toMatch(/secp256k1/);
        expect(res.text).not.toContain(pk);
      }
      // Nothing was recorded for them, and the gateway's own key still creates.
      expect((await gw.call('/v1/admin/devshards')).json.data).toHaveLength(1);
    });

    it('chain_id must be this gateway\'s chain', async () => {
      const err = expectOpenAiError(await create({ ...good(), chain_id: 'gonka-mainnet' }), 400, 'chain_id');
      expect(err.message).toContain('shardgate-devnet');
    });

    it('amount must be within the chain\'s [min_amount, max_amount]', async () => {
      const err = expectOpenAiError(await create({ ...good(), amount: 1000 }), 400, 'amount');
      expect(err.message).toContain('min_amount');
      expect(err.message).toContain('escrow amount 1000 out of range');
      expectOpenAiError(await create({ ...good(), amount: 0 }), 400, 'amount');
      expectOpenAiError(await create({ ...good(), amount: '-5' }), 400, 'amount');
      expectOpenAiError(await create({ ...good(), amount: 1.5 }), 400, 'amount');
    });

    it('settings naming a model twice in model_limits or escrow_rotation.models: 400, nothing applied', async () => {
      const before = (await gw.call('/v1/admin/settings')).json;
      const limits = [{ model_id: MODEL, access_mode: 'api_key' }, { model_id: MODEL, access_mode: 'admin_only' }];
      const err = expectOpenAiError(await gw.call('/v1/admin/settings', { body: { model_limits: limits } }), 400, 'model_limits[1].model_id');
      expect(err.code).toBe('duplicate_model');
      const rotated = { model_id: MODEL, temp_count: 1, target_count: 1, amount: '10000000000', private_key_env: 'DEVSHARD_PRIVATE_KEY' };
      expectOpenAiError(await gw.call('/v1/admin/settings', { body: { escrow_rotation: { models: [rotated, { ...rotated, amount: '20000000000' }] } } }), 400, 'escrow_rotation.models[1].model_id');
      expect((await gw.call('/v1/admin/settings')).json).toEqual(before);
      // The model is still admin_only: a client key is refused.
      expect((await gw.call('/v1/status')).json.capacity.models[MODEL].access_mode).toBe('admin_only');
      expect((await gw.call('/v1/chat/completions', { body: base, key: 'client' })).status).toBe(401);
    });

    it('missing and unknown members', async () => {
      const { model_id: _m, ...noModel } = good();
      expectOpenAiError(await create(noModel), 400, 'model_id');
      expectOpenAiError(await create({ ...good(), extra: 1 }), 400);
      expectOpenAiError(await gw.call('/v1/admin/settings', { body: { default_request_max_tokens: 0 } }), 400, 'default_request_max_tokens');
      expectOpenAiError(await gw.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: 'everyone' }] } }), 400);
      expectOpenAiError(await gw.call('/v1/admin/settings', { body: { disabled: { new_url: 'not a url' } } }), 400);
      expectOpenAiError(await gw.call('/v1/admin/settings', { body: { typo_field: true } }), 400);
      expectOpenAiError(await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: { private_key_env: 'BAD-NAME' } }), 400, 'private_key_env');
      expectOpenAiError(await gw.call('/v1/admin/devshards/abc', {}), 400);
      // None of these changed anything.
      expect((await gw.call('/v1/admin/devshards')).json.data).toHaveLength(1);
    });
  });

  it('register with a model_id the escrow does not serve on chain: 400 model_mismatch, not registered', async () => {
    const created = await gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key: gw.keys.privateKey, register: false } });
    expect(created.status, created.text).toBe(200);
    const id = created.json.id as string;
    const res = await gw.call('/v1/admin/devshards', { body: { escrow_id: id, model_id: 'some/other-model' } });
    const err = expectOpenAiError(res, 400, 'model_id');
    expect(err.code).toBe('model_mismatch');
    expect(err.message).toContain(MODEL);
    const view = (await gw.call(`/v1/admin/devshards/${id}`)).json;
    expect(view.routable).toBe(false);
    expect(view.state).toBe('created');
    // With the right model (or none) it registers.
    const ok = await gw.call('/v1/admin/devshards', { body: { escrow_id: id, model_id: MODEL } });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.json.routable).toBe(true);
  });

  it('settle with private_key_env naming a variable that holds a zero key: 400 naming private_key_env, not a 500', async () => {
    expect((await gw.call(`/devshard/${escrowId}/v1/finalize`, { method: 'POST' })).status).toBe(200);
    const res = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: { private_key_env: ZERO_KEY_ENV } });
    const err = expectOpenAiError(res, 400, 'private_key_env');
    expect(err.code).toBe('creator_key_unavailable');
    expect(res.text).not.toContain('0'.repeat(64));
    // Still finalized, and the right key settles it.
    expect((await gw.call(`/v1/admin/devshards/${escrowId}`)).json.state).toBe('finalized');
    const ok = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: { private_key_env: 'DEVSHARD_PRIVATE_KEY' } });
    expect(ok.status, ok.text).toBe(200);
  });

  it('nothing above answered 5xx', () => {
    const statuses = gw.logs.map((l) => JSON.parse(l) as { status?: number }).filter((l) => l.status !== undefined).map((l) => l.status!);
    expect(statuses.length).toBeGreaterThan(40);
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
  });
});
