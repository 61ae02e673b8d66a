/**
 * Issue 39 (1), end to end over the devnet: stream requests from clients that never read count as
 * active in GET /v1/status (limiter and active_requests) while their answers are under way, a request
 * beyond GATEWAY_MAX_CONCURRENT_REQUESTS gets 429, and the slots come back. (The simulated hosts'
 * answers are smaller than a loopback socket's OS buffers, so the cut of a too-slow client is shown
 * in test/http/slow-clients.test.ts, with a host stand-in that streams megabytes.)
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planCompletion } from '../../src/devnet/hosts/completion-plan.js';
import { disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

async function until(what: string, cond: () => boolean | Promise<boolean>, boundMs = 10_000): Promise<void> {
  const deadline = Date.now() + boundMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

// A prompt the simulated host answers at length (>= 40 tokens, 50 ms apart): the streams are
// still under way while the test looks at /v1/status.
const messages = (() => {
  for (let i = 0; ; i++) {
    const m = [{ role: 'user', content: `tell me a story ${i}` }];
    if (planCompletion({ model: MODEL, messages: m }).pieces.length >= 40) return m;
  }
})();
const body = JSON.stringify({ model: MODEL, stream: true, max_tokens: 4096, messages });

describe('stream clients that never read, over the devnet', () => {
  let gw: TestGateway | undefined;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    gw = await startTestGateway({ quickStartEscrow: true, env: { GATEWAY_MAX_CONCURRENT_REQUESTS: '2', DEVNET_TOKEN_DELAY_MS: '50', GATEWAY_SLOW_CLIENT_TIMEOUT_MS: '1000' } });
    // One client key, as in the report: client keys may use the model.
    const set = await gw.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }] } });
    if (set.status !== 200) throw new Error(`settings: ${set.status} ${set.text}`);
  }, 60_000);
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await disposeTestGateway(gw);
  });

  it('count as active in /v1/status, a request beyond the limit gets 429, and the slots come back', async () => {
    const g = gw!;
    const { port } = new URL(g.url);
    for (let i = 0; i < 2; i++) {
      const s = connect(Number(port), '127.0.0.1');
      s.pause();
      s.on('error', () => {});
      s.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${g.keys.apiKey}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      sockets.push(s);
    }
    const status = async () => (await g.call('/v1/status', { key: 'none' })).json as { active_requests: number; limiter: { active_requests: number } };
    await until('both streams counted by the limiter', async () => (await status()).limiter.active_requests === 2);
    expect((await status()).active_requests).toBeGreaterThanOrEqual(2);

    const refused = await g.call('/v1/chat/completions', { key: 'client', body: JSON.parse(body) });
    expect(refused.status).toBe(429);
    expect(refused.json.error.code).toBe('concurrency_limit_exceeded');

    // The answers are small: once the hosts finish, the OS socket buffers take them and the slots come back.
    await until('the slots to come back', async () => (await status()).limiter.active_requests === 0);
    // (Not streamed: the simulated hosts delay only streamed tokens.)
    const ok = await g.call('/v1/chat/completions', { key: 'client', body: { ...JSON.parse(body), stream: false } });
    expect(ok.status).toBe(200);
    expect(ok.json.choices[0].message.content.length).toBeGreaterThan(0);
  }, 30_000);
});
