/**
 * Issue 38 (1): an escrow past its settle window stays routable. Once the chain's epoch is the
 * escrow's + 2 the chain prunes it (k/devshard_pruning.go) and its hosts answer "escrow N not
 * found"; chats sent there were 502s. Known from the epoch the prune watch reads, so no chain round
 * trip on the request path: such an escrow is not routed to, is shown expired in /v1/status and the
 * admin views, and with nothing else to route to a chat gets a 503 that says why and what to do.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const EPOCH = 1000;
const chat = { model: MODEL, messages: [{ role: 'user', content: 'still there?' }], max_tokens: 8 };

describe('an escrow past its settle window', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ env: { DEVSHARD_HOST_PROTOCOL: 'devshard', DEVNET_EPOCH_BLOCKS: String(EPOCH), DEVNET_POC_BLOCKS: '10' } });
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  it('is not routed to once the chain prunes it: expired in status, 503 naming the remedy, and a new escrow serves', async () => {
    const old = await createEscrowViaApi(gw);
    const epoch = (await gw.call(`/v1/admin/devshards/${old}`)).json.epoch_index as number;
    expect((await gw.call('/v1/chat/completions', { body: chat })).status).toBe(200);

    // The chain moves two epochs on: the escrow is pruned (its hosts no longer know it).
    gw.devnet!.chain.jumpTo((epoch + 2) * EPOCH + 1);
    expect(await gw.ctx.chain.escrow(old)).toBeNull();
    await gw.tasks.pruneWatch.tick();

    const status = await gw.call('/v1/status');
    const d = (status.json.devshards as Record<string, unknown>[]).find((x) => x.id === old)!;
    expect(d).toMatchObject({ expired: true, routable: false, requests_blocked: true, block_reason: 'settle_window_closed', blocks_until_prune: 0 });
    expect((await gw.call(`/v1/admin/devshards/${old}`)).json).toMatchObject({ expired: true, routable: false });

    for (let i = 0; i < 3; i++) {
      const r = await gw.call('/v1/chat/completions', { body: chat });
      expect(r.status, r.text).toBe(503);
      expect(r.headers.get('retry-after')).not.toBeNull();
      expect(r.json.error.code).toBe('escrow_settle_window_closed');
      expect(r.json.error.message).toContain(`escrow ${old} (epoch ${epoch})`);
      expect(r.json.error.message).toContain('POST /v1/admin/escrows');
      expect(r.json.error.message).toContain('escrow_rotation');
    }
    // Nothing was sent to the hosts for it: its nonce did not move past the one chat.
    expect(gw.ctx.engine.escrow(old)!.context.nonce).toBe(1);

    // A new escrow (of the current epoch) takes the traffic; the expired one stays out.
    const fresh = await createEscrowViaApi(gw);
    const r = await gw.call('/v1/chat/completions', { body: chat });
    expect(r.status, r.text).toBe(200);
    expect(r.json.id).toBe(`devshard-${fresh}-1`);
  }, 60_000);
});
