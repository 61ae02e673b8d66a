/**
 * A settle the depletion check sends itself (nothing in flight, so not deferred) whose tx was lost:
 * the node goes down the moment the tx is recorded, so the attempt answers `settling` (outcome
 * unknown). Once the node is back another client of the key takes the account sequence the tx
 * carried, so the reconciler's re-send is refused (bad_sequence, transient). The reconciler records
 * that refusal as the attempt would have (DepletionReplacementFailed, step 'settle', with its retry),
 * so the depletion check's own retries settle it, or give it up once the window closed; the same
 * for a rotation settle lost after its phase completed (RotationFailed, retried by the rotation).
 * Real stack: HTTP gateway, SQLite log, chain client, devnet over loopback; timers off.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { escrowStream, rotationStream } from '../../src/events/catalog.js';
import { reconcileIntents } from '../../src/gateway/workers/reconcile.js';
import { runModel } from '../../src/gateway/workers/rotation/index.js';
import { readEpoch } from '../../src/gateway/workers/rotation/steps.js';
import { SETTLE_RETRY_MAX_BLOCKS } from '../../src/gateway/workers/rotation/settle-retry.js';
import { foldEscrow, foldRotation, settleRetriesOf, stateName } from '../../src/machines/index.js';
import { settleTxsOnChain } from '../faults/helpers.js';
import { createEscrowViaApi } from '../helpers/gateway.js';
import { depletionTickAboveDeposit, disposeFaultyGateway, depletionSettleFailures, enableRotation, expectBackoff, expectCheckpointVerified, expectPruned, marked, MODEL, ofType, settleRequests, startRotationGateway, tickFor, tickUntilSettled, staleOnResend, type RotationGateway } from './helpers.js';
import { expectedRefund } from '../helpers/settlement.js';

const EPOCH = 200;

const settleFailures = depletionSettleFailures;

describe("a depletion replacement's direct settle of unknown outcome, refused when the reconciler sends it again", () => {
  let gw: RotationGateway | undefined;
  afterEach(async () => {
    await disposeFaultyGateway(gw);
    gw = undefined;
  });

  /** The depletion check replaces the escrow and settles it directly; its tx is lost, then its sequence is taken. */
  async function lostThenRefused(): Promise<{ g: RotationGateway; id: string; lost: { txHash: string } }> {
    gw = await startRotationGateway({
      env: { GATEWAY_ROTATION_INTERVAL_MS: '3600000', GATEWAY_BALANCE_CHECK_INTERVAL_MS: '3600000', GATEWAY_RECONCILE_INTERVAL_MS: '3600000', DEVNET_EPOCH_BLOCKS: String(EPOCH) },
    });
    const g = gw;
    const id = await createEscrowViaApi(g, '1000000000');
    expect(g.ctx.engine.escrow(id)?.context.epoch).toBe(0);
    await enableRotation(g, { temp_count: 1, target_count: 1, pre_poc_blocks: 20 });
    const sub = g.store.subscribe(g.store.lastPosition()).subscribe((r) => {
      if (r.type === 'EscrowSettleRequested') g.devnet!.chain.faults.rpcDown = true;
    });
    try {
      await depletionTickAboveDeposit(g);
    } finally {
      sub.unsubscribe();
      g.devnet!.chain.faults.rpcDown = false;
    }
    expect(ofType(g, 'DepletionReplacementDecided').map((e) => e.data.escrowId)).toEqual([id]);
    expect(g.ctx.engine.escrow(id)?.value).toBe('settling');
    expect(marked(g, 'escrow_depletion_settle_pending', id)).toHaveLength(1);
    const [lost] = settleRequests(g, id);
    // The intent names the depletion check's attempt (and the replacement's reason) for the reconciler.
    expect(lost!.data).toMatchObject({ origin: 'depletion', retriedBy: 'depletion', reason: 'depleted', attempt: 1, height: expect.any(Number) });
    staleOnResend(g);
    return { g, id, lost: lost!.data };
  }

  it('the reconciler records the refusal with its retry; the depletion check retries it and it settles with the exact refund', async () => {
    const { g, id, lost } = await lostThenRefused();
    expect(await reconcileIntents(g.ctx)).toMatchObject({ settles: [{ escrowId: id, result: 'failed' }] });

    const [failure] = settleFailures(g, id);
    expect(failure!.metadata.actor).toEqual({ kind: 'reconciler' });
    expect(failure!.data).toMatchObject({ reason: 'depleted', suppress: false, attempt: 1, retryAtHeight: expect.any(Number), error: { kind: 'bad_sequence' } });
    expectBackoff([{ attempt: 1, height: settleRequests(g, id)[0]!.data.height!, retryAtHeight: failure!.data.retryAtHeight }]);
    expect(g.ctx.engine.escrow(id)?.value).toBe('finalized');
    expect((await g.call('/v1/debug/rotation')).json.latest_by_model[MODEL].depletion_settle_retries).toEqual([{ escrow_id: id, failed_attempts: 1, retry_at_height: failure!.data.retryAtHeight }]);
    expect(marked(g, 'escrow_depletion_settle_retry_scheduled', id)).toEqual([expect.objectContaining({ component: 'reconcile', attempt: 1, retry_at_height: failure!.data.retryAtHeight })]);

    await tickUntilSettled(g, id, () => g.depletion.tick());
    expect(marked(g, 'escrow_depletion_settled', id)).toEqual([expect.objectContaining({ attempt: 2, status: 'settled' })]);
    const requests = settleRequests(g, id).map((e) => e.data);
    expect(requests).toHaveLength(2);
    expect(requests[1]).toMatchObject({ retriedBy: 'depletion', attempt: 2 });
    expect(requests[1]!.txHash).not.toBe(lost.txHash);
    expect(settleTxsOnChain(g.devnet!, id)).toBe(1);
    expect((await g.ctx.chain.escrow(id))?.settled).toBe(true);
    const c = g.ctx.engine.escrow(id)!.context;
    const settled = g.store.readStream(escrowStream(id)).find((r) => r.type === 'EscrowSettled')!.data as { refund: string; height: number };
    // The chain's refund for the recorded settlement (host_stats costs + fees, test/helpers/settlement.ts).
    expect(BigInt(settled.refund)).toBe(expectedRefund(g.store, id, c.deposit));
    expect(settled.height).toBeGreaterThanOrEqual(failure!.data.retryAtHeight!);
    expect(settleFailures(g, id)).toHaveLength(1);

    expect(foldEscrow(g.store.readStream(escrowStream(id))).context).toEqual(c);
    await expectCheckpointVerified(g);
  }, 60_000);

  it('refused once the settle window has closed: the retry is recorded, then given up by the depletion check (windowClosed) with nothing more sent', async () => {
    const { g, id } = await lostThenRefused();
    g.devnet!.chain.jumpTo(2 * EPOCH + 20);
    await reconcileIntents(g.ctx);
    await tickFor(g, SETTLE_RETRY_MAX_BLOCKS + 8, () => g.depletion.tick());

    expect(settleFailures(g, id).map((e) => e.data)).toEqual([
      expect.objectContaining({ attempt: 1, retryAtHeight: expect.any(Number), error: expect.objectContaining({ kind: 'bad_sequence' }) }),
      expect.objectContaining({ windowClosed: true, error: { kind: 'wrong_epoch', message: expect.stringContaining(`settle window closed: escrow ${id} belongs to epoch 0`) } }),
    ]);
    expect(marked(g, 'escrow_depletion_settle_window_closed', id)).toEqual([expect.objectContaining({ escrow_epoch: 0, attempts: 1 })]);
    expect(settleRequests(g, id)).toHaveLength(1);
    expect(settleTxsOnChain(g.devnet!, id)).toBe(0);
    await expectPruned(g, id);
    expect(g.ctx.engine.escrow(id)?.value).toBe('finalized');
  }, 60_000);
});

describe("a rotation's direct settle of unknown outcome, refused when the reconciler sends it again after the phase completed", () => {
  let gw: RotationGateway | undefined;
  afterEach(async () => {
    await disposeFaultyGateway(gw);
    gw = undefined;
  });

  it('the reconciler records RotationFailed with its retry (rotation waiting for PoC); the rotation retries it and it settles with the exact refund', async () => {
    gw = await startRotationGateway({
      env: { GATEWAY_ROTATION_INTERVAL_MS: '3600000', GATEWAY_BALANCE_CHECK_INTERVAL_MS: '3600000', GATEWAY_RECONCILE_INTERVAL_MS: '3600000', DEVNET_EPOCH_BLOCKS: String(EPOCH) },
    });
    const g = gw;
    const first = await createEscrowViaApi(g, '1000000000');
    await enableRotation(g, { temp_count: 1, target_count: 1, pre_poc_blocks: 40 });
    await g.rotation.tick(); // far from the boundary: waits
    const epoch = await readEpoch(g.ctx, 2000);
    g.devnet!.chain.jumpTo(epoch.nextBoundaryHeight - 35);
    const settings = g.ctx.projections.settings.effective().escrow_rotation;
    const stage = () => stateName(g.ctx.projections.rotation.rotation(MODEL).value);
    await runModel(g.ctx, settings.models[0]!, settings.pre_poc_blocks, await readEpoch(g.ctx, 2000), () => stage() === 'phase1.settlingRegulars');
    expect(ofType(g, 'RotationSettleDecided').flatMap((e) => e.data.escrowIds)).toEqual([first]);

    // The settle's tx is lost (node down once it is recorded): pending, and the phase completes.
    const sub = g.store.subscribe(g.store.lastPosition()).subscribe((r) => {
      if (r.type === 'EscrowSettleRequested') g.devnet!.chain.faults.rpcDown = true;
    });
    try {
      await g.rotation.tick();
    } finally {
      sub.unsubscribe();
      g.devnet!.chain.faults.rpcDown = false;
    }
    expect(g.ctx.engine.escrow(first)?.value).toBe('settling');
    expect(stage()).toBe('waitingPoc');
    const [lost] = settleRequests(g, first);
    expect(lost!.data).toMatchObject({ origin: 'rotation', retriedBy: 'rotation', attempt: 1 });
    staleOnResend(g);

    expect(await reconcileIntents(g.ctx)).toMatchObject({ settles: [{ escrowId: first, result: 'failed' }] });
    const failures = ofType(g, 'RotationFailed').filter((e) => e.data.step === 'settle' && e.data.escrowId === first);
    expect(failures).toHaveLength(1);
    expect(failures[0]!.metadata.actor).toEqual({ kind: 'reconciler' });
    expect(failures[0]!.data).toMatchObject({ role: 'regular', attempt: 1, retryAtHeight: lost!.data.height! + 2, error: { kind: 'bad_sequence' } });
    expect(settleRetriesOf(g.ctx.projections.rotation.rotation(MODEL).context)[first]).toEqual({ attempt: 1, retryAtHeight: failures[0]!.data.retryAtHeight });
    expect(marked(g, 'escrow_rotation_settle_retry_scheduled', first)).toEqual([expect.objectContaining({ component: 'reconcile', attempt: 1 })]);

    await tickUntilSettled(g, first, g.rotation.tick);
    expect(marked(g, 'escrow_rotation_settled', first)).toEqual([expect.objectContaining({ attempt: 2, status: 'settled' })]);
    expect(settleTxsOnChain(g.devnet!, first)).toBe(1);
    expect((await g.ctx.chain.escrow(first))?.settled).toBe(true);
    const c = g.ctx.engine.escrow(first)!.context;
    const settled = g.store.readStream(escrowStream(first)).find((r) => r.type === 'EscrowSettled')!.data as { refund: string; height: number };
    // The chain's refund for the recorded settlement (host_stats costs + fees, test/helpers/settlement.ts).
    expect(BigInt(settled.refund)).toBe(expectedRefund(g.store, first, c.deposit));
    expect(settled.height).toBeGreaterThanOrEqual(failures[0]!.data.retryAtHeight!);

    const live = g.ctx.projections.rotation.rotation(MODEL);
    const replayed = foldRotation(MODEL, g.store.readStream(rotationStream(MODEL)));
    expect(replayed.context).toEqual(live.context);
    await expectCheckpointVerified(g);
  }, 60_000);
});
