/**
 * What a client gets back from an OpenAI-compatible upstream (NETWORK_UPSTREAM_URL), through the
 * whole gateway: the upstream's own answer text when it already names the requested model and
 * reports usage (the gateway passes it on without re-serializing), the requested model otherwise
 * (servers that answer a dated model name), and counted usage when the server reports none.
 * Whatever is passed on, the log bills the usage the answer carries.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';
import { requestRecords } from '../helpers/request-records.js';

/** The next answer's JSON text (the fake upstream sends it verbatim). */
let answer = '';
const completion = (model: string, usage: boolean) => ({
  id: 'chatcmpl-upstream-1',
  object: 'chat.completion',
  created: 1_700_000_000,
  model,
  system_fingerprint: 'fp_test',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from upstream.' }, finish_reason: 'stop', logprobs: null }],
  ...(usage ? { usage: { prompt_tokens: 7, completion_tokens: 5, total_tokens: 12 } } : {}),
});

describe('answers from an OpenAI-compatible upstream', () => {
  let upstream: FastifyInstance;
  let gw: TestGateway;
  let escrowId: string;

  beforeAll(async () => {
    upstream = Fastify({ logger: false });
    upstream.post('/v1/chat/completions', (_req, reply) => reply.type('application/json').send(answer));
    await upstream.listen({ host: '127.0.0.1', port: 0 });
    const { port } = upstream.server.address() as { port: number };
    ({ gw, escrowId } = await startGatewayWithEscrow({ env: { NETWORK_UPSTREAM_URL: `http://127.0.0.1:${port}/v1` } }));
  });
  afterAll(async () => {
    await disposeTestGateway(gw);
    await upstream.close();
  });

  const chat = () => gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 20 } });
  const lastFinished = () => requestRecords(gw.store.readStream(`escrow-${escrowId}`)).filter((e) => e.type === 'InferenceFinished').at(-1)!.data as { usage: { totalTokens: number } };

  it('passes the upstream text on byte for byte when it names the requested model and reports usage', async () => {
    answer = JSON.stringify(completion(MODEL, true), null, 1); // unusual formatting shows it is not re-serialized
    const r = await chat();
    expect(r.status, r.text).toBe(200);
    expect(r.text).toBe(answer);
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    expect(r.headers.get('x-devshard-escrow-id')).toBe(escrowId);
    expect(lastFinished().usage.totalTokens).toBe(12);
  });

  it('answers with the requested model when the upstream names another, keeping every other field', async () => {
    answer = JSON.stringify(completion(`${MODEL}-2025-06-01`, true));
    const r = await chat();
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual({ ...completion(MODEL, true) });
  });

  it('adds counted usage when the upstream reports none, and bills it', async () => {
    answer = JSON.stringify(completion(MODEL, false));
    const r = await chat();
    expect(r.status, r.text).toBe(200);
    expect(r.json.usage).toMatchObject({ prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) });
    expect(r.json.usage.total_tokens).toBeGreaterThan(0);
    expect(lastFinished().usage.totalTokens).toBe(r.json.usage.total_tokens);
  });
});
