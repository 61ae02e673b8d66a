/**
 * Settle retries through the real stack (HTTP gateway, SQLite log, chain client, devnet over
 * loopback with fault hooks): a settle that fails while the node is down is retried with a growing
 * backoff and settles once the node is back; a chain refusal is not retried; a retry whose settle
 * window closes is given up and said so. The rotation is driven by hand up to its decision to
 * settle, so the fault lands between that decision and the settle.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { rotationStream } from '../../src/events/catalog.js';
import { runModel } from '../../src/gateway/workers/rotation/index.js';
import { SETTLE_RETRY_MAX_BLOCKS } from '../../src/gateway/workers/rotation/settle-retry.js';
import { readEpoch } from '../../src/gateway/workers/rotation/steps.js';
import { foldRotation, settleRetriesOf, stateName } from '../../src/machines/index.js';
import { settleTxsOnChain, streamTypes } from '../faults/helpers.js';
import { createEscrowViaApi } from '../helpers/gateway.js';
import { disposeFaultyGateway, enableRotation, expectBackoff, expectCheckpointVerified, expectNeverSent, expectRefusedOnce, explainText, marked, MODEL, ofType, startRotationGateway, tickFor, tickUntilSettled, waitFor, type RotationGateway } from './helpers.js';

/** Longer epochs than the other rotation tests: the regular's window (its epoch and the next) must outlast the retries. */
const EPOCH = 200;

const settleFailures = (g: RotationGateway, escrowId: string) => ofType(g, 'RotationFailed').filter((e) => e.data.step === 'settle' && e.data.escrowId === escrowId);

describe('rotation settle retries on a devnet with faults', () => {
  let gw: RotationGateway | undefined;
  afterEach(async () => {
    await disposeFaultyGateway(gw);
    gw = undefined;
  });

  /** A regular escrow of epoch 0 and phase 1 run by hand up to the decision to settle it. */
  async function settleDecided(): Promise<{ g: RotationGateway; first: string }> {
    // The timer ticks only on enable; the test ticks by hand.
    gw = await startRotationGateway({ env: { GATEWAY_ROTATION_INTERVAL_MS: '3600000', DEVNET_EPOCH_BLOCKS: String(EPOCH) } });
    const g = gw;
    const first = await createEscrowViaApi(g, '1000000000');
    await enableRotation(g, { temp_count: 1, target_count: 1, pre_poc_blocks: 40 });
    await g.rotation.tick(); // far from the boundary: waits
    expect(ofType(g, 'RotationPhaseStarted')).toEqual([]);
    const epoch = await readEpoch(g.ctx, 2000);
    expect(epoch.epochIndex).toBe(0);
    g.devnet!.chain.jumpTo(epoch.nextBoundaryHeight - 35); // into the rotation window (40 blocks before the boundary)
    const settings = g.ctx.projections.settings.effective().escrow_rotation;
    const stage = () => stateName(g.ctx.projections.rotation.rotation(MODEL).value);
    const steps = await runModel(g.ctx, settings.models[0]!, settings.pre_poc_blocks, await readEpoch(g.ctx, 2000), () => stage() === 'phase1.settlingRegulars');
    expect(steps.map((s) => s.kind)).toEqual(['start_phase', 'decide_creates', 'create', 'decide_settles']);
    expect(ofType(g, 'RotationSettleDecided').flatMap((e) => e.data.escrowIds)).toEqual([first]);
    expect(g.ctx.engine.escrow(first)?.context.epoch).toBe(0);
    return { g, first };
  }

  it('node down at the settle: retried with a growing backoff, settled once the node is back, one settle tx; replay gives the same rotation state', async () => {
    const { g, first } = await settleDecided();
    const faults = g.devnet!.chain.faults;
    faults.rpcDown = true;
    try {
      await waitFor('three failed attempts', async () => {
        await g.rotation.tick();
        return settleFailures(g, first).length >= 3;
      }, 20_000, 20);
      const debug = await g.call('/v1/debug/rotation');
      expect(debug.json.latest_by_model[MODEL].settle_retries).toEqual([{ escrow_id: first, failed_attempts: 3, retry_at_height: settleFailures(g, first)[2]!.data.retryAtHeight }]);
      expect(g.ctx.engine.escrow(first)?.value).toBe('finalized');
    } finally {
      faults.rpcDown = false;
    }
    await tickUntilSettled(g, first, g.rotation.tick);

    // What the operator sees: settled on chain and in the gateway, by exactly one settle tx.
    expect((await g.ctx.chain.escrow(first))?.settled).toBe(true);
    expect(settleTxsOnChain(g.devnet!, first)).toBe(1);
    const status = await g.call(`/v1/admin/devshards/${first}`);
    expect(status.status).toBe(200);
    expect(status.json.state).toBe('settled');
    // The failed attempts never got as far as signing: one intent, one outcome.
    expect(streamTypes(g, first).filter((t) => t === 'EscrowSettleRequested')).toHaveLength(1);
    expect(streamTypes(g, first).filter((t) => t === 'EscrowSettled')).toHaveLength(1);

    // Every failed attempt is in the log, each one at or after the height the previous one set.
    const failures = settleFailures(g, first).map((e) => e.data);
    expect(failures).toHaveLength(3);
    for (const f of failures) expect(f).toMatchObject({ step: 'settle', role: 'regular', escrowId: first, suppress: false, error: { kind: 'unreachable' } });
    expectBackoff(failures.map((f) => ({ ...f, height: f.chain.height })));
    const settled = g.store.readStream(`escrow-${first}`).find((r) => r.type === 'EscrowSettled')!;
    expect((settled.data as { height: number }).height).toBeGreaterThan(failures[2]!.retryAtHeight!);
    expect(marked(g, 'escrow_rotation_settle_retry_scheduled', first).map((l) => l.attempt)).toEqual([1, 2, 3]);
    expect(marked(g, 'escrow_rotation_settled', first)).toEqual([expect.objectContaining({ attempt: 4, status: 'settled' })]);
    expect(explainText(g)).toContain(`step settle of escrow ${first} attempt 3 (regular): no answer from the chain (unreachable: chain REST answered 503`);
    expect(explainText(g)).toContain('transient, settled on a later attempt');

    // Replay: the rotation stream folds to the live state; the projections checkpoint equals a rebuild.
    const live = g.ctx.projections.rotation.rotation(MODEL);
    const replayed = foldRotation(MODEL, g.store.readStream(rotationStream(MODEL)));
    expect(replayed.value).toEqual(live.value);
    expect(replayed.context).toEqual(live.context);
    expect(settleRetriesOf(replayed.context)[first]).toEqual({ attempt: 3, retryAtHeight: failures[2]!.retryAtHeight });
    await expectCheckpointVerified(g);
  }, 60_000);

  it('a retry scheduled before a restart is continued by the restarted gateway from the log (attempt 2) and settles', async () => {
    const decided = await settleDecided();
    const first = decided.first;
    let g = decided.g;
    g.devnet!.chain.faults.rpcDown = true;
    await g.rotation.tick();
    expect(settleFailures(g, first).map((e) => e.data)).toEqual([expect.objectContaining({ attempt: 1, retryAtHeight: expect.any(Number) })]);
    // Same storage (log and devnet state); the restarted node answers again.
    gw = g = await g.restart();
    g.rotation.reconfigure();
    await tickUntilSettled(g, first, g.rotation.tick);
    expect(marked(g, 'escrow_rotation_settled', first)).toEqual([expect.objectContaining({ attempt: 2 })]);
    expect(settleFailures(g, first)).toHaveLength(1);
    expect(settleTxsOnChain(g.devnet!, first)).toBe(1);
    expect((await g.ctx.chain.escrow(first))?.settled).toBe(true);
    expect((await g.call(`/v1/admin/devshards/${first}`)).json.state).toBe('settled');
  }, 60_000);

  it('a chain refusal (wrong_epoch: the window closed before the settle) is recorded once and not retried', async () => {
    const { g, first } = await settleDecided();
    g.devnet!.chain.jumpTo(2 * EPOCH + 20); // epoch 2: the regular's window (epochs 0 and 1) is over
    await g.rotation.tick();
    await tickFor(g, SETTLE_RETRY_MAX_BLOCKS + 8, g.rotation.tick);

    // Pruned before it was finalized: no host signs a settlement of it, it only stops taking chat.
    await expectRefusedOnce(g, first, settleFailures(g, first).map((e) => e.data), 'deactivated');
    // Pruned by the chain: an operator cannot turn it back on.
    const again = await g.call(`/v1/admin/devshards/${first}/activate`, { method: 'POST' });
    expect(again.status, again.text).toBe(409);
    expect(again.json.error.code).toBe('escrow_pruned');

    expect(marked(g, 'escrow_rotation_settle_retry_scheduled', first)).toEqual([]);
    expect(marked(g, 'escrow_rotation_settle_failed', first)).toEqual([expect.objectContaining({ retried: false, note: expect.stringContaining('settle window of this escrow has closed') })]);
    const text = explainText(g);
    expect(text).toContain(`FAILED settle of escrow ${first} (attempt 1)`);
    expect(text).toContain('its settle window has closed, so the unused deposit can no longer be settled on chain; not retried');
    expect((await g.call('/v1/debug/rotation')).json.latest_by_model[MODEL].settle_retries).toEqual([]);
  }, 60_000);

  it('node down until the settle window closed: the retry is given up without a tx, recorded and explained', async () => {
    const { g, first } = await settleDecided();
    const faults = g.devnet!.chain.faults;
    faults.rpcDown = true;
    try {
      await g.rotation.tick();
      expect(settleFailures(g, first).map((e) => e.data.retryAtHeight !== undefined)).toEqual([true]);
      g.devnet!.chain.jumpTo(2 * EPOCH + 20);
    } finally {
      faults.rpcDown = false;
    }
    await g.rotation.tick();
    await tickFor(g, SETTLE_RETRY_MAX_BLOCKS + 8, g.rotation.tick);

    const failures = settleFailures(g, first).map((e) => e.data);
    expect(failures).toHaveLength(2);
    expect(failures[1]).toMatchObject({ windowClosed: true, error: { kind: 'wrong_epoch', message: expect.stringContaining(`settle window closed: escrow ${first} belongs to epoch 0`) } });
    await expectNeverSent(g, first);
    expect(marked(g, 'escrow_rotation_settle_window_closed', first)).toEqual([expect.objectContaining({ escrow_epoch: 0, attempts: 1 })]);

    const debug = (await g.call('/v1/debug/rotation')).json;
    expect(debug.latest_by_model[MODEL].settle_retries).toEqual([]);
    expect(debug.history.some((e: { last_error: { message: string } | null }) => e.last_error?.message.startsWith(`settle window closed: escrow ${first}`))).toBe(true);
    expect(debug.latest_by_model[MODEL].errors.some((e: { error: { message: string } }) => e.error.message.startsWith(`settle window closed: escrow ${first}`))).toBe(true);
    expect(explainText(g)).toContain(`GAVE UP settle of escrow ${first}`);
  }, 60_000);
});
