import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HostError, type ChatChunk } from '../../src/network/port.js';
import { registerSimulatedOpenAi } from '../../src/devnet/hosts/openai-server.js';
import { createUpstreamPort, type UpstreamPort } from '../../src/network/upstream.js';

let app: FastifyInstance;
let url: string;
let port: UpstreamPort;
let faults: ReturnType<typeof registerSimulatedOpenAi>['faults'];

beforeAll(async () => {
  app = Fastify({ logger: false });
  faults = registerSimulatedOpenAi(app, { prefix: '/v1', apiKey: 'sk-upstream-test', models: ['up-model'] }).faults;
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address() as { port: number };
  url = `http://127.0.0.1:${addr.port}/v1`;
  port = createUpstreamPort({ url, apiKey: 'sk-upstream-test', stallTimeoutMs: 300 });
});
afterAll(async () => {
  await port.close();
  await app.close();
});

const body = (extra: Record<string, unknown> = {}) => ({ model: 'up-model', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 30, ...extra });
const call = (p: UpstreamPort, b: Record<string, unknown>) =>
  p.chat({ escrowId: '1', nonce: 0, hostUrl: '', body: b, signer: { signProtocol: () => new Uint8Array(65) }, signal: new AbortController().signal });

describe('upstream mode (any OpenAI-compatible server)', () => {
  it('forwards a chat request with the Bearer key and returns the completion', async () => {
    const r = await call(port, body());
    expect(r.kind).toBe('completion');
    if (r.kind === 'completion') {
      expect(r.completion.object).toBe('chat.completion');
      expect(r.completion.usage.prompt_tokens).toBe(3 + 3 + 3); // 'hello there' = 11 chars -> 3 tokens
    }
  });

  it('streams, with usage taken from the usage chunk it asked for', async () => {
    const whole = await call(port, body());
    const r = await call(port, body({ stream: true }));
    if (r.kind !== 'stream' || whole.kind !== 'completion') throw new Error('unexpected result kinds');
    const chunks: ChatChunk[] = [];
    for await (const c of r.chunks) chunks.push(c);
    expect(r.usage()).toEqual(whole.completion.usage);
    expect(chunks.map((c) => (c.choices[0]?.delta.content as string | undefined) ?? '').join('')).toBe(whole.completion.choices[0]!.message.content);
  });

  it('a wrong key is HostError rejected 401, and the key is not in the message', async () => {
    const bad = createUpstreamPort({ url, apiKey: 'sk-wrong-key-123' });
    const err = (await call(bad, body()).catch((e: unknown) => e)) as HostError;
    await bad.close();
    expect(err).toBeInstanceOf(HostError);
    expect(err).toMatchObject({ kind: 'rejected', status: 401 });
    expect(err.message).not.toContain('sk-wrong-key-123');
  });

  it('an unknown model is rejected 404; a truncated stream is truncated, billing the delivered tokens', async () => {
    expect(await call(port, body({ model: 'Up-Model' })).catch((e: unknown) => e)).toMatchObject({ kind: 'rejected', status: 404 });
    faults.truncateAfterChunks = 3;
    const r = await call(port, body({ stream: true }));
    delete faults.truncateAfterChunks;
    if (r.kind !== 'stream') throw new Error('expected a stream');
    const err = await (async () => {
      for await (const _ of r.chunks) void _;
    })().catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'truncated', usageSoFar: { prompt_tokens: 9, completion_tokens: 2, total_tokens: 11 } });
  });
});
