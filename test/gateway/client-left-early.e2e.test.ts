/**
 * A client that leaves before its stream opens (while the request is routed, its nonce taken, the
 * host's answer on its way) gives its concurrency slot and its escrow's in-flight count back. Before,
 * the stream writer waited for a 'close' the response had already emitted, and the slot was held for
 * the life of the process: one leaked slot per early disconnect, enough of them refuse every request.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';

describe('clients that leave before their stream opens', () => {
  let gw: TestGateway;
  let escrowId: string;
  beforeAll(async () => {
    ({ gw, escrowId } = await startGatewayWithEscrow());
  });
  afterAll(() => disposeTestGateway(gw));

  it('leaving at each moment of the first 30 ms, one after another: every slot and in-flight count comes back, and the gateway serves on', async () => {
    // Before the fix nearly every one of these leaked (the time between routing and the stream
    // opening is wide: the session, the nonce, the host's headers); whichever moment each one hits
    // on this machine, none may keep its slot.
    let left = 0;
    for (let i = 0; i < 30; i++) {
      const c = new AbortController();
      setTimeout(() => c.abort(), i);
      const r = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `leaving ${i}` }], max_tokens: 12, stream: true }),
        signal: c.signal,
      })
        .then((x) => x.text())
        .catch(() => 'left'); // left before the answer, or while reading it
      if (r === 'left') left++;
    }
    expect(left).toBeGreaterThan(0);
    await expect.poll(() => gw.ctx.limiter.counts().active_requests, { timeout: 10_000, message: 'slots given back' }).toBe(0);
    await expect.poll(() => gw.ctx.engine.escrow(escrowId)!.context.inFlight, { timeout: 10_000, message: 'requests ended on the escrow' }).toBe(0);
    const r = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'after' }], max_tokens: 4 } });
    expect(r.status, r.text).toBe(200);
  });
});
