import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatBody, MODEL, newKey, startNet, type Net } from '../network/fixtures.js';
import { signedPost } from '../network/http.js';
import { violations } from '../network/schema-check.js';

let net: Net;
beforeAll(async () => {
  net = await startNet();
});
afterAll(async () => {
  await net.close();
});

/** A correctly signed request to the executor of `nonce` (host nonce % 3). */
const ask = (body: unknown, nonce = 0, extra: Parameters<typeof signedPost>[3] extends infer O ? Partial<O> : never = {}) =>
  signedPost(net.hostUrl(nonce % 3), '1', body, { keyHex: net.creator.privateKeyHex, nonce, ...extra });

const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Weather at a place',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', minLength: 2 },
        days: { type: 'integer', minimum: 1, maximum: 14 },
        lat: { type: 'number', minimum: -90, maximum: 90 },
        metric: { type: 'boolean' },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        tags: { type: 'array', items: { type: 'string' }, minItems: 1, maxItems: 4 },
        window: { type: 'object', properties: { from: { type: 'string' }, hours: { type: 'integer' } }, required: ['from', 'hours'] },
        note: { type: ['string', 'null'] },
      },
      required: ['city', 'days', 'lat', 'metric', 'unit', 'tags', 'window'],
      additionalProperties: false,
    },
  },
};
const searchTool = {
  type: 'function',
  function: {
    name: 'search',
    parameters: { type: 'object', properties: { query: { type: 'string' }, limit: { type: 'integer', minimum: 1, maximum: 50 } }, required: ['query'] },
  },
};
const tools = [weatherTool, searchTool];
const schemaOf = (name: string) => tools.find((t) => t.function.name === name)!.function.parameters;

describe('simulated hosts: who may ask', () => {
  it('answers a request signed by the escrow creator', async () => {
    const res = await ask(chatBody());
    expect(res.status).toBe(200);
    const c = res.json();
    expect(c.object).toBe('chat.completion');
    expect(c.model).toBe(MODEL);
    expect(typeof c.choices[0].message.content).toBe('string');
    expect(c.choices[0].message.content.length).toBeGreaterThan(0);
  });

  it('rejects a signature by another key with 401 and an OpenAI-style error', async () => {
    const res = await ask(chatBody(), 0, { keyHex: newKey().privateKeyHex });
    expect(res.status).toBe(401);
    expect(res.json().error).toMatchObject({ code: 'invalid_signature', type: 'authentication_error' });
    expect(typeof res.json().error.message).toBe('string');
  });

  it('rejects a body that differs from the signed one', async () => {
    const ts = Math.floor(Date.now() / 1000);
    const { createRequestSigner } = await import('../../src/network/signature.js');
    const sig = createRequestSigner(net.creator.privateKeyHex).sign('1', Buffer.from(JSON.stringify(chatBody())), ts);
    const res = await ask(chatBody({ max_tokens: 1 }), 0, { ts, signature: sig });
    expect(res.status).toBe(401);
    expect(res.json().error.code).toBe('invalid_signature');
  });

  it('rejects a timestamp more than 30 s away (past or future), even when correctly signed', async () => {
    // 35 s, read per request: with a fixed `now` and 31 s, a request sent a second later found the
    // future timestamp only 30 s away (seen once in CI on a loaded machine).
    const nowSeconds = () => Math.floor(Date.now() / 1000);
    for (const offset of [-35, 35]) {
      const res = await ask(chatBody(), 0, { ts: nowSeconds() + offset });
      expect(res.status).toBe(401);
      expect(res.json().error.code).toBe('stale_timestamp');
    }
    expect((await ask(chatBody(), 0, { ts: nowSeconds() - 25 })).status).toBe(200);
  });

  it('rejects missing signature headers', async () => {
    const res = await ask(chatBody(), 0, { signature: '' });
    expect(res.status).toBe(401);
    expect(res.json().error.code).toBe('missing_signature');
  });

  it('sends a request for another host\'s nonce back with 421 naming the executor slot', async () => {
    // nonce 4 is executed by slot 4 % 3 = 1; host 0 must refuse it.
    const res = await signedPost(net.hostUrl(0), '1', chatBody(), { keyHex: net.creator.privateKeyHex, nonce: 4 });
    expect(res.status).toBe(421);
    expect(res.json().error.code).toBe('wrong_executor');
    expect(res.json().error.message).toContain('slot 1');
    expect((await signedPost(net.hostUrl(1), '1', chatBody(), { keyHex: net.creator.privateKeyHex, nonce: 4 })).status).toBe(200);
  });

  it('refuses unknown and settled escrows, and requests without a nonce', async () => {
    const missing = await signedPost(net.hostUrl(0), '999', chatBody(), { keyHex: net.creator.privateKeyHex, nonce: 0 });
    expect(missing.status).toBe(404);
    net.escrows.set('2', { ...net.escrows.get('1')!, id: '2', settled: true });
    const settled = await signedPost(net.hostUrl(0), '2', chatBody(), { keyHex: net.creator.privateKeyHex, nonce: 0 });
    expect(settled.status).toBe(409);
    expect(settled.json().error.code).toBe('escrow_settled');
    const noNonce = await signedPost(net.hostUrl(0), '1', chatBody(), { keyHex: net.creator.privateKeyHex });
    expect(noNonce.status).toBe(400);
    expect(noNonce.json().error.code).toBe('missing_nonce');
  });
});

describe('simulated hosts: what they answer', () => {
  it('is deterministic: the same request gets the same answer (under a new id each time, as OpenAI), another request another one', async () => {
    const a = (await ask(chatBody(), 0)).json();
    const b = (await ask(chatBody(), 3)).json();
    expect(b.choices).toEqual(a.choices);
    expect(b.usage).toEqual(a.usage);
    expect(a.id).toMatch(/^chatcmpl-[0-9a-f]{24}$/);
    expect(b.id).not.toBe(a.id);
    const other = (await ask(chatBody({ messages: [{ role: 'user', content: 'Something else entirely' }] }), 0)).json();
    expect(other.choices[0].message.content).not.toBe(a.choices[0].message.content);
  });

  it('counts prompt tokens by the documented rule: ceil(chars/4) + 3 per message, + 3', async () => {
    const c = (await ask(chatBody())).json();
    // 'You are terse.' 14 chars -> 4, 'Tell me about the sea.' 22 chars -> 6.
    expect(c.usage.prompt_tokens).toBe(4 + 3 + 6 + 3 + 3);
    expect(c.usage.completion_tokens).toBe(Math.ceil(c.choices[0].message.content.length / 4));
    expect(c.usage.total_tokens).toBe(c.usage.prompt_tokens + c.usage.completion_tokens);
  });

  it('stops at max_tokens with finish_reason length and completion_tokens == max_tokens', async () => {
    const full = (await ask(chatBody())).json();
    for (const max of [1, 3, 4]) {
      const c = (await ask(chatBody({ max_tokens: max }))).json();
      expect(c.choices[0].finish_reason).toBe('length');
      expect(c.usage.completion_tokens).toBe(max);
      expect(full.choices[0].message.content.startsWith(c.choices[0].message.content)).toBe(true);
    }
    expect(full.choices[0].finish_reason).toBe('stop');
  });

  it('honours stop sequences: the text ends before the first one, finish_reason stop', async () => {
    const full: string = (await ask(chatBody())).json().choices[0].message.content;
    const stop = full.slice(12, 18); // somewhere in the middle of the text
    const c = (await ask(chatBody({ stop: ['never-there', stop] }))).json();
    expect(c.choices[0].message.content).toBe(full.slice(0, full.indexOf(stop)));
    expect(c.choices[0].message.content).not.toContain(stop);
    expect(c.choices[0].finish_reason).toBe('stop');
    expect(c.usage.completion_tokens).toBe(Math.ceil(c.choices[0].message.content.length / 4));
  });


  it('answers with a tool call whose arguments are valid for the tool schema', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const c = (await ask(chatBody({ tools, messages: [{ role: 'user', content: `question ${i}` }] }))).json();
      const choice = c.choices[0];
      expect(choice.finish_reason).toBe('tool_calls');
      expect(choice.message.content).toBeNull();
      const call = choice.message.tool_calls[0];
      expect(call.type).toBe('function');
      expect(call.id).toMatch(/^call_/);
      seen.add(call.function.name);
      const args = JSON.parse(call.function.arguments);
      expect(violations(args, schemaOf(call.function.name))).toEqual([]);
    }
    expect(seen.size).toBe(2); // both tools get chosen across requests
  });

  it('follows tool_choice: none -> text, a named function -> that one, auto after a tool result -> text', async () => {
    const none = (await ask(chatBody({ tools, tool_choice: 'none' }))).json();
    expect(none.choices[0].finish_reason).not.toBe('tool_calls');
    expect(typeof none.choices[0].message.content).toBe('string');

    const named = (await ask(chatBody({ tools, tool_choice: { type: 'function', function: { name: 'search' } } }))).json();
    expect(named.choices[0].message.tool_calls[0].function.name).toBe('search');

    const afterTool = chatBody({
      tools,
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'search', arguments: '{"query":"x"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
      ],
    });
    const closing = (await ask(afterTool)).json();
    expect(closing.choices[0].finish_reason).toBe('stop');
    const required = (await ask({ ...afterTool, tool_choice: 'required' })).json();
    expect(required.choices[0].finish_reason).toBe('tool_calls');
  });


  it('answers in JSON mode: json_object -> a JSON object, json_schema -> a value valid for the schema; max_tokens cuts it', async () => {
    const obj = (await ask(chatBody({ response_format: { type: 'json_object' } }))).json();
    expect(obj.choices[0].finish_reason).toBe('stop');
    const parsed = JSON.parse(obj.choices[0].message.content);
    expect(typeof parsed).toBe('object');
    expect(typeof parsed.answer).toBe('string');
    expect(obj.usage.completion_tokens).toBe(Math.ceil(obj.choices[0].message.content.length / 4));

    const schema = { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1, maximum: 7 } }, required: ['city', 'days'] };
    const typed = (await ask(chatBody({ response_format: { type: 'json_schema', json_schema: { name: 'w', schema } } }))).json();
    expect(violations(JSON.parse(typed.choices[0].message.content), schema)).toEqual([]);

    const cut = (await ask(chatBody({ response_format: { type: 'json_object' }, max_tokens: 2 }))).json();
    expect(cut.choices[0].finish_reason).toBe('length');
    expect(cut.choices[0].message.content).toBe(obj.choices[0].message.content.slice(0, 8));
  });
  it('answers 400 with an OpenAI error for a body it cannot serve', async () => {
    const wrongModel = await ask(chatBody({ model: 'qwen/test-model' }));
    expect(wrongModel.status).toBe(400);
    expect(wrongModel.json().error.code).toBe('model_mismatch');
    const badJson = await ask('{"model":', 0);
    expect(badJson.status).toBe(400);
    const badChoice = await ask(chatBody({ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }));
    expect(badChoice.status).toBe(400);
  });
});

describe('simulated hosts: streaming', () => {
  it('streams like OpenAI: role chunk, content deltas, finish chunk, usage chunk, [DONE]', async () => {
    const body = chatBody({ max_tokens: 20 });
    const whole = (await ask(body)).json();
    const res = await ask({ ...body, stream: true, stream_options: { include_usage: true } });
    expect(res.status).toBe(200);
    expect(String(res.headers['content-type'])).toContain('text/event-stream');
    const events = res.events();
    expect(events.at(-1)!.data).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data));
    for (const c of chunks) {
      expect(c.object).toBe('chat.completion.chunk');
      expect(c.id).toBe(chunks[0].id);
    }
    expect(chunks[0].choices[0].delta.role).toBe('assistant');
    const usageChunk = chunks.at(-1);
    expect(usageChunk.choices).toEqual([]);
    expect(usageChunk.usage).toEqual(whole.usage);
    const finish = chunks.at(-2);
    expect(finish.choices[0].finish_reason).toBe(whole.choices[0].finish_reason);
    expect(finish.choices[0].delta).toEqual({});
    const deltas = chunks.slice(1, -2);
    expect(deltas.length).toBeGreaterThan(1);
    for (const d of deltas) {
      expect(d.choices[0].finish_reason).toBeNull();
      expect(d.usage).toBeNull();
    }
    expect(deltas.map((d) => d.choices[0].delta.content).join('')).toBe(whole.choices[0].message.content);
  });

  it('sends no usage chunk unless asked', async () => {
    const events = (await ask(chatBody({ stream: true }))).events();
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data));
    expect(chunks.every((c) => c.choices.length === 1 && !('usage' in c))).toBe(true);
    expect(chunks.at(-1).choices[0].finish_reason).toBe('stop');
  });

  it('streams tool calls as deltas with index; the arguments reassemble to the non-stream ones', async () => {
    const body = chatBody({ tools, tool_choice: 'required' });
    const whole = (await ask(body)).json().choices[0].message.tool_calls[0];
    const chunks = (await ask({ ...body, stream: true })).events().slice(0, -1).map((e) => JSON.parse(e.data));
    expect(chunks[0].choices[0].delta.role).toBe('assistant');
    const calls = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    expect(calls.every((t: { index: number }) => t.index === 0)).toBe(true);
    expect(calls[0]).toMatchObject({ id: whole.id, type: 'function', function: { name: whole.function.name } });
    expect(calls.map((t: { function: { arguments: string } }) => t.function.arguments).join('')).toBe(whole.function.arguments);
    expect(chunks.at(-1).choices[0].finish_reason).toBe('tool_calls');
  });
});

describe('simulated hosts: mounting', () => {
  it('mount beside the devnet\'s own routes and JSON parser without disturbing them', async () => {
    const { default: Fastify } = await import('fastify');
    const { registerSimulatedHosts } = await import('../../src/devnet/hosts/index.js');
    const app = Fastify();
    app.addContentTypeParser('application/json', { parseAs: 'string' }, (_r, b, done) => done(null, { parsedByDevnet: JSON.parse(b as string) }));
    app.post('/devnet/echo', async (req) => req.body);
    registerSimulatedHosts(app, { chain: { escrow: () => undefined, pubKeyOf: () => undefined, tokenPrice: () => 1n }, hosts: net.hosts, tokenDelayMs: 0 });
    await app.ready();
    const echo = await app.inject({ method: 'POST', url: '/devnet/echo', payload: { a: 1 } });
    expect(echo.json()).toEqual({ parsedByDevnet: { a: 1 } });
    const host = await app.inject({ method: 'POST', url: '/hosts/1/devshard/v1/sessions/5/chat/completions', payload: { a: 1 } });
    expect(host.statusCode).toBe(404);
    expect(host.json().error.code).toBe('escrow_not_found');
    await app.close();
  });
});
