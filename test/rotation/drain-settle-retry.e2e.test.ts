/**
 * Retries of a drained settle (deferred while a request was in flight, sent by the drain reactor
 * once it ended) through the real stack (HTTP gateway, SQLite log, chain client, devnet over
 * loopback with fault hooks): sent while the node is down, it is retried by the reactor's tick with
 * the rotation's block backoff and settles once the node is back; a pending retry survives a
 * restart; a chain refusal is not retried; a retry whose settle window closes is given up and said
 * so; whoever deferred the settle (the admin routes, or the depletion check replacing the escrow);
 * a settle whose tx was lost (outcome unknown) and which the chain then refused, found by the
 * reconciler, is retried (or given up) the same way.
 * A simulated host holds the request in flight (a hold the test releases) while the settle is deferred; the node goes
 * down the moment the deferral (or the drained settle's tx) is recorded, so the fault lands when
 * the request ends. The ticks and the reconciler are run by hand (their timers are off).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { escrowStream, upcast } from '../../src/events/catalog.js';
import { reconcileIntents } from '../../src/gateway/workers/reconcile.js';
import { SETTLE_RETRY_MAX_BLOCKS } from '../../src/gateway/workers/rotation/settle-retry.js';
import { foldEscrow } from '../../src/machines/index.js';
import { settleTxsOnChain, streamTypes } from '../faults/helpers.js';
import { createEscrowViaApi } from '../helpers/gateway.js';
import { depletionTickAboveDeposit, disposeFaultyGateway, enableRotation, expectBackoff, expectCheckpointVerified, expectNeverSent, expectPruned, expectRefusedOnce, explainText, marked, MODEL, ofType, settleRequests, startRotationGateway, tickFor, tickUntilSettled, staleOnResend, waitFor, type RotationGateway } from './helpers.js';
import { expectedRefund } from '../helpers/settlement.js';
import { holdHostRequests } from '../helpers/waits.js';

/** Long epochs: the escrow's settle window (its epoch and the next) must outlast the retries. */
const EPOCH = 200;

/** The recorded failures of the escrow's drained settle, in order. */
const settleFailures = (g: RotationGateway, escrowId: string) =>
  g.store
    .readStream(escrowStream(escrowId))
    .map((r) => upcast(r))
    .flatMap((e) => (e?.type === 'EscrowSettleFailed' ? [e] : []));

const view = async (g: RotationGateway, escrowId: string) => (await g.call(`/v1/admin/devshards/${escrowId}`)).json;

/** The settle is deferred by the admin routes (finalize, then settle). */
async function adminDefers(g: RotationGateway, id: string): Promise<void> {
  expect((await g.call(`/devshard/${id}/v1/finalize`, { method: 'POST' })).status).toBe(200);
  const s = await g.call(`/v1/admin/devshards/${id}/settle`, { body: { private_key_env: 'DEVSHARD_PRIVATE_KEY' } });
  expect(s.json).toMatchObject({ status: 'deferred', in_flight: 1 });
}

/** The settle is deferred by the depletion check: it finds the escrow depleted, replaces it, then finalizes and settles it. */
async function depletionDefers(g: RotationGateway, id: string): Promise<void> {
  await depletionTickAboveDeposit(g);
  expect(ofType(g, 'DepletionReplacementDecided').map((e) => e.data.escrowId)).toEqual([id]);
  expect(marked(g, 'escrow_depletion_settle_deferred', id)).toHaveLength(1);
}

describe('drained settle retries on a devnet with faults', () => {
  let gw: RotationGateway | undefined;
  afterEach(async () => {
    await disposeFaultyGateway(gw);
    gw = undefined;
  });

  /**
   * An escrow of epoch 0 finalized and settled (by `defer`, the admin routes by default) while a
   * request is in flight: the settle is deferred. With `downAt` the node stops answering as soon as
   * that event is recorded: the deferral (the drained settle fails before a tx is signed) or the
   * drained settle's tx (the tx never reaches the chain; its outcome is unknown, the escrow stays
   * settling). `before` runs before the request ends. Answers once the drained settle's first
   * attempt is recorded (or it settled, or it is left to the reconciler).
   */
  async function drained(o: {
    downAt?: 'EscrowSettleDeferred' | 'EscrowSettleRequested';
    before?: (g: RotationGateway) => void;
    defer?: typeof adminDefers;
  }): Promise<{ g: RotationGateway; id: string }> {
    // Timers off: the test runs the reactor's tick (and the depletion check's, and the reconciler).
    gw = await startRotationGateway({
      env: { GATEWAY_ROTATION_INTERVAL_MS: '3600000', GATEWAY_BALANCE_CHECK_INTERVAL_MS: '3600000', GATEWAY_RECONCILE_INTERVAL_MS: '3600000', DEVNET_EPOCH_BLOCKS: String(EPOCH) },
    });
    const g = gw;
    const id = await createEscrowViaApi(g, '1000000000');
    expect(g.ctx.engine.escrow(id)?.context.epoch).toBe(0);
    // Rotation on for the model (its task ticks once on enable, far from the boundary: it waits), so a depletion replaces.
    if (o.defer === depletionDefers) await enableRotation(g, { temp_count: 1, target_count: 1, pre_poc_blocks: 20 });
    // The host holds the request until the test releases it, once the settle is deferred.
    const { held, release } = holdHostRequests(g.devnet!.simulatedHosts.faults);
    const chat = g.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'take your time' }], max_tokens: 8 } });
    // The chat's own request is the one held (nothing else reaches a host before it; a finalize diff
    // held instead would wait on the test). Its start was decided before it left: in flight now.
    await held;
    expect(g.ctx.engine.escrow(id)?.context.inFlight).toBe(1);
    const sub = g.store.subscribe(g.store.lastPosition()).subscribe((r) => {
      if (r.type === o.downAt) g.devnet!.chain.faults.rpcDown = true;
    });
    try {
      await (o.defer ?? adminDefers)(g, id);
      expect(g.ctx.engine.escrow(id)?.context.inFlight, 'the request ended before the settle was deferred').toBe(1);
      o.before?.(g);
      release();
      expect((await chat).status).toBe(200);
      const attempted = () => settleFailures(g, id).length > 0 || g.ctx.engine.escrow(id)?.value === 'settled' || marked(g, 'escrow_drain_settle_pending', id).length > 0;
      await waitFor("the drained settle's first attempt", attempted);
    } finally {
      release();
      sub.unsubscribe();
    }
    return { g, id };
  }

  it('node down when the request ends: retried by the tick with a growing backoff, settled once the node is back, one settle tx; replay and verify agree', async () => {
    const { g, id } = await drained({ downAt: 'EscrowSettleDeferred' });
    const faults = g.devnet!.chain.faults;
    try {
      expect(settleFailures(g, id)).toHaveLength(1);
      await waitFor('three failed attempts', async () => {
        await g.tasks.drain.tick();
        return settleFailures(g, id).length >= 3;
      }, 20_000, 20);
      // The operator sees the retry waiting on the devshard: still deferred, why, and from which height.
      expect(await view(g, id)).toMatchObject({
        state: 'settleDeferred',
        in_flight: 0,
        last_error: expect.stringContaining('chain REST answered 503'),
        settle_retry: { failed_attempts: 3, retry_at_height: settleFailures(g, id)[2]!.data.retryAtHeight },
      });
    } finally {
      faults.rpcDown = false;
    }
    await tickUntilSettled(g, id, g.tasks.drain.tick);

    // What the operator sees: settled on chain and in the gateway, by exactly one settle tx.
    expect((await g.ctx.chain.escrow(id))?.settled).toBe(true);
    expect(settleTxsOnChain(g.devnet!, id)).toBe(1);
    expect(await view(g, id)).toMatchObject({ state: 'settled', settle_retry: null });
    // The failed attempts never got as far as signing: one intent, one outcome.
    expect(streamTypes(g, id).filter((t) => t === 'EscrowSettleRequested')).toHaveLength(1);
    expect(streamTypes(g, id).filter((t) => t === 'EscrowSettled')).toHaveLength(1);

    // Every failed attempt is in the log, on behalf of the admin who deferred it, each at or after the height the previous one set.
    const failures = settleFailures(g, id);
    expect(failures).toHaveLength(3);
    for (const f of failures) {
      expect(f.metadata.actor).toEqual({ kind: 'admin' });
      expect(f.data).toMatchObject({ error: { kind: 'unreachable' } });
    }
    expectBackoff(failures.map((f) => ({ ...f.data, height: f.data.height! })));
    const settled = g.store.readStream(escrowStream(id)).find((r) => r.type === 'EscrowSettled')!;
    expect((settled.data as { height: number }).height).toBeGreaterThan(failures[2]!.data.retryAtHeight!);
    expect(marked(g, 'escrow_drain_settle_retry_scheduled', id).map((l) => l.attempt)).toEqual([1, 2, 3]);
    expect(marked(g, 'escrow_drain_settled', id)).toEqual([expect.objectContaining({ attempt: 4, status: 'settled' })]);

    // Replay: the escrow stream folds to the live state; the projections checkpoint equals a rebuild.
    expect(foldEscrow(g.store.readStream(escrowStream(id))).context).toEqual(g.ctx.engine.escrow(id)!.context);
    await expectCheckpointVerified(g);
  }, 60_000);

  it('a retry scheduled before a restart is continued by the restarted gateway from the log (attempt 2) and settles', async () => {
    const first = await drained({ downAt: 'EscrowSettleDeferred' });
    const id = first.id;
    let g = first.g;
    expect(settleFailures(g, id).map((e) => e.data)).toEqual([expect.objectContaining({ attempt: 1, retryAtHeight: expect.any(Number) })]);
    // Same storage (log and devnet state); the restarted node answers again.
    gw = g = await g.restart();
    expect((await view(g, id)).settle_retry).toEqual({ failed_attempts: 1, retry_at_height: settleFailures(g, id)[0]!.data.retryAtHeight });
    await tickUntilSettled(g, id, g.tasks.drain.tick);
    expect(marked(g, 'escrow_drain_settled', id)).toEqual([expect.objectContaining({ attempt: 2 })]);
    expect(settleFailures(g, id)).toHaveLength(1);
    const settled = g.store.readStream(escrowStream(id)).find((r) => r.type === 'EscrowSettled')!;
    expect((settled.data as { height: number }).height).toBeGreaterThanOrEqual(settleFailures(g, id)[0]!.data.retryAtHeight!);
    expect(settleTxsOnChain(g.devnet!, id)).toBe(1);
    expect((await g.ctx.chain.escrow(id))?.settled).toBe(true);
  }, 60_000);

  it('a chain refusal (wrong_epoch: the window closed before the request ended) is recorded once and not retried', async () => {
    const { g, id } = await drained({ before: (g) => g.devnet!.chain.jumpTo(2 * EPOCH + 20) });
    await tickFor(g, SETTLE_RETRY_MAX_BLOCKS + 8, g.tasks.drain.tick);

    await expectRefusedOnce(g, id, settleFailures(g, id).map((e) => e.data));
    expect(marked(g, 'escrow_drain_settle_retry_scheduled', id)).toEqual([]);
    expect(marked(g, 'escrow_drain_settle_failed', id)).toEqual([expect.objectContaining({ retried: false, note: expect.stringContaining('settle window of this escrow has closed') })]);
  }, 60_000);

  it('node down until the settle window closed: the retry is given up without a tx, recorded once and shown', async () => {
    const { g, id } = await drained({ downAt: 'EscrowSettleDeferred' });
    const faults = g.devnet!.chain.faults;
    try {
      expect(settleFailures(g, id).map((e) => e.data.retryAtHeight !== undefined)).toEqual([true]);
      g.devnet!.chain.jumpTo(2 * EPOCH + 20);
    } finally {
      faults.rpcDown = false;
    }
    await tickFor(g, SETTLE_RETRY_MAX_BLOCKS + 8, g.tasks.drain.tick);

    const failures = settleFailures(g, id).map((e) => e.data);
    expect(failures).toHaveLength(2);
    expect(failures[1]).toMatchObject({ windowClosed: true, error: { kind: 'wrong_epoch', message: expect.stringContaining(`settle window closed: escrow ${id} belongs to epoch 0`) } });
    await expectNeverSent(g, id);
    expect(marked(g, 'escrow_drain_settle_window_closed', id)).toEqual([expect.objectContaining({ escrow_epoch: 0, attempts: 1 })]);
    expect(await view(g, id)).toMatchObject({ settle_retry: null, last_error: expect.stringMatching(new RegExp(`^settle window closed: escrow ${id}`)) });
  }, 60_000);

  it('deferred by the depletion check: retried on its behalf by the reactor (not the check), shown by /v1/debug/rotation and explain rotation, settled once the node is back', async () => {
    const { g, id } = await drained({ downAt: 'EscrowSettleDeferred', defer: depletionDefers });
    const faults = g.devnet!.chain.faults;
    const replacement = ofType(g, 'EscrowCreated').find((e) => e.data.intentId === ofType(g, 'DepletionReplacementDecided')[0]!.data.intentId)!.data.escrowId;
    try {
      const [failure] = settleFailures(g, id);
      expect(failure!.metadata.actor).toEqual({ kind: 'depletion-check' });
      expect(failure!.data).toMatchObject({ attempt: 1, retryAtHeight: expect.any(Number), error: { kind: 'unreachable' } });
      const debug = (await g.call('/v1/debug/rotation')).json.latest_by_model[MODEL];
      expect(debug.drained_settle_retries).toEqual([{ escrow_id: id, failed_attempts: 1, retry_at_height: failure!.data.retryAtHeight }]);
      expect(debug.depletion_settle_retries).toEqual([]);
      const text = explainText(g);
      expect(text).toContain(`replaced by escrow ${replacement}; settle of escrow ${id} not finished: last attempt failed (unreachable: `);
      expect(text).toContain(`deferred settle of escrow ${id} attempt 1: no answer from the chain (unreachable: `);
      // The depletion check leaves a deferred settle to the reactor: nothing recorded or sent by it.
      await g.depletion.tick();
      expect(ofType(g, 'DepletionReplacementFailed')).toEqual([]);
    } finally {
      faults.rpcDown = false;
    }
    await tickUntilSettled(g, id, g.tasks.drain.tick);
    expect(settleTxsOnChain(g.devnet!, id)).toBe(1);
    expect((await g.ctx.chain.escrow(id))?.settled).toBe(true);
    expect(marked(g, 'escrow_drain_settled', id)).toEqual([expect.objectContaining({ attempt: 2, status: 'settled' })]);
    expect((await g.call('/v1/debug/rotation')).json.latest_by_model[MODEL].drained_settle_retries).toEqual([]);
    const settled = g.store.readStream(escrowStream(id)).find((r) => r.type === 'EscrowSettled')!;
    expect(explainText(g)).toContain(`replaced by escrow ${replacement}; escrow ${id} settled on chain at height ${(settled.data as { height: number }).height} after 1 failed settle attempt(s)`);
  }, 60_000);

  /**
   * A drained settle whose tx was lost: the node went down the moment the tx was recorded, so it
   * never reached the chain and the attempt answered `settling`. Once the node is back, another
   * client of the key takes the account sequence the tx carried; the reconciler sends the recorded
   * tx again and the chain refuses it (bad_sequence, transient).
   */
  async function lostThenRefused(): Promise<{ g: RotationGateway; id: string; lost: { txHash: string } }> {
    const { g, id } = await drained({ downAt: 'EscrowSettleRequested' });
    try {
      expect(g.ctx.engine.escrow(id)?.value).toBe('settling');
      expect(marked(g, 'escrow_drain_settle_pending', id)).toHaveLength(1);
    } finally {
      g.devnet!.chain.faults.rpcDown = false;
    }
    staleOnResend(g);
    const [lost] = settleRequests(g, id);
    return { g, id, lost: lost!.data };
  }

  it('settle tx lost, then refused by the chain when the reconciler sends it again: the attempt is recorded with its retry, the tick retries it and it settles with the exact refund', async () => {
    const { g, id, lost } = await lostThenRefused();
    expect(await reconcileIntents(g.ctx)).toMatchObject({ settles: [{ escrowId: id, result: 'failed' }] });

    // Recorded as the drained attempt it was (the same fields as a refusal answered directly): the escrow awaits its retry.
    const [failure] = settleFailures(g, id);
    expect(failure!.metadata.actor).toEqual({ kind: 'reconciler' });
    expect(failure!.data).toMatchObject({ txHash: lost.txHash, attempt: 1, retryAtHeight: expect.any(Number), error: { kind: 'bad_sequence' } });
    expectBackoff([{ ...failure!.data, height: failure!.data.height! }]);
    expect(await view(g, id)).toMatchObject({ state: 'settleDeferred', settle_retry: { failed_attempts: 1, retry_at_height: failure!.data.retryAtHeight } });
    expect(marked(g, 'escrow_drain_settle_retry_scheduled', id)).toEqual([expect.objectContaining({ component: 'reconcile', attempt: 1, retry_at_height: failure!.data.retryAtHeight })]);

    await tickUntilSettled(g, id, g.tasks.drain.tick);
    expect(marked(g, 'escrow_drain_settled', id)).toEqual([expect.objectContaining({ attempt: 2, status: 'settled' })]);
    // A new tx (fresh sequence) settled it, once; the lost one never ran.
    const requests = settleRequests(g, id).map((e) => e.data);
    expect(requests).toHaveLength(2);
    expect(requests[1]).toMatchObject({ attempt: 2 });
    expect(requests[1]!.txHash).not.toBe(lost.txHash);
    expect(settleTxsOnChain(g.devnet!, id)).toBe(1);
    expect((await g.ctx.chain.escrow(id))?.settled).toBe(true);
    // Exact refund: the unspent deposit, as the chain reported it.
    const c = g.ctx.engine.escrow(id)!.context;
    const settled = g.store.readStream(escrowStream(id)).find((r) => r.type === 'EscrowSettled')!.data as { refund: string; height: number };
    // The chain's refund for the recorded settlement (host_stats costs + fees, test/helpers/settlement.ts).
    expect(BigInt(settled.refund)).toBe(expectedRefund(g.store, id, c.deposit));
    expect(settled.height).toBeGreaterThanOrEqual(failure!.data.retryAtHeight!);
    expect(await view(g, id)).toMatchObject({ state: 'settled', settle_retry: null });

    expect(foldEscrow(g.store.readStream(escrowStream(id))).context).toEqual(c);
    await expectCheckpointVerified(g);
  }, 60_000);

  it('settle tx lost, then refused once the settle window has closed: the reconciler records the retry, the tick gives it up (windowClosed) and sends nothing more', async () => {
    const { g, id } = await lostThenRefused();
    g.devnet!.chain.jumpTo(2 * EPOCH + 20);
    await reconcileIntents(g.ctx);
    await tickFor(g, SETTLE_RETRY_MAX_BLOCKS + 8, g.tasks.drain.tick);

    const failures = settleFailures(g, id).map((e) => e.data);
    expect(failures).toEqual([
      expect.objectContaining({ attempt: 1, retryAtHeight: expect.any(Number), error: expect.objectContaining({ kind: 'bad_sequence' }) }),
      expect.objectContaining({ windowClosed: true, error: { kind: 'wrong_epoch', message: expect.stringContaining(`settle window closed: escrow ${id} belongs to epoch 0`) } }),
    ]);
    expect(marked(g, 'escrow_drain_settle_window_closed', id)).toEqual([expect.objectContaining({ escrow_epoch: 0, attempts: 1 })]);
    expect(settleRequests(g, id)).toHaveLength(1);
    expect(settleTxsOnChain(g.devnet!, id)).toBe(0);
    await expectPruned(g, id);
    expect(await view(g, id)).toMatchObject({ state: 'finalized', settle_retry: null, last_error: expect.stringMatching(new RegExp(`^settle window closed: escrow ${id}`)) });
  }, 60_000);
});
