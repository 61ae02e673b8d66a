/**
 * GATEWAY_MAX_INPUT_TOKENS_IN_FLIGHT on a real gateway: while a streamed chat holds its prompt
 * tokens, a request that would take the total above the limit gets 429 with an OpenAI-style body
 * and Retry-After; one that fits is served; alone, even a request above the limit is served.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countPromptTokens } from '../../src/network/tokens.js';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const LIMIT = 20;
const body = (content: string, extra: object = {}) => ({ model: MODEL, messages: [{ role: 'user', content }], max_tokens: 40, ...extra });
const small = body('hi');
const large = body('x'.repeat(60));

describe('GATEWAY_MAX_INPUT_TOKENS_IN_FLIGHT', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    // Streamed tokens 150 ms apart: a stream (5 to 8 tokens here) stays in flight for about a second.
    gw = await startTestGateway({ env: { GATEWAY_MAX_INPUT_TOKENS_IN_FLIGHT: String(LIMIT), DEVNET_TOKEN_DELAY_MS: '150' } });
    await createEscrowViaApi(gw);
  });
  afterAll(() => disposeTestGateway(gw));

  it('refuses what would exceed it while a stream is in flight: 429, OpenAI error body, Retry-After', async () => {
    const smallTokens = countPromptTokens(small);
    const largeTokens = countPromptTokens(large);
    expect(smallTokens * 2).toBeLessThanOrEqual(LIMIT);
    expect(smallTokens + largeTokens).toBeGreaterThan(LIMIT);
    expect(largeTokens).toBeGreaterThan(LIMIT);

    const stream = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...small, stream: true, max_tokens: 8 }),
    });
    expect(stream.status).toBe(200);
    const reader = stream.body!.getReader();
    await reader.read(); // admitted and streaming

    const refused = await gw.call('/v1/chat/completions', { body: large });
    expect(refused.status, refused.text).toBe(429);
    expect(refused.json).toEqual({
      error: { message: expect.stringContaining(`limit ${LIMIT}`), type: 'rate_limit_error', param: null, code: 'input_tokens_limit_exceeded' },
    });
    expect(refused.headers.get('retry-after')).toBe('1');
    // What still fits is served beside the stream.
    expect((await gw.call('/v1/chat/completions', { body: small })).status).toBe(200);
    const status = (await gw.call('/v1/status', { key: 'none' })).json;
    expect(status.limiter).toMatchObject({ max_input_tokens_in_flight: LIMIT, input_tokens_in_flight: smallTokens, rejected_total: 1 });

    while (!(await reader.read()).done);
    // Nothing in flight: the large request alone is admitted.
    const alone = await gw.call('/v1/chat/completions', { body: large });
    expect(alone.status, alone.text).toBe(200);
    expect((await gw.call('/v1/status', { key: 'none' })).json.limiter).toMatchObject({ input_tokens_in_flight: 0, rejected_total: 1 });
  });
});
