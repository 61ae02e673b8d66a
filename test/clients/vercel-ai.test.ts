/**
 * The Vercel AI SDK (`ai` with `@ai-sdk/openai-compatible`), unmodified, against a real gateway
 * (embedded devnet, simulated hosts over loopback), used as an application would (issue 30, "Real
 * OpenAI clients"): generateText / streamText, the raw chunks' fields, streamed usage, tools with
 * each toolChoice (the SDK assembles streamed tool-call deltas), JSON output, max_completion_tokens
 * (a provider option, passed through), 20 concurrent calls, an aborted stream, and errors as the
 * SDK's APICallError, with its retries waiting what Retry-After says.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { APICallError, generateText, jsonSchema, Output, streamText, tool, type ModelMessage } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disposeTestGateway } from '../helpers/gateway.js';
import { expectBooksBalanced, expectRequestIds, longPrompt, MODEL, recordingFetch, startClientGateway, timeTool, weatherTool, type ClientGateway, type Seen } from './helpers.js';

const messages: ModelMessage[] = [{ role: 'user', content: 'Tell me about the sea.' }];
const tools = {
  get_weather: tool({ description: weatherTool.description, inputSchema: jsonSchema<{ city: string; unit: 'c' | 'f'; days?: number }>(weatherTool.parameters as never) }),
  get_time: tool({ description: timeTool.description, inputSchema: jsonSchema<{ city: string }>(timeTool.parameters as never) }),
};

function providerFor(cg: ClientGateway, apiKey: string, fetch?: typeof globalThis.fetch) {
  return createOpenAICompatible({ name: 'shardgate', baseURL: cg.gw.url + '/v1', apiKey, includeUsage: true, ...(fetch ? { fetch } : {}) });
}

async function caught(p: PromiseLike<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected the SDK to throw');
}

describe('Vercel AI SDK: chat through the gateway', () => {
  let cg: ClientGateway;
  let model: ReturnType<ReturnType<typeof providerFor>['chatModel']>;
  let seen: Seen[];
  beforeAll(async () => {
    cg = await startClientGateway();
    const rec = recordingFetch();
    seen = rec.seen;
    model = providerFor(cg, cg.gw.keys.apiKey, rec.fetch).chatModel(MODEL);
  });
  afterAll(async () => {
    expectRequestIds(seen);
    await disposeTestGateway(cg?.gw);
  });

  it('generateText: text, finish reason, usage and response metadata', async () => {
    const r = await generateText({ model, system: 'You are terse.', messages, maxOutputTokens: 40, maxRetries: 0 });
    expect(r.text.length).toBeGreaterThan(0);
    expect(['stop', 'length']).toContain(r.finishReason);
    expect(r.usage.inputTokens).toBeGreaterThan(0);
    expect(r.usage.totalTokens).toBe(r.usage.inputTokens! + r.usage.outputTokens!);
    expect(r.response.modelId).toBe(MODEL);
    expect(r.response.id).toMatch(/\S/);
    expect(Math.abs(r.response.timestamp.getTime() - Date.now())).toBeLessThan(60_000);
    expect(r.response.headers?.['x-request-id']).toBeTruthy();
  });

  it('streamText: the same text and usage; raw chunks share one id and created, and carry object, model and one finish_reason', async () => {
    const whole = await generateText({ model, system: 'You are terse.', messages, maxOutputTokens: 40, maxRetries: 0 });
    const result = streamText({ model, system: 'You are terse.', messages, maxOutputTokens: 40, maxRetries: 0, includeRawChunks: true });
    const raw: { id: string; object: string; created: number; model: string; choices: { finish_reason: string | null }[]; usage?: unknown }[] = [];
    let text = '';
    for await (const part of result.fullStream) {
      if (part.type === 'raw') raw.push(part.rawValue as (typeof raw)[number]);
      if (part.type === 'text-delta') text += part.text;
      if (part.type === 'error') throw part.error;
    }
    expect(text).toBe(whole.text);
    expect(await result.finishReason).toBe(whole.finishReason);
    expect(await result.usage).toMatchObject({ inputTokens: whole.usage.inputTokens, outputTokens: whole.usage.outputTokens, totalTokens: whole.usage.totalTokens });
    expect(new Set(raw.map((c) => c.id)).size).toBe(1);
    expect(new Set(raw.map((c) => c.created)).size).toBe(1);
    for (const c of raw) {
      expect(c.object).toBe('chat.completion.chunk');
      expect(c.model).toBe(MODEL);
    }
    // include_usage (the provider's includeUsage): the last chunk has the usage and no choices.
    expect(raw.at(-1)!.choices).toEqual([]);
    expect(raw.at(-1)!.usage).toBeTruthy();
    expect(raw.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter((f) => f)).toHaveLength(1);
    expect((await result.response).headers?.['x-request-id']).toBeTruthy();
  });

  it.each([
    ['auto', 'auto' as const, undefined],
    ['required', 'required' as const, undefined],
    ['named', { type: 'tool' as const, toolName: 'get_time' as const }, 'get_time'],
  ])('tools, toolChoice %s: a tool call with valid input; streamed, the SDK assembles the same call', async (_n, toolChoice, expectedName) => {
    const req = { model, messages: [{ role: 'user' as const, content: 'What is the weather and time in Paris?' }], tools, toolChoice, maxOutputTokens: 200, maxRetries: 0 };
    const r = await generateText(req);
    expect(r.finishReason).toBe('tool-calls');
    expect(r.toolCalls).toHaveLength(1);
    const call = r.toolCalls[0]!;
    if (expectedName) expect(call.toolName).toBe(expectedName);
    expect(typeof (call.input as { city: unknown }).city).toBe('string');

    const s = streamText(req);
    const deltas: string[] = [];
    for await (const part of s.fullStream) {
      if (part.type === 'tool-input-delta') deltas.push(part.delta);
      if (part.type === 'error') throw part.error;
    }
    const streamed = await s.toolCalls;
    expect(streamed.map((c) => ({ id: c.toolCallId, name: c.toolName, input: c.input }))).toEqual([{ id: call.toolCallId, name: call.toolName, input: call.input }]);
    expect(deltas.length).toBeGreaterThan(1);
    expect(await s.finishReason).toBe('tool-calls');
  });

  it('Output.json() (response_format json_object): the answer parses as a JSON object', async () => {
    const r = await generateText({ model, messages: [{ role: 'user', content: 'Answer in JSON: the capital of France.' }], output: Output.json(), maxOutputTokens: 200, maxRetries: 0 });
    expect(r.output).toBeTypeOf('object');
    expect(JSON.parse(r.text)).toEqual(r.output);
    const s = streamText({ model, messages: [{ role: 'user', content: 'Answer in JSON: the capital of France.' }], output: Output.json(), maxOutputTokens: 200, maxRetries: 0 });
    expect(await s.output).toEqual(r.output);
  });

  it('max_completion_tokens, sent as a provider option, caps the answer', async () => {
    const r = await generateText({ model, messages: [{ role: 'user', content: longPrompt(20) }], providerOptions: { shardgate: { max_completion_tokens: 5 } }, maxRetries: 0 });
    expect(r.finishReason).toBe('length');
    expect(r.usage.outputTokens).toBe(5);
  });

  it('20 concurrent calls (streamed and not) all succeed', async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const req = { model, messages: [{ role: 'user' as const, content: `concurrent question ${i}` }], maxOutputTokens: 30, maxRetries: 0 };
        if (i % 2 === 0) {
          const r = await generateText(req);
          return { id: r.response.id, text: r.text };
        }
        const s = streamText(req);
        return { id: (await s.response).id, text: await s.text };
      }),
    );
    expect(new Set(results.map((r) => r.id)).size).toBe(20);
    for (const r of results) expect(r.text.length).toBeGreaterThan(0);
    await expectBooksBalanced(cg.gw, cg.escrowId);
  });

  it('abortSignal mid-stream: the gateway cancels the host request, the books balance, the next call succeeds', async () => {
    const controller = new AbortController();
    let aborted = false;
    const s = streamText({ model, messages: [{ role: 'user', content: longPrompt(50) }], abortSignal: controller.signal, maxRetries: 0, onAbort: () => void (aborted = true) });
    let pieces = 0;
    try {
      for await (const _ of s.textStream) if (++pieces === 3) controller.abort();
    } catch (e) {
      expect(String(e)).toMatch(/abort/i);
    }
    expect(pieces).toBeLessThan(50);
    expect(aborted).toBe(true);
    const { failed } = await expectBooksBalanced(cg.gw, cg.escrowId);
    expect(failed.at(-1)!.reason).toMatch(/disconnect|abort|closed/i);
    const next = await generateText({ model, messages: [{ role: 'user', content: 'still there?' }], maxOutputTokens: 10, maxRetries: 0 });
    expect(next.text).toBeTruthy();
  });

  it("errors are APICallError with the gateway's status and message: 401, 400, 404", async () => {
    const bad = providerFor(cg, 'sk-not-a-key').chatModel(MODEL);
    const e401 = await caught(generateText({ model: bad, messages, maxRetries: 0 }));
    expect(APICallError.isInstance(e401)).toBe(true);
    expect((e401 as APICallError).statusCode).toBe(401);
    expect((e401 as APICallError).isRetryable).toBe(false);
    expect((e401 as APICallError).message).toContain('Incorrect API key provided');

    const e400 = await caught(generateText({ model, messages, temperature: 3, maxRetries: 0 }));
    expect(APICallError.isInstance(e400)).toBe(true);
    expect((e400 as APICallError).statusCode).toBe(400);
    expect((e400 as APICallError).message).toMatch(/temperature/);
    expect((e400 as APICallError).responseHeaders?.['x-request-id']).toBeTruthy();

    const e404 = await caught(generateText({ model: providerFor(cg, cg.gw.keys.apiKey).chatModel('no-such/model'), messages, maxRetries: 0 }));
    expect(APICallError.isInstance(e404)).toBe(true);
    expect((e404 as APICallError).statusCode).toBe(404);
    expect((e404 as APICallError).message).toContain("The model 'no-such/model' does not exist");
  });
});

describe('Vercel AI SDK: retries wait what Retry-After says', () => {
  let cg: ClientGateway;
  beforeAll(async () => {
    cg = await startClientGateway({ env: { GATEWAY_MAX_CONCURRENT_REQUESTS: '1' }, tokenDelayMs: 10 });
  });
  afterAll(() => disposeTestGateway(cg?.gw));

  it('429 at the concurrency limit: without retries an APICallError (retryable, Retry-After 1); with retries the SDK waits a second and succeeds', async () => {
    const model = providerFor(cg, cg.gw.keys.apiKey).chatModel(MODEL);
    // Takes the one slot with a stream (10 ms between tokens, 40 or more tokens); `release` cuts it off.
    const hold = async () => {
      const controller = new AbortController();
      const s = streamText({ model, messages: [{ role: 'user', content: longPrompt(40) }], maxRetries: 0, abortSignal: controller.signal });
      const it = s.textStream[Symbol.asyncIterator]();
      await it.next();
      return {
        drain: async () => {
          for (let n = await it.next(); !n.done; n = await it.next());
        },
        release: () => controller.abort(),
      };
    };
    const first = await hold();
    const e = await caught(generateText({ model, messages, maxOutputTokens: 5, maxRetries: 0 }));
    expect(APICallError.isInstance(e)).toBe(true);
    expect((e as APICallError).statusCode).toBe(429);
    expect((e as APICallError).isRetryable).toBe(true);
    expect((e as APICallError).responseHeaders?.['retry-after']).toBe('1');
    await first.drain();

    const second = await hold();
    const rec = recordingFetch();
    const patient = providerFor(cg, cg.gw.keys.apiKey, rec.fetch).chatModel(MODEL);
    const answer = generateText({ model: patient, messages, maxOutputTokens: 5, maxRetries: 2 });
    while (rec.seen.length === 0) await new Promise((r) => setTimeout(r, 5));
    second.release();
    const r = await answer;
    expect(r.text).toBeTruthy();
    expect(rec.seen.map((s) => s.status)).toEqual([429, 200]);
    // The SDK's own first backoff is 2 s; it waited the 1 s the gateway asked for.
    const delay = rec.seen[1]!.sentAt - rec.seen[0]!.at;
    expect(delay).toBeGreaterThanOrEqual(980);
    expect(delay).toBeLessThan(1900);
    expectRequestIds(rec.seen);
    await expectBooksBalanced(cg.gw, cg.escrowId);
  });
});
