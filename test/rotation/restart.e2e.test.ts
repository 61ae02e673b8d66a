import { afterEach, describe, expect, it } from 'vitest';
import { runModel } from '../../src/gateway/workers/rotation/index.js';
import { readEpoch } from '../../src/gateway/workers/rotation/steps.js';
import { createEscrowViaApi, disposeTestGateway } from '../helpers/gateway.js';
import { enableRotation, MODEL, ofType, startRotationGateway, waitFor, type RotationGateway } from './helpers.js';

describe('rotation across a restart', () => {
  let gw: RotationGateway | undefined;
  afterEach(async () => {
    await disposeTestGateway(gw);
    gw = undefined;
  });

  it('killed after deciding two temporaries and creating one, the restarted gateway creates only the missing one and finishes the cycle', async () => {
    // Timer ticks only on enable and after the restart; the first run is driven by hand.
    gw = await startRotationGateway({ env: { GATEWAY_ROTATION_INTERVAL_MS: '3600000' } });
    let g = gw;
    await createEscrowViaApi(g, '1000000000');
    await waitFor('a height before the rotation window', async () => (await g.ctx.chain.epoch()).blocksUntilBoundary > 30, 10_000);
    await enableRotation(g, { temp_count: 2, target_count: 1, pre_poc_blocks: 25 });
    const settings = g.ctx.projections.settings.effective().escrow_rotation;
    await waitFor('the rotation window', async () => (await g.ctx.chain.epoch()).blocksUntilBoundary <= 25, 10_000);
    let n = 0;
    const steps = await runModel(g.ctx, settings.models[0]!, settings.pre_poc_blocks, await readEpoch(g.ctx, 2000), () => n++ >= 3);
    expect(steps.map((s) => s.kind)).toEqual(['start_phase', 'decide_creates', 'create']);
    const decided = ofType(g, 'RotationCreateDecided').flatMap((e) => e.data.intentIds);
    expect(decided).toHaveLength(2);
    expect(ofType(g, 'EscrowCreated').filter((e) => e.data.role === 'temporary')).toHaveLength(1);

    // "Kill" and restart on the same storage (log and devnet state).
    gw = g = await g.restart();
    g.rotation.reconfigure();
    await g.rotation.tick();
    await waitFor('phase 1 completed', () => ofType(g, 'RotationPhaseCompleted').some((e) => e.data.phase === 1), 10_000);

    const requested = ofType(g, 'EscrowCreateRequested').filter((e) => e.data.role === 'temporary');
    expect(requested.map((e) => e.data.intentId).sort()).toEqual([...decided].sort());
    const created = ofType(g, 'EscrowCreated').filter((e) => e.data.role === 'temporary');
    expect(created).toHaveLength(2);
    expect(ofType(g, 'RotationCreateDecided').filter((e) => e.data.role === 'temporary')).toHaveLength(1);
    // The chain holds exactly the first escrow and the two temporaries.
    for (const e of created) expect((await g.ctx.chain.escrow(e.data.escrowId))?.modelId).toBe(MODEL);
    const ids = ofType(g, 'EscrowCreated').map((e) => Number(e.data.escrowId));
    expect(await g.ctx.chain.escrow(String(Math.max(...ids) + 1))).toBeNull();
  }, 30_000);
});
