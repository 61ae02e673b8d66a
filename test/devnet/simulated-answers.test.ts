/**
 * What the simulated model answers (src/devnet/hosts/completion-plan.ts, answer.ts): the hosts
 * serve the same plan over the devshard protocol (protocol/output.ts; the protocol itself is in
 * host-protocol*.test.ts), and the plain OpenAI mount (openai-server.ts) serves it as is, so the
 * answers are checked there.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerSimulatedOpenAi } from '../../src/devnet/hosts/index.js';
import { SseParser, type SseEvent } from '../../src/network/sse.js';
import { chatBody, MODEL } from '../network/fixtures.js';
import { violations } from '../network/schema-check.js';

let app: FastifyInstance;
let base: string;
beforeAll(async () => {
  app = Fastify({ logger: false });
  registerSimulatedOpenAi(app, { prefix: '/v1', tokenDelayMs: 0, models: [MODEL] });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  base = `http://127.0.0.1:${addr.port}/v1`;
});
afterAll(async () => {
  await app.close();
});

/** POSTs a chat body (or raw text) to the simulated model. */
async function ask(body: unknown) {
  const res = await request(`${base}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    headers: res.headers,
    text,
    json: () => JSON.parse(text),
    events(): SseEvent[] {
      const p = new SseParser();
      const out: SseEvent[] = [];
      p.push(Buffer.from(text), out);
      p.end(out);
      return out;
    },
  };
}

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

describe('the simulated model: what it answers', () => {
  it('is deterministic: the same request gets the same answer (under a new id each time, as OpenAI), another request another one', async () => {
    const a = (await ask(chatBody())).json();
    const b = (await ask(chatBody())).json();
    expect(b.choices).toEqual(a.choices);
    expect(b.usage).toEqual(a.usage);
    expect(a.id).toMatch(/^chatcmpl-[0-9a-f]{24}$/);
    expect(b.id).not.toBe(a.id);
    const other = (await ask(chatBody({ messages: [{ role: 'user', content: 'Something else entirely' }] }))).json();
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
  it('answers an OpenAI error for a body it cannot serve', async () => {
    const wrongModel = await ask(chatBody({ model: 'qwen/test-model' }));
    expect(wrongModel.status).toBe(404);
    expect(wrongModel.json().error.code).toBe('model_not_found');
    const badJson = await ask('{"model":');
    expect(badJson.status).toBe(400);
    const badChoice = await ask(chatBody({ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }));
    expect(badChoice.status).toBe(400);
  });
});

describe('the simulated model: streaming', () => {
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
  it("mount beside the devnet's own routes and JSON parser without disturbing them", async () => {
    const { registerSimulatedHosts } = await import('../../src/devnet/hosts/index.js');
    const { newKey } = await import('../network/fixtures.js');
    const k = newKey();
    const hosts = [{ index: 0, address: k.address, privateKey: k.privateKey, pubKey: k.pubKey, prefix: '/hosts/0' }];
    const devnet = Fastify();
    devnet.addContentTypeParser('application/json', { parseAs: 'string' }, (_r, b, done) => done(null, { parsedByDevnet: JSON.parse(b as string) }));
    devnet.post('/devnet/echo', async (req) => req.body);
    registerSimulatedHosts(devnet, { chain: { escrow: () => undefined, tokenPrice: () => 1n }, hosts, tokenDelayMs: 0, versions: ['v4.1'], legacyRoute: false });
    await devnet.ready();
    const echo = await devnet.inject({ method: 'POST', url: '/devnet/echo', payload: { a: 1 } });
    expect(echo.json()).toEqual({ parsedByDevnet: { a: 1 } });
    // The host's protocol route takes the raw body (its own parser), not the devnet's: it answers.
    const host = await devnet.inject({ method: 'POST', url: '/hosts/0/devshard/v4.1/sessions/5/chat/completions', payload: { a: 1 } });
    expect(host.statusCode).not.toBe(404);
    expect(host.body).not.toContain('parsedByDevnet');
    // The invented legacy routes are gone.
    const legacy = await devnet.inject({ method: 'POST', url: '/hosts/0/devshard/v1/sessions/5/sign', payload: { a: 1 } });
    expect(legacy.statusCode).toBe(404);
    await devnet.close();
  });
});
