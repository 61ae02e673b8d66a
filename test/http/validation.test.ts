import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, bearer, buildTestApp, CLIENT_KEY } from './helpers.js';

const { app } = buildTestApp({ app: { bodyLimit: 64 * 1024 } });
beforeAll(() => app.ready());
afterAll(() => app.close());

const base = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
const chat = (body: unknown) => app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(CLIENT_KEY), payload: body as object });

async function expect400(body: unknown, param: string | null, messagePart?: string) {
  const res = await chat(body);
  expect(res.statusCode, res.body).toBe(400);
  const err = res.json().error;
  expect(err.type).toBe('invalid_request_error');
  expect(err.param).toBe(param);
  if (param) expect(err.message).toContain(param);
  if (messagePart) expect(err.message).toContain(messagePart);
  return err;
}

describe('chat request validation (one case per limit)', () => {
  it('accepts a valid request and applies the default max_tokens', async () => {
    const res = await chat(base);
    expect(res.statusCode).toBe(200);
    expect(res.json().max_tokens).toBe(3072);
  });
  it('clamps max_tokens to the cap and accepts max_completion_tokens', async () => {
    expect((await chat({ ...base, max_tokens: 100000 })).json().max_tokens).toBe(4096);
    expect((await chat({ ...base, max_completion_tokens: 10 })).json().max_tokens).toBe(10);
  });
  it('model is required and a string', async () => {
    const err = await expect400({ messages: base.messages }, 'model');
    expect(err.code).toBe('missing_required_parameter');
    await expect400({ ...base, model: 5 }, 'model');
  });
  it('messages must be a non-empty array', async () => {
    expect((await expect400({ ...base, messages: [] }, 'messages')).code).toBe('empty_array');
    await expect400({ model: 'm' }, 'messages');
  });
  it('temperature 0..2', async () => {
    await expect400({ ...base, temperature: 2.1 }, 'temperature', '<= 2');
    await expect400({ ...base, temperature: -0.1 }, 'temperature', '>= 0');
    await expect400({ ...base, temperature: '1' }, 'temperature', 'expected a number');
    expect((await chat({ ...base, temperature: 2 })).statusCode).toBe(200);
  });
  it('top_p 0..1', async () => {
    await expect400({ ...base, top_p: 1.5 }, 'top_p');
  });
  it('presence_penalty and frequency_penalty -2..2', async () => {
    await expect400({ ...base, presence_penalty: -2.5 }, 'presence_penalty');
    await expect400({ ...base, frequency_penalty: 3 }, 'frequency_penalty');
  });
  it('max_tokens is an integer >= 1', async () => {
    await expect400({ ...base, max_tokens: 0 }, 'max_tokens');
    await expect400({ ...base, max_tokens: 1.5 }, 'max_tokens');
  });
  it('stream is a boolean', async () => {
    await expect400({ ...base, stream: 'yes' }, 'stream');
  });
  it('roles are system/user/assistant/tool', async () => {
    await expect400({ ...base, messages: [{ role: 'wizard', content: 'x' }] }, 'messages[0].role', "'system'");
  });
  it('content: null only with tool_calls; text parts accepted; other parts refused', async () => {
    await expect400({ ...base, messages: [{ role: 'user', content: null }] }, 'messages[0].content');
    const ok = await chat({ ...base, messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] }, { role: 'tool', tool_call_id: 'c1', content: 'r' }] });
    expect(ok.statusCode, ok.body).toBe(200);
    expect((await chat({ ...base, messages: [{ role: 'user', content: [{ type: 'text', text: 'hello' }] }] })).statusCode).toBe(200);
    await expect400({ ...base, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, 'messages[0].content[0].type');
    await expect400({ ...base, messages: [{ role: 'user', content: [] }] }, 'messages[0].content', 'empty array');
  });
  it('tool messages need tool_call_id', async () => {
    await expect400({ ...base, messages: [{ role: 'tool', content: 'r' }] }, 'messages[0].tool_call_id');
  });
  it('tools: only type function, function.name required', async () => {
    await expect400({ ...base, tools: [{ type: 'code_interpreter' }] }, 'tools[0].type', "'function'");
    await expect400({ ...base, tools: [{ type: 'function', function: { description: 'x' } }] }, 'tools[0].function.name');
  });
  it('tool_choice auto/none/required or the function object form', async () => {
    const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }];
    await expect400({ ...base, tools, tool_choice: 'sometimes' }, 'tool_choice', "'auto'");
    expect((await chat({ ...base, tools, tool_choice: 'required' })).statusCode).toBe(200);
    expect((await chat({ ...base, tools, tool_choice: { type: 'function', function: { name: 'f' } } })).statusCode).toBe(200);
    await expect400({ ...base, tools, tool_choice: { type: 'function', function: { name: 'g' } } }, 'tool_choice');
  });
  it('stop: a string or at most 4 strings', async () => {
    expect((await chat({ ...base, stop: 'END' })).statusCode).toBe(200);
    await expect400({ ...base, stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop', 'at most 4');
    await expect400({ ...base, stop: [1] }, 'stop[0]');
  });
  it('n must be 1', async () => {
    await expect400({ ...base, n: 2 }, 'n');
  });
  it('estimates input tokens with the network rule', async () => {
    // 3 (reply) + 3 (message) + ceil(8/4)
    expect((await chat({ ...base, messages: [{ role: 'user', content: '12345678' }] })).json().input_tokens).toBe(8);
  });
});

describe('admin body validation', () => {
  const create = (payload: object) => app.inject({ method: 'POST', url: '/v1/admin/escrows', headers: bearer(ADMIN_KEY), payload });
  const key = 'ab'.repeat(32);
  it('accepts amount as integer or decimal string', async () => {
    expect((await create({ amount: 1000, model_id: 'm', private_key: key })).statusCode).toBe(200);
    expect((await create({ amount: '100000000000000000000', model_id: 'm', private_key: key, register: true })).statusCode).toBe(200);
  });
  it('refuses a bad amount', async () => {
    const res = await create({ amount: 0, model_id: 'm', private_key: key });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.param).toBe('amount');
  });
  it('refuses a bad private_key without echoing it', async () => {
    const bad = '0x' + 'cd'.repeat(31) + 'zz';
    const res = await create({ amount: 1, model_id: 'm', private_key: bad });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ param: 'private_key', message: "Invalid value for 'private_key': must be 64 hexadecimal characters without a 0x prefix." });
    expect(res.body).not.toContain('cdcd');
  });
  it('settings: unknown members and bad enums are refused by name', async () => {
    const post = (payload: object) => app.inject({ method: 'POST', url: '/v1/admin/settings', headers: bearer(ADMIN_KEY), payload });
    expect((await post({ colour: 'red' })).json().error).toMatchObject({ param: 'colour', code: 'unknown_parameter' });
    expect((await post({ model_limits: [{ model_id: 'm', access_mode: 'everyone' }] })).json().error.param).toBe('model_limits[0].access_mode');
    expect((await post({ escrow_rotation: { models: [{ model_id: 'm', temp_count: 1, target_count: 1, amount: 5, private_key_env: '1BAD' }] } })).json().error.param).toBe('escrow_rotation.models[0].private_key_env');
    expect((await post({ default_request_max_tokens: 100 })).statusCode).toBe(200);
  });
  it('settle: body optional, private_key_env must be a variable name', async () => {
    const settle = (payload?: string, type = 'application/json') =>
      app.inject({ method: 'POST', url: '/v1/admin/devshards/5/settle', headers: { ...bearer(ADMIN_KEY), ...(payload !== undefined ? { 'content-type': type } : {}) }, ...(payload !== undefined ? { payload } : {}) });
    expect((await settle()).statusCode).toBe(200);
    expect((await settle('')).statusCode).toBe(200);
    expect((await settle('{"private_key_env":"CREATOR_KEY"}')).statusCode).toBe(200);
    expect((await settle('{"private_key_env":"rm -rf"}')).json().error.param).toBe('private_key_env');
  });
  it('path ids must be numeric', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/admin/devshards/abc/settle', headers: bearer(ADMIN_KEY) });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ param: 'id', message: "Invalid value for 'id': must be a numeric escrow id." });
  });
});

describe('body handling', () => {
  it('invalid JSON -> 400 OpenAI body', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(CLIENT_KEY), 'content-type': 'application/json' }, payload: '{"model":' });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json' });
  });
  it('wrong content type -> 415', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(CLIENT_KEY), 'content-type': 'application/x-www-form-urlencoded' }, payload: 'a=b' });
    expect(res.statusCode).toBe(415);
    expect(res.json().error.type).toBe('invalid_request_error');
  });
  it('JSON with a charset is fine', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(CLIENT_KEY), 'content-type': 'application/json; charset=utf-8' }, payload: JSON.stringify(base) });
    expect(res.statusCode).toBe(200);
  });
  it('oversized body -> 413', async () => {
    const res = await chat({ ...base, messages: [{ role: 'user', content: 'x'.repeat(70 * 1024) }] });
    expect(res.statusCode).toBe(413);
    expect(res.json().error.code).toBe('request_too_large');
  });
  it('a non-object body -> 400', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(CLIENT_KEY), 'content-type': 'application/json' }, payload: '"hi"' });
    expect(res.statusCode).toBe(400);
  });
  it('prototype poisoning is refused, not a 500', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(CLIENT_KEY), 'content-type': 'application/json' }, payload: '{"__proto__":{"x":1},"model":"m","messages":[]}' });
    expect(res.statusCode).toBe(400);
  });
  it('unknown route -> JSON 404; unexpected error -> generic 500', async () => {
    const nf = await app.inject({ method: 'GET', url: '/nope' });
    expect(nf.statusCode).toBe(404);
    expect(nf.json().error.code).toBe('unknown_route');
    const boom = await app.inject({ method: 'GET', url: '/boom' });
    expect(boom.statusCode).toBe(500);
    expect(boom.body).not.toContain('secret internal detail');
    expect(boom.json().error.type).toBe('server_error');
  });
  it('/devshard//v1/finalize -> 404 with an empty body', async () => {
    const res = await app.inject({ method: 'POST', url: '/devshard//v1/finalize', headers: bearer(ADMIN_KEY) });
    expect(res.statusCode).toBe(404);
    expect(res.body).toBe('');
  });
});
