/**
 * LangChain's `ChatOpenAI` (`@langchain/openai`), unmodified, against a real gateway (embedded
 * devnet, simulated hosts over loopback), used as an application would (issue 30, "Real OpenAI
 * clients"): invoke / stream, the raw chunks' fields (read from a copy of the wire), streamed
 * usage (LangChain asks for it by default), bound tools with each tool_choice (LangChain assembles
 * the streamed tool-call chunks), JSON mode, max_completion_tokens, 20 concurrent calls, an
 * aborted stream, and errors as the openai SDK classes LangChain passes on, with its retries
 * waiting what Retry-After says.
 */
import { AIMessageChunk, HumanMessage, SystemMessage, ToolMessage } from '@langchain/core/messages';
import { ChatOpenAI } from '@langchain/openai';
import { AuthenticationError, BadRequestError, NotFoundError, RateLimitError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disposeTestGateway } from '../helpers/gateway.js';
import { expectBooksBalanced, expectRequestIds, longPrompt, MODEL, recordingFetch, sseFrames, startClientGateway, timeTool, weatherTool, type ClientGateway, type Seen } from './helpers.js';

const messages = [new SystemMessage('You are terse.'), new HumanMessage('Tell me about the sea.')];
const tools = [
  { type: 'function' as const, function: { ...weatherTool, parameters: { ...weatherTool.parameters } } },
  { type: 'function' as const, function: { ...timeTool, parameters: { ...timeTool.parameters } } },
];

function chatFor(cg: ClientGateway, opts: { apiKey?: string; model?: string; fetch?: typeof fetch; maxRetries?: number; maxTokens?: number; modelKwargs?: Record<string, unknown> } = {}) {
  return new ChatOpenAI({
    model: opts.model ?? MODEL,
    apiKey: opts.apiKey ?? cg.gw.keys.apiKey,
    maxRetries: opts.maxRetries ?? 0,
    ...(opts.maxTokens ? { maxTokens: opts.maxTokens } : {}),
    ...(opts.modelKwargs ? { modelKwargs: opts.modelKwargs } : {}),
    configuration: { baseURL: cg.gw.url + '/v1', ...(opts.fetch ? { fetch: opts.fetch } : {}) },
  });
}

async function caught(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected LangChain to throw');
}

async function collect(stream: AsyncIterable<AIMessageChunk>): Promise<{ chunks: AIMessageChunk[]; whole: AIMessageChunk }> {
  const chunks: AIMessageChunk[] = [];
  let whole: AIMessageChunk | undefined;
  for await (const c of stream) {
    chunks.push(c);
    whole = whole ? whole.concat(c) : c;
  }
  return { chunks, whole: whole! };
}

describe('LangChain ChatOpenAI: chat through the gateway', () => {
  let cg: ClientGateway;
  let seen: Seen[];
  let llm: ChatOpenAI;
  beforeAll(async () => {
    cg = await startClientGateway();
    const rec = recordingFetch({ bodies: true });
    seen = rec.seen;
    llm = chatFor(cg, { fetch: rec.fetch, maxTokens: 40 });
  });
  afterAll(async () => {
    expectRequestIds(seen);
    await disposeTestGateway(cg?.gw);
  });

  it('invoke: an AIMessage with text, finish_reason, model and usage', async () => {
    const r = await llm.invoke(messages);
    expect(typeof r.content).toBe('string');
    expect((r.content as string).length).toBeGreaterThan(0);
    expect(['stop', 'length']).toContain(r.response_metadata.finish_reason);
    expect(r.response_metadata.model_name).toBe(MODEL);
    expect(r.id).toMatch(/\S/);
    expect(r.usage_metadata!.total_tokens).toBe(r.usage_metadata!.input_tokens + r.usage_metadata!.output_tokens);
  });

  it('stream: the same text and usage; on the wire one id and created per stream, object, model, one finish_reason, the usage chunk last', async () => {
    const whole = await llm.invoke(messages);
    const before = seen.length;
    const { chunks, whole: streamed } = await collect(await llm.stream(messages));
    expect(streamed.content).toBe(whole.content);
    expect(streamed.usage_metadata).toEqual(whole.usage_metadata);
    expect(new Set(chunks.map((c) => c.id).filter(Boolean)).size).toBe(1);
    const wire = seen.slice(before);
    expect(wire).toHaveLength(1);
    const frames = sseFrames(await wire[0]!.body!);
    expect(new Set(frames.map((f) => f.id)).size).toBe(1);
    expect(new Set(frames.map((f) => f.created)).size).toBe(1);
    for (const f of frames) {
      expect(f.object).toBe('chat.completion.chunk');
      expect(f.model).toBe(MODEL);
    }
    expect(frames.at(-1)!.choices).toEqual([]);
    expect(frames.at(-1)!.usage.total_tokens).toBe(whole.usage_metadata!.total_tokens);
    expect(frames.flatMap((f) => f.choices.map((c: { finish_reason: string | null }) => c.finish_reason)).filter(Boolean)).toEqual([whole.response_metadata.finish_reason]);
  });

  it.each([
    ['auto', 'auto', undefined],
    ['required', 'required', undefined],
    ['named', 'get_time', 'get_time'],
  ])('bindTools, tool_choice %s: a tool call; streamed, LangChain assembles the same call from the chunks', async (_n, tool_choice, expectedName) => {
    const withTools = chatFor(cg, { maxTokens: 200 }).bindTools(tools, { tool_choice });
    const ask = [new HumanMessage('What is the weather and time in Paris?')];
    const r = await withTools.invoke(ask);
    expect(r.response_metadata.finish_reason).toBe('tool_calls');
    expect(r.tool_calls).toHaveLength(1);
    const call = r.tool_calls![0]!;
    if (expectedName) expect(call.name).toBe(expectedName);
    expect(typeof call.args.city).toBe('string');

    const { chunks, whole } = await collect(await withTools.stream(ask));
    expect(chunks.filter((c) => c.tool_call_chunks?.length).length).toBeGreaterThan(1);
    expect(whole.tool_calls).toEqual([{ ...call, type: 'tool_call' }]);

    const after = await withTools.invoke([...ask, r, new ToolMessage({ tool_call_id: call.id!, content: '{"temp":21,"time":"14:02"}' })]);
    if (tool_choice === 'auto') {
      expect(after.tool_calls ?? []).toEqual([]);
      expect(after.content).toBeTruthy();
    }
  });

  it("withStructuredOutput jsonMode (response_format json_object): LangChain parses the model's JSON", async () => {
    const structured = chatFor(cg, { maxTokens: 200 }).withStructuredOutput({ type: 'object', properties: { answer: { type: 'string' } } }, { method: 'jsonMode' });
    const value = (await structured.invoke([new HumanMessage('Answer in JSON: the capital of France.')])) as Record<string, unknown>;
    expect(value).toBeTypeOf('object');
    expect(typeof value.answer).toBe('string');
  });

  it('max_completion_tokens (model kwargs) caps the answer', async () => {
    const capped = chatFor(cg, { modelKwargs: { max_completion_tokens: 5 } });
    const r = await capped.invoke([new HumanMessage(longPrompt(20))]);
    expect(r.response_metadata.finish_reason).toBe('length');
    expect(r.usage_metadata!.output_tokens).toBe(5);
  });

  it('20 concurrent calls (streamed and batched) all succeed', async () => {
    const asks = Array.from({ length: 20 }, (_, i) => [new HumanMessage(`concurrent question ${i}`)]);
    const [batched, streamed] = await Promise.all([
      llm.batch(asks.slice(0, 10), { maxConcurrency: 10 }),
      Promise.all(asks.slice(10).map(async (a) => (await collect(await llm.stream(a))).whole)),
    ]);
    const all = [...batched, ...streamed];
    expect(new Set(all.map((m) => m.id)).size).toBe(20);
    for (const m of all) expect((m.content as string).length).toBeGreaterThan(0);
    await expectBooksBalanced(cg.gw, cg.escrowId);
  });

  it('an aborted stream: the gateway cancels the host request, the books balance, the next call succeeds', async () => {
    const controller = new AbortController();
    const unlimited = chatFor(cg);
    let pieces = 0;
    const e = await caught(
      (async () => {
        for await (const c of await unlimited.stream([new HumanMessage(longPrompt(50))], { signal: controller.signal })) {
          if (c.content && ++pieces === 3) controller.abort();
        }
      })(),
    );
    expect(String(e)).toMatch(/abort/i);
    expect(pieces).toBe(3);
    const { failed } = await expectBooksBalanced(cg.gw, cg.escrowId);
    expect(failed.at(-1)!.reason).toMatch(/disconnect|abort|closed/i);
    expect((await llm.invoke([new HumanMessage('still there?')])).content).toBeTruthy();
  });

  it('errors arrive as the openai SDK classes with the gateway message: 401, 400, 404', async () => {
    const e401 = await caught(chatFor(cg, { apiKey: 'sk-not-a-key' }).invoke(messages));
    expect(e401).toBeInstanceOf(AuthenticationError);
    expect((e401 as { lc_error_code?: string }).lc_error_code).toBe('MODEL_AUTHENTICATION');

    const e400 = await caught(new ChatOpenAI({ model: MODEL, apiKey: cg.gw.keys.apiKey, maxRetries: 0, temperature: 3, configuration: { baseURL: cg.gw.url + '/v1' } }).invoke(messages));
    expect(e400).toBeInstanceOf(BadRequestError);
    expect((e400 as BadRequestError).param).toBe('temperature');

    const e404 = await caught(chatFor(cg, { model: 'no-such/model' }).invoke(messages));
    expect(e404).toBeInstanceOf(NotFoundError);
    expect((e404 as NotFoundError).message).toContain("The model 'no-such/model' does not exist");
    expect((e404 as { lc_error_code?: string }).lc_error_code).toBe('MODEL_NOT_FOUND');
  });
});

describe('LangChain ChatOpenAI: retries wait what Retry-After says', () => {
  let cg: ClientGateway;
  beforeAll(async () => {
    cg = await startClientGateway({ env: { GATEWAY_MAX_CONCURRENT_REQUESTS: '1' }, tokenDelayMs: 10 });
  });
  afterAll(() => disposeTestGateway(cg?.gw));

  it('429 at the concurrency limit: without retries a RateLimitError; with retries LangChain waits the second Retry-After asks and succeeds', async () => {
    const hold = async () => {
      const controller = new AbortController();
      const it = (await chatFor(cg).stream([new HumanMessage(longPrompt(40))], { signal: controller.signal }))[Symbol.asyncIterator]();
      await it.next();
      return {
        drain: async () => {
          for (let n = await it.next(); !n.done; n = await it.next());
        },
        release: () => controller.abort(),
      };
    };
    const first = await hold();
    const e = await caught(chatFor(cg, { maxTokens: 5 }).invoke(messages));
    expect(e).toBeInstanceOf(RateLimitError);
    expect((e as RateLimitError).headers?.get('retry-after')).toBe('1');
    await first.drain();

    const second = await hold();
    const rec = recordingFetch();
    const answer = chatFor(cg, { maxTokens: 5, maxRetries: 2, fetch: rec.fetch }).invoke(messages);
    while (rec.seen.length === 0) await new Promise((r) => setTimeout(r, 5));
    second.release();
    const r = await answer;
    expect(r.content).toBeTruthy();
    expect(rec.seen.map((s) => s.status)).toEqual([429, 200]);
    expect(rec.seen[1]!.sentAt - rec.seen[0]!.at).toBeGreaterThanOrEqual(980);
    expectRequestIds(rec.seen);
    await expectBooksBalanced(cg.gw, cg.escrowId);
  });
});
