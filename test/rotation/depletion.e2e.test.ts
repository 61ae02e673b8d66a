import { afterEach, describe, expect, it } from 'vitest';
import { checkDepletion } from '../../src/gateway/workers/rotation/depletion.js';
import { createEscrowViaApi, disposeTestGateway } from '../helpers/gateway.js';
import { enableRotation, MODEL, ofType, startRotationGateway, waitFor, type RotationGateway } from './helpers.js';

const chatOnce = (gw: RotationGateway) => gw.call('/v1/chat/completions', { key: 'client', body: { model: MODEL, messages: [{ role: 'user', content: 'spend a little' }], max_tokens: 8 } });

describe('depletion on a fast devnet', () => {
  let gw: RotationGateway | undefined;
  afterEach(async () => {
    await disposeTestGateway(gw);
    gw = undefined;
  });

  it('with rotation on: a balance exhausted mid-request is replaced by a new regular escrow and the old one settled once drained', async () => {
    // No periodic check of its own: while the request is in flight its reservation already puts the
    // usable balance under this threshold, so a periodic check landing then (a slow, loaded run)
    // would decide 'depleted' before the request's end decides 'exhausted'. The checks are run below.
    gw = await startRotationGateway({ env: { DEVNET_EPOCH_BLOCKS: '100000', GATEWAY_BALANCE_CHECK_INTERVAL_MS: '3600000' } });
    const g = gw;
    const old = await createEscrowViaApi(g, '1000000000');
    await enableRotation(g, { temp_count: 1, target_count: 1 });
    // A threshold just under the deposit: the first request's cost exhausts the escrow.
    g.ctx.depletionThreshold = 999_990_000n;
    expect((await chatOnce(g)).status).toBe(200);
    await waitFor('a replacement', () => ofType(g, 'EscrowCreated').some((e) => e.data.escrowId !== old), 10_000);
    g.ctx.depletionThreshold = 1_000_000n;
    const depleted = ofType(g, 'EscrowDepleted');
    expect(depleted).toHaveLength(1);
    expect(depleted[0]!.metadata.actor).toEqual({ kind: 'depletion-check' });
    const decided = ofType(g, 'DepletionReplacementDecided');
    expect(decided.map((e) => ({ escrowId: e.data.escrowId, reason: e.data.reason }))).toEqual([{ escrowId: old, reason: 'exhausted' }]);
    const replacement = ofType(g, 'EscrowCreated').find((e) => e.data.intentId === decided[0]!.data.intentId)!;
    expect(replacement.data.role).toBe('regular');
    await waitFor('the old escrow settled on chain', async () => (await g.ctx.chain.escrow(old))?.settled === true, 10_000);
    expect((await chatOnce(g)).status).toBe(200);
    expect(g.ctx.engine.escrow(replacement.data.escrowId)?.value).toBe('active');
    // Periodic checks now: the replaced escrow is not replaced again.
    await checkDepletion(g.ctx);
    await checkDepletion(g.ctx);
    expect(ofType(g, 'DepletionReplacementDecided')).toHaveLength(1);
  }, 30_000);

  it("the spec's threshold itself: usable balance below 1,000,000 is depleted at the next check, one at or above it keeps serving", async () => {
    // min_amount lowered so deposits near the threshold can exist; the gateway's threshold is untouched.
    gw = await startRotationGateway({ env: { DEVNET_EPOCH_BLOCKS: '100000', DEVNET_MIN_AMOUNT: '1000000' } });
    const g = gw;
    expect(g.ctx.depletionThreshold).toBe(1_000_000n);
    await g.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }] } });
    const low = await createEscrowViaApi(g, '1010000');
    expect((await chatOnce(g)).status).toBe(200);
    await waitFor('the low escrow depleted', () => g.ctx.projections.pool.escrow(low)?.value === 'depleted', 5_000);
    const c = g.ctx.engine.escrow(low)!.context;
    expect(BigInt(c.balance) - BigInt(c.reserved)).toBeLessThan(1_000_000n);
    expect(ofType(g, 'EscrowDepleted').map((e) => e.data.threshold)).toEqual(['1000000']);
    // A deposit whose usable balance stays above the threshold after a request is not touched.
    const high = await createEscrowViaApi(g, '2000000');
    expect((await chatOnce(g)).status).toBe(200);
    // Two checks, driven here rather than waited for (the second a fresh one, should a check be under way).
    await g.depletion.tick();
    await g.depletion.tick();
    const h = g.ctx.engine.escrow(high)!.context;
    expect(BigInt(h.balance) - BigInt(h.reserved)).toBeGreaterThanOrEqual(1_000_000n);
    expect(g.ctx.projections.pool.escrow(high)?.value).toBe('active');
    expect(ofType(g, 'EscrowDepleted')).toHaveLength(1);
  }, 30_000);

  it('with rotation off: the depleted escrow only stops taking chat, and that is logged', async () => {
    gw = await startRotationGateway({ env: { DEVNET_EPOCH_BLOCKS: '100000' } });
    const g = gw;
    const old = await createEscrowViaApi(g, '1000000000');
    await g.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }] } });
    g.ctx.depletionThreshold = 999_990_000n;
    expect((await chatOnce(g)).status).toBe(200);
    await waitFor('depleted', () => g.ctx.projections.pool.escrow(old)?.value === 'depleted', 5_000);
    await waitFor('the not-replaced log line', () => g.logs.some((l) => l.includes('escrow_depleted_not_replaced')), 10_000);
    // Two more checks, driven here: they neither replace it nor log it again.
    await g.depletion.tick();
    await g.depletion.tick();
    expect(ofType(g, 'DepletionReplacementDecided')).toEqual([]);
    expect(ofType(g, 'EscrowCreated')).toHaveLength(1);
    expect(g.logs.filter((l) => l.includes('escrow_depleted_not_replaced'))).toHaveLength(1);
    expect((await chatOnce(g)).status).toBe(503);
  }, 30_000);
});
