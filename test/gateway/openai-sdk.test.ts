/**
 * The official `openai` npm SDK as the client of a real gateway on the embedded devnet: what a chat
 * client written for OpenAI sees (issue 4: "the official openai npm SDK as the client").
 */
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

describe('OpenAI SDK against the gateway', () => {
  let gw: TestGateway;
  let admin: OpenAI;
  let client: OpenAI;
  beforeAll(async () => {
    gw = await startTestGateway();
    await createEscrowViaApi(gw);
    // No retries: an error must surface as the gateway answered it, once.
    admin = new OpenAI({ baseURL: gw.url + '/v1', apiKey: gw.keys.adminApiKey, maxRetries: 0 });
    client = new OpenAI({ baseURL: gw.url + '/v1', apiKey: gw.keys.apiKey, maxRetries: 0 });
  });
  afterAll(() => disposeTestGateway(gw));

  const messages = [
    { role: 'system' as const, content: 'You are terse.' },
    { role: 'user' as const, content: 'Tell me about the sea.' },
  ];

  it('non-streaming: a ChatCompletion with usage', async () => {
    const r = await admin.chat.completions.create({ model: MODEL, messages, max_tokens: 40, temperature: 0.5 });
    expect(r.object).toBe('chat.completion');
    expect(r.model).toBe(MODEL);
    expect(typeof r.id).toBe('string');
    expect(Number.isInteger(r.created)).toBe(true);
    expect(r.choices).toHaveLength(1);
    const c = r.choices[0]!;
    expect(c.index).toBe(0);
    expect(c.message.role).toBe('assistant');
    expect(typeof c.message.content).toBe('string');
    expect(c.message.content!.length).toBeGreaterThan(0);
    expect(['stop', 'length']).toContain(c.finish_reason);
    expect(r.usage!.total_tokens).toBe(r.usage!.prompt_tokens + r.usage!.completion_tokens);
    expect(r.usage!.completion_tokens).toBeLessThanOrEqual(40);
  });

  it('streaming: the reassembled content equals the non-streamed answer; usage chunk last', async () => {
    const req = { model: MODEL, messages, max_tokens: 40, temperature: 0.5 };
    const whole = await admin.chat.completions.create(req);
    const stream = await admin.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
    let content = '';
    let role: string | undefined;
    let finish: string | null | undefined;
    let usage: OpenAI.CompletionUsage | undefined | null;
    let chunks = 0;
    let usageChunks = 0;
    const ids = new Set<string>();
    for await (const chunk of stream) {
      chunks++;
      ids.add(chunk.id);
      expect(chunk.object).toBe('chat.completion.chunk');
      expect(chunk.model).toBe(MODEL);
      if (chunk.usage) {
        usageChunks++;
        usage = chunk.usage;
        expect(chunk.choices).toEqual([]);
        continue;
      }
      // Nothing after the usage chunk.
      expect(usageChunks).toBe(0);
      const d = chunk.choices[0]!;
      if (chunks === 1) role = d.delta.role;
      content += d.delta.content ?? '';
      if (d.finish_reason) finish = d.finish_reason;
    }
    expect(role).toBe('assistant');
    expect(content).toBe(whole.choices[0]!.message.content);
    expect(finish).toBe(whole.choices[0]!.finish_reason);
    expect(ids.size).toBe(1);
    expect(usageChunks).toBe(1);
    expect(usage).toEqual(whole.usage);
  });

  it('streaming without include_usage sends no usage chunk', async () => {
    const stream = await admin.chat.completions.create({ model: MODEL, messages, max_tokens: 10, stream: true });
    for await (const chunk of stream) expect(chunk.usage ?? null).toBeNull();
  });

  const tools: OpenAI.ChatCompletionTool[] = [
    {
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'Weather for a city',
        parameters: {
          type: 'object',
          properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['c', 'f'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
          required: ['city', 'unit'],
        },
      },
    },
  ];

  it('tool calls: finish_reason tool_calls, arguments are JSON with the required keys', async () => {
    const r = await admin.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, tool_choice: 'required', max_tokens: 200 });
    const c = r.choices[0]!;
    expect(c.finish_reason).toBe('tool_calls');
    const calls = c.message.tool_calls!;
    expect(calls.length).toBeGreaterThanOrEqual(1);
    const call = calls[0]!;
    expect(call.type).toBe('function');
    if (call.type !== 'function') throw new Error('not a function call');
    expect(call.function.name).toBe('get_weather');
    expect(typeof call.id).toBe('string');
    const args = JSON.parse(call.function.arguments) as Record<string, unknown>;
    expect(typeof args.city).toBe('string');
    expect(['c', 'f']).toContain(args.unit);

    // The same call streamed: tool-call deltas with an index reassemble to the same call.
    const stream = await admin.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, tool_choice: 'required', max_tokens: 200, stream: true });
    let name = '';
    let argText = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      const d = chunk.choices[0];
      if (!d) continue;
      for (const tc of d.delta.tool_calls ?? []) {
        expect(tc.index).toBe(0);
        name += tc.function?.name ?? '';
        argText += tc.function?.arguments ?? '';
      }
      if (d.finish_reason) finish = d.finish_reason;
    }
    expect(finish).toBe('tool_calls');
    expect(name).toBe('get_weather');
    expect(argText).toBe(call.function.arguments);

    // Closing the loop: the tool result gets a text answer.
    const after = await admin.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Weather in Paris?' }, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: '{"temp":21}' }],
      tools,
      max_tokens: 30,
    });
    expect(after.choices[0]!.message.content).toBeTruthy();
  });

  it('models.list() lists the served model', async () => {
    const page = await client.models.list();
    const ids = page.data.map((m) => m.id);
    expect(ids).toContain(MODEL);
    for (const m of page.data) {
      expect(m.object).toBe('model');
      expect(Number.isInteger(m.created)).toBe(true);
      expect(typeof m.owned_by).toBe('string');
    }
  });

  async function apiError(p: Promise<unknown>): Promise<APIError> {
    try {
      await p;
    } catch (e) {
      expect(e).toBeInstanceOf(APIError);
      return e as APIError;
    }
    throw new Error('expected an APIError');
  }

  it('errors: 401 admin_only for a client key, 404 model_not_found, 400 temperature 3', async () => {
    const e401 = await apiError(client.chat.completions.create({ model: MODEL, messages }));
    expect(e401.status).toBe(401);
    expect(e401.message).toContain('requires an admin API key');

    const e404 = await apiError(admin.chat.completions.create({ model: 'no-such/model', messages }));
    expect(e404.status).toBe(404);
    expect(e404.code).toBe('model_not_found');

    const e400 = await apiError(admin.chat.completions.create({ model: MODEL, messages, temperature: 3 }));
    expect(e400.status).toBe(400);
    expect(e400.param).toBe('temperature');
    expect(e400.type).toBe('invalid_request_error');

    const bad = new OpenAI({ baseURL: gw.url + '/v1', apiKey: 'sk-wrong', maxRetries: 0 });
    const eKey = await apiError(bad.models.list());
    expect(eKey.status).toBe(401);
    expect(eKey.code).toBe('invalid_api_key');
  });
});
