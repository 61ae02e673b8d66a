import { afterEach, describe, expect, it } from 'vitest';
import { rotationDebugDocument } from '../../src/gateway/workers/rotation/index.js';
import { createEscrowViaApi, disposeTestGateway } from '../helpers/gateway.js';
import { enableRotation, MODEL, ofType, startRotationGateway, waitFor, type RotationGateway } from './helpers.js';

const rotationEvents = (gw: RotationGateway) => [...gw.store.readStream(`rotation-${MODEL}`)].length;

describe('turning rotation on and off on a running gateway', () => {
  let gw: RotationGateway | undefined;
  afterEach(async () => {
    await disposeTestGateway(gw);
    gw = undefined;
  });

  it('enabling starts the task, disabling stops it; the debug document reports chain timing and latest results', async () => {
    gw = await startRotationGateway();
    const g = gw;
    await createEscrowViaApi(g, '1000000000');
    await enableRotation(g, { temp_count: 1, target_count: 1, pre_poc_blocks: 30 });
    await waitFor('phase 1 of epoch 0', () => ofType(g, 'RotationPhaseCompleted').length >= 1, 15_000);

    const doc = await rotationDebugDocument(g.ctx);
    expect(doc.enabled).toBe(true);
    expect(doc.chain.block_height).toBeGreaterThan(0);
    expect(doc.chain).toMatchObject({ epoch_index: expect.any(Number), poc_active: expect.any(Boolean), blocks_until_next_rotation: expect.any(Number) });
    expect(doc.settings.models[0]).toMatchObject({ model_id: MODEL, temp_count: 1 });
    expect(doc.history.length).toBeGreaterThan(2);
    expect(doc.history.at(-1)).toMatchObject({ model: MODEL, stage: 'waitingPoc', created: 1 });
    expect(doc.latest[MODEL]).toMatchObject({ stage: 'waitingPoc', counts: { created: 1 }, errors: [] });
    // Over HTTP: devshardctl's `latest` array (newest status per model and step first), ours as latest_by_model.
    const served = (await g.call('/v1/debug/rotation')).json;
    expect(served.enabled).toBe(true);
    expect(served.latest_by_model[MODEL]).toMatchObject({ stage: 'waitingPoc', counts: { created: 1 } });
    expect(served.latest[0]).toMatchObject({ model_id: MODEL, stage: 'waitingPoc', created_count: 1, completed: true, updated_at: expect.any(String) });
    expect(served.chain.blocks_to_epoch_switch).toBe(served.chain.blocks_until_boundary);

    await enableRotation(g, { enabled: false, temp_count: 1, target_count: 1, pre_poc_blocks: 30 });
    const before = rotationEvents(g);
    // Past the boundary and its PoC window: a running task would have started phase 2.
    const boundary = (await g.ctx.chain.epoch()).nextBoundaryHeight;
    await waitFor('the end of the PoC window', async () => (await g.ctx.chain.height()) > boundary + 8, 10_000);
    // Ticks driven here rather than waited for (the second a fresh one, should a tick be under way).
    await g.rotation.tick();
    await g.rotation.tick();
    expect(rotationEvents(g)).toBe(before);
    expect((await rotationDebugDocument(g.ctx)).enabled).toBe(false);

    // Enabled again: phase 2 resumes from the log.
    await enableRotation(g, { temp_count: 1, target_count: 1, pre_poc_blocks: 30 });
    await waitFor('phase 2 completed', () => ofType(g, 'RotationPhaseCompleted').some((e) => e.data.phase === 2), 10_000);
  }, 30_000);

  it('the debug document falls back to nulls when the chain does not answer in time', async () => {
    gw = await startRotationGateway({ env: { DEVNET_EPOCH_BLOCKS: '100000' } });
    const ctx = { ...gw.ctx, chain: { ...gw.ctx.chain, epoch: () => new Promise<never>(() => undefined) } } as typeof gw.ctx;
    const doc = await rotationDebugDocument(ctx, 50);
    expect(doc.chain).toMatchObject({ block_height: null, epoch_index: null, blocks_until_next_rotation: null, poc_active: null, next_boundary_height: null });
    expect(doc.chain.error).toMatch(/timeout/);
    expect(doc.enabled).toBe(false);
  }, 20_000);
});
