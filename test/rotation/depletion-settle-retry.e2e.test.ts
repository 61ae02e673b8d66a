/**
 * Settle retries of a depletion replacement's old escrow through the real stack (HTTP gateway,
 * SQLite log, chain client, devnet over loopback with fault hooks): a settle that fails while the
 * node is down is retried by later depletion checks with a growing backoff and settles once the
 * node is back; a pending retry survives a restart; a chain refusal is not retried; a retry whose
 * settle window closes is given up and said so. The checks are run by hand (their timer is off),
 * and the node goes down the moment the replacement escrow is recorded, so the fault lands between
 * the replacement's create and the old escrow's settle.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { rotationStream } from '../../src/events/catalog.js';
import { SETTLE_RETRY_MAX_BLOCKS } from '../../src/gateway/workers/rotation/settle-retry.js';
import { depletionSettleRetriesOf, foldRotation } from '../../src/machines/index.js';
import { settleTxsOnChain, streamTypes } from '../faults/helpers.js';
import { createEscrowViaApi } from '../helpers/gateway.js';
import { depletionTickAboveDeposit, disposeFaultyGateway, depletionSettleFailures, enableRotation, expectBackoff, expectCheckpointVerified, expectNeverSent, expectRefusedOnce, explainText, marked, MODEL, ofType, startRotationGateway, tickFor, tickUntilSettled, waitFor, type RotationGateway } from './helpers.js';

/** Long epochs: the old escrow's window (its epoch and the next) must outlast the retries. */
const EPOCH = 200;

const settleFailures = depletionSettleFailures;

const depletionRetries = async (g: RotationGateway) => (await g.call('/v1/debug/rotation')).json.latest_by_model[MODEL].depletion_settle_retries;

describe('depletion replacement settle retries on a devnet with faults', () => {
  let gw: RotationGateway | undefined;
  afterEach(async () => {
    await disposeFaultyGateway(gw);
    gw = undefined;
  });

  /**
   * An escrow of epoch 0 depleted and replaced by one depletion check; with `downAtSettle` the node
   * stops answering as soon as the replacement is recorded. `before` runs just before the check.
   */
  async function replaced(o: { downAtSettle: boolean; before?: (g: RotationGateway) => void }): Promise<{ g: RotationGateway; old: string; replacement: string }> {
    // Timers off: the rotation task ticks once on enable (far from the boundary: it waits), the test runs the checks.
    gw = await startRotationGateway({ env: { GATEWAY_ROTATION_INTERVAL_MS: '3600000', GATEWAY_BALANCE_CHECK_INTERVAL_MS: '3600000', DEVNET_EPOCH_BLOCKS: String(EPOCH) } });
    const g = gw;
    const old = await createEscrowViaApi(g, '1000000000');
    await enableRotation(g, { temp_count: 1, target_count: 1, pre_poc_blocks: 20 });
    expect(g.ctx.engine.escrow(old)?.context.epoch).toBe(0);
    const faults = g.devnet!.chain.faults;
    const sub = g.store.subscribe(g.store.lastPosition()).subscribe((r) => {
      if (o.downAtSettle && r.type === 'EscrowCreated' && r.streamId !== `escrow-${old}`) faults.rpcDown = true;
    });
    o.before?.(g);
    // A threshold above the deposit: this check finds the escrow depleted and replaces it.
    try {
      await depletionTickAboveDeposit(g);
    } finally {
      sub.unsubscribe();
    }
    const decided = ofType(g, 'DepletionReplacementDecided');
    expect(decided.map((e) => e.data.escrowId)).toEqual([old]);
    const replacement = ofType(g, 'EscrowCreated').find((e) => e.data.intentId === decided[0]!.data.intentId)!.data.escrowId;
    return { g, old, replacement };
  }

  it('node down at the old escrow\'s settle: retried by later checks with a growing backoff, settled once the node is back, one settle tx; replay gives the same state', async () => {
    const { g, old, replacement } = await replaced({ downAtSettle: true });
    const faults = g.devnet!.chain.faults;
    try {
      expect(settleFailures(g, old)).toHaveLength(1);
      await waitFor('three failed attempts', async () => {
        await g.depletion.tick();
        return settleFailures(g, old).length >= 3;
      }, 20_000, 20);
      expect(await depletionRetries(g)).toEqual([{ escrow_id: old, failed_attempts: 3, retry_at_height: settleFailures(g, old)[2]!.data.retryAtHeight }]);
      expect(g.ctx.engine.escrow(old)?.value).toBe('finalized');
      expect(explainText(g)).toContain(`replaced by escrow ${replacement}; settle of escrow ${old} not finished: last attempt failed (unreachable: `);
    } finally {
      faults.rpcDown = false;
    }
    await tickUntilSettled(g, old, g.depletion.tick);

    // What the operator sees: settled on chain and in the gateway, by exactly one settle tx.
    expect((await g.ctx.chain.escrow(old))?.settled).toBe(true);
    expect(settleTxsOnChain(g.devnet!, old)).toBe(1);
    expect((await g.call(`/v1/admin/devshards/${old}`)).json.state).toBe('settled');
    expect(streamTypes(g, old).filter((t) => t === 'EscrowSettleRequested')).toHaveLength(1);
    expect(streamTypes(g, old).filter((t) => t === 'EscrowSettled')).toHaveLength(1);
    expect(g.ctx.engine.escrow(replacement)?.value).toBe('active');
    expect(ofType(g, 'DepletionReplacementDecided')).toHaveLength(1);

    // Every failed attempt is in the log, each at or after the height the previous one set.
    const failures = settleFailures(g, old).map((e) => e.data);
    expect(failures).toHaveLength(3);
    for (const f of failures) expect(f).toMatchObject({ step: 'settle', escrowId: old, reason: 'depleted', suppress: false, error: { kind: 'unreachable' } });
    expectBackoff(failures.map((f) => ({ ...f, height: f.chain.height })));
    const settled = g.store.readStream(`escrow-${old}`).find((r) => r.type === 'EscrowSettled')!;
    expect((settled.data as { height: number }).height).toBeGreaterThan(failures[2]!.retryAtHeight!);
    expect(marked(g, 'escrow_depletion_settle_retry_scheduled', old).map((l) => l.attempt)).toEqual([1, 2, 3]);
    expect(marked(g, 'escrow_depletion_settled', old)).toEqual([expect.objectContaining({ attempt: 4, status: 'settled' })]);
    expect(await depletionRetries(g)).toEqual([]);
    const text = explainText(g);
    expect(text).toContain(`escrow ${old} settled on chain at height ${(settled.data as { height: number }).height} after 3 failed settle attempt(s)`);
    expect(text).toContain(`settle of escrow ${old} attempt 1: no answer from the chain (unreachable: chain REST answered 503`);
    expect(text).toContain('transient, settled on a later attempt');

    // Replay: the rotation stream folds to the live state; the projections checkpoint equals a rebuild.
    const live = g.ctx.projections.rotation.rotation(MODEL);
    const replayed = foldRotation(MODEL, g.store.readStream(rotationStream(MODEL)));
    expect(replayed.context).toEqual(live.context);
    expect(depletionSettleRetriesOf(replayed.context)[old]).toEqual({ attempt: 3, retryAtHeight: failures[2]!.retryAtHeight, reason: 'depleted' });
    await expectCheckpointVerified(g);
  }, 60_000);

  it('a retry scheduled before a restart is continued by the restarted gateway from the log (attempt 2) and settles', async () => {
    const first = await replaced({ downAtSettle: true });
    const old = first.old;
    let g = first.g;
    expect(settleFailures(g, old).map((e) => e.data)).toEqual([expect.objectContaining({ attempt: 1, retryAtHeight: expect.any(Number) })]);
    // Same storage (log and devnet state); the restarted node answers again.
    gw = g = await g.restart();
    expect(await depletionRetries(g)).toEqual([{ escrow_id: old, failed_attempts: 1, retry_at_height: settleFailures(g, old)[0]!.data.retryAtHeight }]);
    await tickUntilSettled(g, old, g.depletion.tick);
    expect(marked(g, 'escrow_depletion_settled', old)).toEqual([expect.objectContaining({ attempt: 2 })]);
    expect(settleFailures(g, old)).toHaveLength(1);
    expect(settleTxsOnChain(g.devnet!, old)).toBe(1);
    expect((await g.ctx.chain.escrow(old))?.settled).toBe(true);
    expect(ofType(g, 'DepletionReplacementDecided')).toHaveLength(1);
  }, 60_000);

  it('a chain refusal (wrong_epoch: the window closed before the settle) is recorded once and not retried', async () => {
    // Epoch 2 when the escrow depletes: the replacement is created, the old escrow's window (epochs 0 and 1) is over.
    const { g, old, replacement } = await replaced({ downAtSettle: false, before: (g) => g.devnet!.chain.jumpTo(2 * EPOCH + 20) });
    expect(g.ctx.engine.escrow(replacement)?.value).toBe('active');
    await tickFor(g, SETTLE_RETRY_MAX_BLOCKS + 8, g.depletion.tick);

    // Pruned before it was finalized: no host signs a settlement of it, it only stops taking chat.
    await expectRefusedOnce(g, old, settleFailures(g, old).map((e) => e.data), 'deactivated');

    expect(marked(g, 'escrow_depletion_settle_retry_scheduled', old)).toEqual([]);
    expect(marked(g, 'escrow_depletion_replacement_failed: the old escrow could not be settled', old)).toEqual([
      expect.objectContaining({ retried: false, note: expect.stringContaining('settle window of this escrow has closed') }),
    ]);
    // Pruned already: refused before any tx, so explain names the prune and what it cost.
    expect(explainText(g)).toContain(`GAVE UP settle of escrow ${old}: settle window closed: escrow ${old} of epoch 0 was pruned by the chain`);
    expect(explainText(g)).toContain('its whole deposit went to its hosts');
    expect(await depletionRetries(g)).toEqual([]);
  }, 60_000);

  it('node down until the settle window closed: the retry is given up without a tx, recorded once and explained', async () => {
    const { g, old } = await replaced({ downAtSettle: true });
    const faults = g.devnet!.chain.faults;
    try {
      expect(settleFailures(g, old).map((e) => e.data.retryAtHeight !== undefined)).toEqual([true]);
      g.devnet!.chain.jumpTo(2 * EPOCH + 20);
    } finally {
      faults.rpcDown = false;
    }
    await tickFor(g, SETTLE_RETRY_MAX_BLOCKS + 8, g.depletion.tick);

    const failures = settleFailures(g, old).map((e) => e.data);
    expect(failures).toHaveLength(2);
    expect(failures[1]).toMatchObject({ windowClosed: true, error: { kind: 'wrong_epoch', message: expect.stringContaining(`settle window closed: escrow ${old} belongs to epoch 0`) } });
    await expectNeverSent(g, old);
    expect(marked(g, 'escrow_depletion_settle_window_closed', old)).toEqual([expect.objectContaining({ escrow_epoch: 0, attempts: 1 })]);

    const debug = (await g.call('/v1/debug/rotation')).json;
    expect(debug.latest_by_model[MODEL].depletion_settle_retries).toEqual([]);
    expect(debug.latest_by_model[MODEL].last_error.message).toMatch(new RegExp(`^settle window closed: escrow ${old}`));
    expect(explainText(g)).toContain(`GAVE UP settle of escrow ${old}: settle window closed`);
  }, 60_000);
});
