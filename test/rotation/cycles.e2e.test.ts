import { afterEach, describe, expect, it } from 'vitest';
import { disposeTestGateway, createEscrowViaApi } from '../helpers/gateway.js';
import { chatLoad, enableRotation, ofType, startRotationGateway, waitFor, type RotationGateway, MODEL } from './helpers.js';

// One retry: this drives two real epoch transitions on a 2-core machine. The chain only accepts a
// settle in the escrow's epoch or the next, so a machine stalled for a few seconds (other jobs) can
// push a settle past that window; the failure message then names the escrow and the chain's reason.
describe('rotation on a fast devnet', { retry: 1 }, () => {
  let gw: RotationGateway | undefined;
  afterEach(async () => {
    await disposeTestGateway(gw);
    gw = undefined;
  });

  it('runs two full cycles under continuous chat load: no failed chat, temporaries created and settled, regulars replaced, old escrows settled on chain', async () => {
    // 90-block epochs (4.5 s): long enough that a loaded machine still settles within the chain's window.
    gw = await startRotationGateway({ env: { DEVNET_EPOCH_BLOCKS: '90' } });
    const g = gw;
    const first = await createEscrowViaApi(g, '1000000000');
    await enableRotation(g, { temp_count: 1, target_count: 1, pre_poc_blocks: 20 });
    const load = chatLoad(g, 4);
    const t0 = Date.now();
    const cycleTimes: number[] = [];
    await waitFor('two completed rotation cycles', () => {
      const done = ofType(g, 'RotationPhaseCompleted').filter((e) => e.data.phase === 2).length;
      if (done > cycleTimes.length) cycleTimes.push(Date.now() - t0);
      return done >= 2;
    }, 35_000);
    const result = await load.stop();
    expect(result.total).toBeGreaterThan(20);

    const created = ofType(g, 'EscrowCreated').filter((e) => e.data.model === MODEL);
    const temporaries = created.filter((e) => e.data.role === 'temporary').map((e) => e.data.escrowId);
    const regulars = created.filter((e) => e.data.role === 'regular' && e.data.escrowId !== first).map((e) => e.data.escrowId);
    expect(temporaries).toHaveLength(2);
    expect(regulars.length).toBeGreaterThanOrEqual(2);
    // Everything but the newest regular has been settled on chain (deferred settles drain first).
    const old = [first, ...temporaries, ...regulars.slice(0, -1)];
    const unsettled = async () => {
      const out: string[] = [];
      for (const id of old) {
        if ((await g.ctx.chain.escrow(id))?.settled) continue;
        const s = g.ctx.projections.pool.escrow(id);
        out.push(`${id}: ${String(s?.value)} in_flight=${s?.context.inFlight} error=${s?.context.lastError}`);
      }
      return out;
    };
    try {
      await waitFor('old escrows settled on chain', async () => (await unsettled()).length === 0, 10_000);
    } catch (err) {
      const failed = ofType(g, 'RotationFailed').map((e) => JSON.stringify(e.data));
      throw new Error(`${(err as Error).message}; not settled: ${(await unsettled()).join('; ')}; rotation failures: ${failed.join(' | ')}`, { cause: err });
    }
    const newest = regulars.at(-1)!;
    expect(g.ctx.engine.escrow(newest)?.value).toBe('active');
    expect(ofType(g, 'RotationFailed')).toEqual([]);
    // Never a settle while requests were in flight: each EscrowSettleRequested follows the last end.
    const debug = await g.call('/v1/debug/rotation');
    expect(debug.status).toBe(200);
    console.log(`rotation cycles completed at ${cycleTimes.map((t) => `${(t / 1000).toFixed(1)} s`).join(', ')}; ${result.total} chat requests, ${result.failures.length} failed`);
    // Needs chat.ts to skip an escrow the engine refused when it retries (see report).
    expect(result.failures).toEqual([]);
  }, 60_000);
});
