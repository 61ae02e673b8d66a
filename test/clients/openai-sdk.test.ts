/**
 * The official `openai` Node SDK, unmodified, against a real gateway (embedded devnet, simulated
 * hosts over loopback), used as an application would (issue 30, "Real OpenAI clients"): text,
 * streams and their chunk fields, streamed usage, tools with each tool_choice (the SDK's own stream
 * helper assembles the tool-call deltas), JSON mode, max_completion_tokens, 20 concurrent requests,
 * a stream cut off by the client, and errors as the SDK's own classes, with its retries waiting
 * what Retry-After says.
 */
import OpenAI, { AuthenticationError, BadRequestError, NotFoundError, RateLimitError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEscrowViaApi, disposeTestGateway } from '../helpers/gateway.js';
import { expectBooksBalanced, expectRequestIds, longPrompt, MODEL, recordingFetch, startClientGateway, timeTool, weatherTool, type ClientGateway, type Seen } from './helpers.js';

const messages: OpenAI.ChatCompletionMessageParam[] = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Tell me about the sea.' },
];
const tools: OpenAI.ChatCompletionTool[] = [
  { type: 'function', function: { ...weatherTool, parameters: { ...weatherTool.parameters } } },
  { type: 'function', function: { ...timeTool, parameters: { ...timeTool.parameters } } },
];

describe('openai SDK: chat through the gateway', () => {
  let cg: ClientGateway;
  let client: OpenAI;
  let seen: Seen[];
  let recording: typeof fetch;
  beforeAll(async () => {
    cg = await startClientGateway();
    const rec = recordingFetch();
    seen = rec.seen;
    recording = rec.fetch;
    client = new OpenAI({ baseURL: cg.gw.url + '/v1', apiKey: cg.gw.keys.apiKey, maxRetries: 0, fetch: rec.fetch });
  });
  afterAll(async () => {
    // Every response the SDK received in this file carried its own x-request-id.
    expectRequestIds(seen);
    await disposeTestGateway(cg?.gw);
  });

  it('non-streaming text: a ChatCompletion with usage; the SDK exposes the x-request-id', async () => {
    const { data: r, response, request_id } = await client.chat.completions.create({ model: MODEL, messages, max_completion_tokens: 40 }).withResponse();
    expect(response.status).toBe(200);
    expect(request_id).toBe(response.headers.get('x-request-id'));
    expect(request_id).toBeTruthy();
    expect(r.object).toBe('chat.completion');
    expect(r.model).toBe(MODEL);
    expect(r.id).toMatch(/\S/);
    expect(Number.isInteger(r.created)).toBe(true);
    expect(Math.abs(r.created - Date.now() / 1000)).toBeLessThan(60);
    const c = r.choices[0]!;
    expect(r.choices).toHaveLength(1);
    expect(c.message.role).toBe('assistant');
    expect(c.message.content!.length).toBeGreaterThan(0);
    expect(['stop', 'length']).toContain(c.finish_reason);
    expect(r.usage!.total_tokens).toBe(r.usage!.prompt_tokens + r.usage!.completion_tokens);
  });

  it('streaming text with include_usage: one id, object, created and model on every chunk, one finish_reason, the usage chunk last', async () => {
    const req = { model: MODEL, messages, max_completion_tokens: 40 };
    const whole = await client.chat.completions.create(req);
    const { data: stream, response } = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } }).withResponse();
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(new Set(chunks.map((c) => c.created)).size).toBe(1);
    expect(Number.isInteger(chunks[0]!.created)).toBe(true);
    for (const c of chunks) {
      expect(c.object).toBe('chat.completion.chunk');
      expect(c.model).toBe(MODEL);
    }
    const usage = chunks.at(-1)!;
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toEqual(whole.usage);
    const deltas = chunks.slice(0, -1);
    for (const c of deltas) expect(c.usage ?? null).toBeNull();
    expect(deltas[0]!.choices[0]!.delta.role).toBe('assistant');
    const finishes = deltas.map((c) => c.choices[0]!.finish_reason).filter((f) => f !== null && f !== undefined);
    expect(finishes).toEqual([whole.choices[0]!.finish_reason]);
    expect(deltas.at(-1)!.choices[0]!.finish_reason).toBe(whole.choices[0]!.finish_reason);
    expect(deltas.map((c) => c.choices[0]!.delta.content ?? '').join('')).toBe(whole.choices[0]!.message.content);
  });

  it('streaming without include_usage sends no usage; the SDK stream helper assembles the same message', async () => {
    const req = { model: MODEL, messages: [{ role: 'user' as const, content: 'And the mountains?' }], max_completion_tokens: 30 };
    const whole = await client.chat.completions.create(req);
    const helper = client.chat.completions.stream(req);
    let usageSeen = false;
    helper.on('chunk', (c) => (usageSeen ||= !!c.usage));
    const final = await helper.finalChatCompletion();
    expect(usageSeen).toBe(false);
    expect(final.choices[0]!.message.content).toBe(whole.choices[0]!.message.content);
    expect(final.choices[0]!.finish_reason).toBe(whole.choices[0]!.finish_reason);
  });

  const ask = (content: string) => [{ role: 'user' as const, content }];

  it.each([
    ['auto', 'auto' as const, undefined],
    ['required', 'required' as const, undefined],
    ['named', { type: 'function' as const, function: { name: 'get_time' } }, 'get_time'],
  ])('tools, tool_choice %s: a tool call; streamed, the SDK assembles the same call from the deltas', async (_name, tool_choice, expectedName) => {
    const req = { model: MODEL, messages: ask('What is the weather and time in Paris?'), tools, tool_choice, max_completion_tokens: 200 };
    const r = await client.chat.completions.create(req);
    const c = r.choices[0]!;
    expect(c.finish_reason).toBe('tool_calls');
    const call = c.message.tool_calls![0]!;
    if (call.type !== 'function') throw new Error('not a function call');
    expect(['get_weather', 'get_time']).toContain(call.function.name);
    if (expectedName) expect(call.function.name).toBe(expectedName);
    const args = JSON.parse(call.function.arguments) as Record<string, unknown>;
    expect(typeof args.city).toBe('string');
    if (call.function.name === 'get_weather') expect(['c', 'f']).toContain(args.unit);

    const helper = client.chat.completions.stream({ ...req, stream_options: { include_usage: true } });
    const indices = new Set<number>();
    helper.on('chunk', (ch) => {
      for (const tc of ch.choices[0]?.delta.tool_calls ?? []) indices.add(tc.index);
    });
    const final = await helper.finalChatCompletion();
    expect([...indices]).toEqual([0]);
    expect(final.choices[0]!.finish_reason).toBe('tool_calls');
    expect(final.choices[0]!.message.tool_calls).toEqual(c.message.tool_calls);
    expect(final.usage).toEqual(r.usage);

    // Closing the loop: with the tool's result, `auto` answers in text.
    const after = await client.chat.completions.create({
      model: MODEL,
      messages: [...req.messages, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: '{"temp":21,"time":"14:02"}' }],
      tools,
      tool_choice: 'auto',
      max_completion_tokens: 30,
    });
    expect(after.choices[0]!.finish_reason).not.toBe('tool_calls');
    expect(after.choices[0]!.message.content).toBeTruthy();
  });

  it('response_format json_object: the content parses as a JSON object, streamed or not', async () => {
    const req = { model: MODEL, messages: ask('Answer in JSON: the capital of France.'), response_format: { type: 'json_object' as const }, max_completion_tokens: 200 };
    const r = await client.chat.completions.create(req);
    const value = JSON.parse(r.choices[0]!.message.content!) as unknown;
    expect(value).toBeTypeOf('object');
    expect(Array.isArray(value)).toBe(false);
    const final = await client.chat.completions.stream(req).finalChatCompletion();
    expect(JSON.parse(final.choices[0]!.message.content!)).toEqual(value);
  });

  it('max_completion_tokens caps the answer: finish_reason length at exactly that many tokens', async () => {
    const r = await client.chat.completions.create({ model: MODEL, messages: ask(longPrompt(20)), max_completion_tokens: 5 });
    expect(r.choices[0]!.finish_reason).toBe('length');
    expect(r.usage!.completion_tokens).toBe(5);
  });

  it('20 concurrent requests (streamed and not) all succeed, each under its own id', async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const req = { model: MODEL, messages: ask(`concurrent question ${i}`), max_completion_tokens: 30 };
        if (i % 2 === 0) {
          const r = await client.chat.completions.create(req);
          return { id: r.id, content: r.choices[0]!.message.content!, usage: r.usage! };
        }
        const final = await client.chat.completions.stream({ ...req, stream_options: { include_usage: true } }).finalChatCompletion();
        return { id: final.id, content: final.choices[0]!.message.content!, usage: final.usage! };
      }),
    );
    expect(new Set(results.map((r) => r.id)).size).toBe(20);
    for (const r of results) {
      expect(r.content.length).toBeGreaterThan(0);
      expect(r.usage.completion_tokens).toBeGreaterThan(0);
    }
    await expectBooksBalanced(cg.gw, cg.escrowId);
  });

  it('abort mid-stream: the host request is cancelled, the books balance, the next request succeeds', async () => {
    const content = longPrompt(50);
    const controller = new AbortController();
    const stream = await client.chat.completions.create({ model: MODEL, messages: ask(content), stream: true }, { signal: controller.signal });
    let pieces = 0;
    // The SDK ends the iteration quietly when its request is aborted.
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) pieces++;
      if (pieces === 3) controller.abort();
    }
    expect(controller.signal.aborted).toBe(true);
    expect(pieces).toBeLessThan(50);
    const { failed } = await expectBooksBalanced(cg.gw, cg.escrowId);
    const cut = failed.at(-1)!;
    expect(cut.reason).toMatch(/disconnect|abort|closed/i);
    expect(cut.usage.completionTokens).toBeLessThan(50);
    const next = await client.chat.completions.create({ model: MODEL, messages: ask('still there?'), max_completion_tokens: 10 });
    expect(next.choices[0]!.message.content).toBeTruthy();
    expect((await cg.gw.call('/v1/status', { key: 'none' })).json.status).toBe('ok');
  });

  async function caught(p: Promise<unknown>): Promise<unknown> {
    try {
      await p;
    } catch (e) {
      return e;
    }
    throw new Error('expected the SDK to throw');
  }

  it("errors are the SDK's own classes with the gateway's message: 401, 400, 404", async () => {
    const bad = new OpenAI({ baseURL: cg.gw.url + '/v1', apiKey: 'sk-not-a-key', maxRetries: 0, fetch: recording });
    const e401 = await caught(bad.chat.completions.create({ model: MODEL, messages }));
    expect(e401).toBeInstanceOf(AuthenticationError);
    expect((e401 as AuthenticationError).code).toBe('invalid_api_key');

    const e400 = await caught(client.chat.completions.create({ model: MODEL, messages, tool_choice: 'required' }));
    expect(e400).toBeInstanceOf(BadRequestError);
    const b = e400 as BadRequestError;
    expect(b.message).toContain("Invalid value for 'tool_choice': 'required' needs at least one entry in 'tools'.");
    expect(b.param).toBe('tool_choice');
    expect(b.type).toBe('invalid_request_error');
    expect(b.requestID).toBeTruthy();

    const eTemp = await caught(client.chat.completions.create({ model: MODEL, messages, temperature: 3 }));
    expect(eTemp).toBeInstanceOf(BadRequestError);
    expect((eTemp as BadRequestError).param).toBe('temperature');

    const e404 = await caught(client.chat.completions.create({ model: 'no-such/model', messages }));
    expect(e404).toBeInstanceOf(NotFoundError);
    expect((e404 as NotFoundError).code).toBe('model_not_found');
    expect((e404 as NotFoundError).message).toContain("The model 'no-such/model' does not exist");
  });
});

describe('openai SDK: retries wait what Retry-After says', () => {
  let cg: ClientGateway;
  beforeAll(async () => {
    // One request at a time, and no escrow yet.
    cg = await startClientGateway({ env: { GATEWAY_MAX_CONCURRENT_REQUESTS: '1' }, escrow: false, tokenDelayMs: 10 });
  });
  afterAll(() => disposeTestGateway(cg?.gw));

  it('503 no_active_escrow with Retry-After: the SDK waits that long, and its retry is served once an escrow exists', { timeout: 30_000 }, async () => {
    const rec = recordingFetch();
    const client = new OpenAI({ baseURL: cg.gw.url + '/v1', apiKey: cg.gw.keys.apiKey, maxRetries: 1, fetch: rec.fetch });
    const answer = client.chat.completions.create({ model: MODEL, messages, max_completion_tokens: 10 });
    while (rec.seen.length === 0) await new Promise((r) => setTimeout(r, 10));
    expect(rec.seen[0]!.status).toBe(503);
    const wait = Number(rec.seen[0]!.retryAfter);
    expect(wait).toBeGreaterThanOrEqual(1);
    cg.escrowId = await createEscrowViaApi(cg.gw);
    const r = await answer;
    expect(r.choices[0]!.message.content).toBeTruthy();
    expect(rec.seen.map((s) => s.status)).toEqual([503, 200]);
    const delay = rec.seen[1]!.sentAt - rec.seen[0]!.at;
    expect(delay).toBeGreaterThanOrEqual(wait * 1000 - 20);
    expect(delay).toBeLessThan(wait * 1000 + 2000);
    expectRequestIds(rec.seen);
  });

  it('429 at the concurrency limit with Retry-After: without retries a RateLimitError, with one the SDK waits and succeeds', async () => {
    cg.escrowId ||= await createEscrowViaApi(cg.gw); // made by the 503 case when it ran first
    const busy = new OpenAI({ baseURL: cg.gw.url + '/v1', apiKey: cg.gw.keys.apiKey, maxRetries: 0 });
    // Takes the one slot with a stream (10 ms between tokens, 40 or more tokens); `release` cuts it off.
    const hold = async () => {
      const stream = await busy.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: longPrompt(40) }], stream: true });
      const it = stream[Symbol.asyncIterator]();
      await it.next();
      return {
        drain: async () => {
          for (let n = await it.next(); !n.done; n = await it.next());
        },
        release: () => stream.controller.abort(),
      };
    };
    const first = await hold();
    const e = await caught(busy.chat.completions.create({ model: MODEL, messages, max_completion_tokens: 5 }));
    expect(e).toBeInstanceOf(RateLimitError);
    expect((e as RateLimitError).code).toBe('concurrency_limit_exceeded');
    expect((e as RateLimitError).headers?.get('retry-after')).toBe('1');
    await first.drain();

    const second = await hold();
    const rec = recordingFetch();
    const patient = new OpenAI({ baseURL: cg.gw.url + '/v1', apiKey: cg.gw.keys.apiKey, maxRetries: 2, fetch: rec.fetch });
    const answer = patient.chat.completions.create({ model: MODEL, messages, max_completion_tokens: 5 });
    while (rec.seen.length === 0) await new Promise((r) => setTimeout(r, 5));
    second.release();
    const r = await answer;
    expect(r.choices[0]!.message.content).toBeTruthy();
    expect(rec.seen.map((s) => s.status)).toEqual([429, 200]);
    expect(rec.seen[0]!.retryAfter).toBe('1');
    // The SDK's own first backoff is under 0.5 s; it waited the second the gateway asked for.
    expect(rec.seen[1]!.sentAt - rec.seen[0]!.at).toBeGreaterThanOrEqual(980);
    expectRequestIds(rec.seen);
    await expectBooksBalanced(cg.gw, cg.escrowId);
  });

  async function caught(p: Promise<unknown>): Promise<unknown> {
    try {
      await p;
    } catch (e) {
      return e;
    }
    throw new Error('expected the SDK to throw');
  }
});
