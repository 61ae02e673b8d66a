/**
 * The spec's nonce routing stop (about 19,800) with the real constant, through the whole stack: an
 * escrow serves nonces 1..19,799, is then recorded as routing-stopped and takes no new chat, and
 * another escrow keeps serving. A canned OpenAI-compatible upstream answers, so the ~20,000
 * requests take seconds (no per-request host signature).
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROUTING_STOP_NONCE } from '../../src/machines/index.js';
import { createEscrowViaApi, disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';

const ANSWER = JSON.stringify({
  id: 'chatcmpl-stop',
  object: 'chat.completion',
  created: 1_700_000_000,
  model: MODEL,
  choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop', logprobs: null }],
  usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
});

describe('nonce routing stop (19,800) through the real stack', () => {
  let upstream: FastifyInstance;
  let gw: TestGateway;
  let first: string;
  const dispatcher = new Agent({ connections: 32 });

  // An epoch that outlasts the test (50 ms blocks): 19,800 requests on a busy machine can take
  // longer than two 30 s epochs, and an escrow past its settle window is no longer routed to.
  beforeAll(async () => {
    upstream = Fastify({ logger: false });
    upstream.post('/v1/chat/completions', (_req, reply) => reply.type('application/json').send(ANSWER));
    await upstream.listen({ host: '127.0.0.1', port: 0 });
    const { port } = upstream.server.address() as { port: number };
    ({ gw, escrowId: first } = await startGatewayWithEscrow({ env: { NETWORK_UPSTREAM_URL: `http://127.0.0.1:${port}/v1`, LOG_LEVEL: 'warn', DEVNET_EPOCH_BLOCKS: '1000000' } }));
  });
  afterAll(async () => {
    await disposeTestGateway(gw);
    await upstream.close();
    await dispatcher.close();
  });

  const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
  // undici's request API rather than fetch: the client side of 20,000 requests stays cheap.
  const chat = async () => {
    const res = await dispatcher.request({
      origin: gw.url,
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' },
      body,
    });
    const header = (name: string) => String(res.headers[name] ?? '');
    return { status: res.statusCode, escrow: header('x-devshard-escrow-id'), nonce: Number(header('x-devshard-nonce')), body: await res.body.text() };
  };

  it('serves nonces 1..19,799 on one escrow, then stops routing to it; a second escrow keeps serving', async () => {
    expect(ROUTING_STOP_NONCE).toBe(19_800);
    const last = ROUTING_STOP_NONCE - 1;
    let served = 0;
    let maxNonce = 0;
    const worker = async () => {
      while (served < last) {
        served++;
        const r = await chat();
        expect(r.status, r.body).toBe(200);
        expect(r.escrow).toBe(first);
        maxNonce = Math.max(maxNonce, r.nonce);
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    await gw.ctx.engine.idle();
    expect(maxNonce).toBe(last);
    expect(gw.ctx.engine.escrow(first)?.value).toBe('routingStopped');
    const stopped = gw.store.readStream(`escrow-${first}`).filter((e) => e.type === 'EscrowRoutingStopped');
    expect(stopped.map((e) => e.data)).toEqual([{ nonce: last, routingStop: ROUTING_STOP_NONCE }]);

    // Nothing routable is left for the model: a clear 503, no nonce past the stop.
    const refused = await chat();
    expect(refused.status).toBe(503);
    const error = JSON.parse(refused.body).error;
    // The 503 names the nonce limit and the remedy, not a balance problem.
    expect(error.code).toBe('escrow_nonce_limit');
    expect(error.message).toContain(`nonce routing stop (${ROUTING_STOP_NONCE}`);
    expect(error.message).toMatch(/Create and register a new escrow.*enable escrow rotation/);
    expect(gw.ctx.engine.escrow(first)?.context.nonce).toBe(last);

    // Another escrow of the model serves on from nonce 1.
    const second = await createEscrowViaApi(gw);
    const next = await chat();
    expect(next.status, next.body).toBe(200);
    expect(next.escrow).toBe(second);
    expect(next.nonce).toBe(1);
  }, 120_000);
});
