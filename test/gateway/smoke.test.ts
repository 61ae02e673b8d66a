import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

describe('gateway smoke: chat through a registered escrow', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  });
  afterAll(() => disposeTestGateway(gw));

  it('serves a chat completion and advances the escrow nonce', async () => {
    const id = await createEscrowViaApi(gw);
    const r = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 } });
    expect(r.status).toBe(200);
    expect(r.json.object).toBe('chat.completion');
    expect(r.json.usage.total_tokens).toBeGreaterThan(0);
    const d = await gw.call(`/v1/admin/devshards/${id}`);
    expect(d.json.nonce).toBe(1);
    expect(BigInt(d.json.spent)).toBe(BigInt(r.json.usage.total_tokens) * 1000n);
  });
});
