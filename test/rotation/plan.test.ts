import { describe, expect, it } from 'vitest';
import type { CatalogEventOf, ChainInputs, EscrowRole, RotationModelSettings } from '../../src/events/catalog.js';
import { foldRotation, stateName, type RotationEvent } from '../../src/machines/index.js';
import { planRotation, type PlanEscrow, type PlanIntent } from '../../src/gateway/workers/rotation/plan.js';
import { isTransientSettleFailure, settleRetryDelay } from '../../src/gateway/workers/rotation/settle-retry.js';
import { ChainError } from '../../src/chain/port.js';
import { GatewayError } from '../../src/gateway/errors.js';

const M = 'm1';
const settings: RotationModelSettings = { model_id: M, temp_count: 2, target_count: 1, amount: '1000000000', private_key_env: 'KEY' };
const chain = (height: number, epoch = Math.floor(height / 100)): ChainInputs => {
  const next = (epoch + 1) * 100;
  return { height, epoch, nextBoundaryHeight: next, blocksUntilBoundary: next - height, pocActive: epoch >= 1 && height < epoch * 100 + 10 };
};
type E<K extends RotationEvent['type']> = CatalogEventOf<K>;
const ev = {
  started: (phase: 1 | 2, c: ChainInputs): E<'RotationPhaseStarted'> => ({ type: 'RotationPhaseStarted', data: { model: M, phase, chain: c, target: 2, existing: 1 } }),
  completed: (phase: 1 | 2, c: ChainInputs): E<'RotationPhaseCompleted'> => ({ type: 'RotationPhaseCompleted', data: { model: M, phase, chain: c, created: 0, promoted: 0, settleDecided: 0 } }),
  decided: (role: EscrowRole, ids: string[], c: ChainInputs): E<'RotationCreateDecided'> => ({ type: 'RotationCreateDecided', data: { model: M, role, chain: c, target: ids.length, existing: 1, intentIds: ids } }),
  failed: (role: EscrowRole, intentId: string, c: ChainInputs, suppress = true): E<'RotationFailed'> => ({
    type: 'RotationFailed',
    data: { model: M, step: role === 'temporary' ? 'create_temporary' : 'create_target', role, chain: c, error: { kind: 'insufficient_funds', message: 'insufficient funds' }, suppress, intentId },
  }),
  promoted: (ids: string[], c: ChainInputs): E<'RotationPromoted'> => ({ type: 'RotationPromoted', data: { model: M, chain: c, escrowIds: ids } }),
  settles: (role: EscrowRole, ids: string[], c: ChainInputs): E<'RotationSettleDecided'> => ({ type: 'RotationSettleDecided', data: { model: M, role, chain: c, escrowIds: ids } }),
  suppressed: (role: EscrowRole, c: ChainInputs): E<'RotationCreateSuppressed'> => ({ type: 'RotationCreateSuppressed', data: { model: M, role, chain: c, reason: 'insufficient_funds' } }),
  /** A settle failure as the task records it; `retryAtHeight` makes it transient. Without options: as recorded before retries existed. */
  settleFailed: (escrowId: string, c: ChainInputs, o: { attempt?: number; retryAtHeight?: number; windowClosed?: boolean } = {}): E<'RotationFailed'> => ({
    type: 'RotationFailed',
    data: {
      model: M,
      step: 'settle',
      role: 'regular',
      chain: c,
      error: o.retryAtHeight !== undefined ? { kind: 'unreachable', message: 'chain RPC unreachable' } : { kind: 'wrong_epoch', message: 'settlement outside the escrow epoch window', code: 1107 },
      suppress: false,
      escrowId,
      ...o,
    },
  }),
};

const escrow = (id: string, role: EscrowRole, state: PlanEscrow['state'] = 'active', intentId: string | null = null, epoch: number | null = 0): PlanEscrow => ({ id, role, state, intentId, epoch });

/** given the rotation log, escrows and intents; when the task plans at `c`; then the next step. */
function when(events: RotationEvent[], c: ChainInputs, escrows: PlanEscrow[], intents: Record<string, PlanIntent> = {}, model = settings) {
  const s = foldRotation(M, events);
  return planRotation({ model, prePocBlocks: 20, chain: c, rotation: { state: stateName(s.value), context: s.context }, escrows, intent: (id) => intents[id] ?? 'absent' });
}

describe('rotation plan', () => {
  const pre = chain(85); // 15 blocks before the boundary at 100, lead 20
  const after = chain(112); // epoch 1, PoC window [100,110) over

  it('waits until pre_poc_blocks before the boundary, then starts phase 1 once per epoch', () => {
    expect(when([], chain(50), [escrow('1', 'regular')])).toMatchObject({ kind: 'wait' });
    expect(when([], pre, [escrow('1', 'regular')])).toEqual({ kind: 'start_phase', phase: 1, target: 2, existing: 1 });
    const cycle = [ev.started(1, pre), ev.decided('temporary', ['t1', 't2'], pre), ev.settles('regular', ['1'], pre), ev.completed(1, pre), ev.started(2, after), ev.completed(2, after)];
    // the same epoch's window again (after a fast cycle): no second rotation
    expect(when(cycle, chain(95, 0), [])).toMatchObject({ kind: 'wait' });
  });

  it('given phase 1 started, then temp_count temporaries are decided in one event', () => {
    expect(when([ev.started(1, pre)], pre, [escrow('1', 'regular')])).toEqual({ kind: 'decide_creates', role: 'temporary', count: 2, target: 2, existing: 1 });
  });

  it('given creates decided, then each absent intent is created under its decided id; created ones are not repeated', () => {
    const log = [ev.started(1, pre), ev.decided('temporary', ['t1', 't2'], pre)];
    expect(when(log, pre, [])).toEqual({ kind: 'create', role: 'temporary', intentId: 't1' });
    expect(when(log, pre, [escrow('7', 'temporary', 'active', 't1')], { t1: 'created' })).toEqual({ kind: 'create', role: 'temporary', intentId: 't2' });
    expect(when(log, pre, [], { t1: 'pending' })).toEqual({ kind: 'resolve_pending', role: 'temporary', intentId: 't1' });
  });

  it('given all temporaries created, then the routable regulars are settled (not the temporaries)', () => {
    const log = [ev.started(1, pre), ev.decided('temporary', ['t1', 't2'], pre)];
    const escrows = [escrow('1', 'regular'), escrow('2', 'regular', 'depleted'), escrow('7', 'temporary', 'active', 't1'), escrow('8', 'temporary', 'active', 't2')];
    expect(when(log, pre, escrows, { t1: 'created', t2: 'created' })).toEqual({ kind: 'decide_settles', role: 'regular', escrowIds: ['1', '2'] });
  });

  it('given the temporary create failed on chain, then the failure is recorded once and the regulars are promoted', () => {
    const log = [ev.started(1, pre), ev.decided('temporary', ['t1', 't2'], pre)];
    expect(when(log, pre, [escrow('1', 'regular')], { t1: 'failed' })).toEqual({ kind: 'record_create_failure', role: 'temporary', intentId: 't1' });
    const failed = [...log, ev.failed('temporary', 't1', pre)];
    // t2 stays unsigned: the (model, temporary, epoch) create is suppressed
    expect(when(failed, pre, [escrow('1', 'regular')], { t1: 'failed' })).toEqual({ kind: 'promote', escrowIds: ['1'] });
    const promoted = [...failed, ev.promoted(['1'], pre)];
    expect(when(promoted, pre, [escrow('1', 'regular')], { t1: 'failed' })).toEqual({ kind: 'complete_phase', phase: 1 });
  });

  it('given the temporary create is suppressed for this epoch, then it is not tried again: suppressed, then promotion', () => {
    const earlier = [ev.started(1, pre), ev.decided('temporary', ['t1'], pre), ev.failed('temporary', 't1', pre), ev.promoted([], pre)];
    // the suppression is kept per (role, epoch): a new cycle in the same epoch would record it
    const s = foldRotation(M, earlier);
    expect(s.context.suppressed).toEqual(['temporary@0']);
    expect(when([ev.started(1, pre), ev.failed('temporary', 'x', pre)], pre, [escrow('1', 'regular')])).toEqual({ kind: 'promote', escrowIds: ['1'] });
  });

  it('waits for the boundary and the end of its PoC window before phase 2', () => {
    const log = [ev.started(1, pre), ev.decided('temporary', ['t1'], pre), ev.settles('regular', ['1'], pre), ev.completed(1, pre)];
    const escrows = [escrow('1', 'regular', 'settled'), escrow('7', 'temporary', 'active', 't1')];
    expect(when(log, chain(99), escrows, { t1: 'created' })).toMatchObject({ kind: 'wait' });
    expect(when(log, chain(104), escrows, { t1: 'created' })).toMatchObject({ kind: 'wait', reason: expect.stringContaining('PoC') });
    expect(when(log, after, escrows, { t1: 'created' })).toEqual({ kind: 'start_phase', phase: 2, target: 1, existing: 0 });
  });

  it('given phase 2, then target_count regulars are created, then the temporaries and promoted regulars settled', () => {
    const log = [ev.started(1, pre), ev.decided('temporary', ['t1'], pre), ev.promoted(['1'], pre), ev.completed(1, pre), ev.started(2, after)];
    const escrows = [escrow('1', 'regular'), escrow('7', 'temporary', 'active', 't1')];
    expect(when(log, after, escrows, { t1: 'created' })).toEqual({ kind: 'decide_creates', role: 'regular', count: 1, target: 1, existing: 1 });
    const decided = [...log, ev.decided('regular', ['r1'], after)];
    const withNew = [...escrows, escrow('9', 'regular', 'active', 'r1')];
    expect(when(decided, after, withNew, { t1: 'created', r1: 'created' })).toEqual({ kind: 'decide_settles', role: 'temporary', escrowIds: ['1', '7'] });
    const settling = [...decided, ev.settles('temporary', ['1', '7'], after)];
    expect(when(settling, after, withNew, { t1: 'created', r1: 'created' })).toEqual({ kind: 'settle', escrowId: '1' });
    const drained = [escrow('1', 'regular', 'settleDeferred'), escrow('7', 'temporary', 'settled', 't1'), escrow('9', 'regular', 'active', 'r1')];
    expect(when(settling, after, drained, { t1: 'created', r1: 'created' })).toEqual({ kind: 'complete_phase', phase: 2 });
  });

  it('given the regular create failed in phase 2, then the temporaries keep serving (no gap) and the phase completes', () => {
    const log = [ev.started(1, pre), ev.decided('temporary', ['t1'], pre), ev.settles('regular', [], pre), ev.completed(1, pre), ev.started(2, after), ev.decided('regular', ['r1'], after)];
    const escrows = [escrow('7', 'temporary', 'active', 't1')];
    expect(when(log, after, escrows, { t1: 'created', r1: 'failed' })).toEqual({ kind: 'record_create_failure', role: 'regular', intentId: 'r1' });
    const failed = [...log, ev.failed('regular', 'r1', after)];
    expect(foldRotation(M, failed).context.suppressed).toContain('regular@1');
    const next = when(failed, after, escrows, { t1: 'created', r1: 'failed' });
    expect(next).toMatchObject({ kind: 'complete_phase', phase: 2, note: expect.stringContaining('keep serving') });
  });

  it('given a regular create suppressed before phase 2 (same epoch), then it is recorded once, not tried', () => {
    const log = [ev.started(1, pre), ev.decided('temporary', ['t1'], pre), ev.settles('regular', [], pre), ev.completed(1, pre), ev.started(2, after)];
    const withSuppression: RotationEvent[] = [
      { type: 'DepletionReplacementDecided', data: { model: M, escrowId: '5', reason: 'depleted', chain: after, intentId: 'd1' } },
      { type: 'DepletionReplacementFailed', data: { model: M, escrowId: '5', reason: 'depleted', chain: after, error: { kind: 'insufficient_funds', message: 'no' }, suppress: true } },
    ];
    const all = [...log.slice(0, 4), ...withSuppression, log[4]!];
    const escrows = [escrow('7', 'temporary', 'active', 't1')];
    expect(when(all, after, escrows, { t1: 'created' })).toEqual({ kind: 'suppressed', role: 'regular', reason: 'insufficient_funds: no' });
    expect(when([...all, ev.suppressed('regular', after)], after, escrows, { t1: 'created' })).toMatchObject({ kind: 'complete_phase', phase: 2 });
  });

  it('with temp_count 0, the regulars are promoted (bridge) rather than settled before a replacement exists', () => {
    const none = { ...settings, temp_count: 0 };
    expect(when([ev.started(1, pre)], pre, [escrow('1', 'regular')], {}, none)).toEqual({ kind: 'promote', escrowIds: ['1'] });
  });

  describe('settle retries', () => {
    // Phase 1 settled regular 1 (epoch 0, window: epochs 0 and 1) after temporary 7 was created.
    const decided = [ev.started(1, pre), ev.decided('temporary', ['t1'], pre), ev.settles('regular', ['1'], pre)];
    const escrows = (state: PlanEscrow['state'] = 'finalized') => [escrow('1', 'regular', state, null, 0), escrow('7', 'temporary', 'active', 't1', 0)];
    const intents = { t1: 'created' as const };
    const transient = [...decided, ev.settleFailed('1', pre, { attempt: 1, retryAtHeight: 85 + settleRetryDelay(1) })];

    it('backs off in blocks: 2, 4, 8, 16, then 32 at most', () => {
      expect([1, 2, 3, 4, 5, 6, 20].map(settleRetryDelay)).toEqual([2, 4, 8, 16, 32, 32, 32]);
    });

    it('retries what says nothing about the settlement (node down, timeout, stale sequence, hosts that did not sign), not what the chain refused', () => {
      for (const kind of ['unreachable', 'timeout', 'bad_sequence'] as const) expect(isTransientSettleFailure(new ChainError(kind, kind))).toBe(true);
      for (const kind of ['wrong_epoch', 'already_settled', 'bad_signatures', 'wrong_settler', 'overspent', 'not_found', 'nonce_too_high', 'insufficient_funds', 'rejected'] as const) {
        expect(isTransientSettleFailure(new ChainError(kind, kind))).toBe(false);
      }
      // settleEscrow wraps chain errors in API errors that keep the kind as code
      expect(isTransientSettleFailure(new GatewayError('upstream', 'unreachable', 'Preparing the settlement failed on chain: unreachable'))).toBe(true);
      expect(isTransientSettleFailure(new GatewayError('upstream', 'host_signatures_missing', 'Only 1 of 3 hosts signed'))).toBe(true);
      expect(isTransientSettleFailure(new GatewayError('chain_refused', 'wrong_epoch', 'Settlement failed on chain: wrong_epoch'))).toBe(false);
      expect(isTransientSettleFailure(new GatewayError('invalid', 'creator_key_unavailable', 'key unset'))).toBe(false);
      expect(isTransientSettleFailure(new Error('disk I/O error'))).toBe(false);
    });

    it('given a transient failure, the phase moves on without it, and the settle is tried again once the chain reached retryAtHeight', () => {
      expect(when(transient, chain(86), escrows(), intents)).toEqual({ kind: 'complete_phase', phase: 1 });
      expect(when(transient, chain(87), escrows(), intents)).toEqual({ kind: 'retry_settle', escrowId: '1', attempt: 2 });
      // after the phase: the retry comes before the wait for the boundary
      const waiting = [...transient, ev.completed(1, chain(86))];
      expect(when(waiting, chain(86), escrows(), intents)).toMatchObject({ kind: 'wait' });
      expect(when(waiting, chain(90), escrows(), intents)).toEqual({ kind: 'retry_settle', escrowId: '1', attempt: 2 });
      // the second failure doubles the wait
      const twice = [...waiting, ev.settleFailed('1', chain(90), { attempt: 2, retryAtHeight: 90 + settleRetryDelay(2) })];
      expect(settleRetryDelay(2)).toBe(4);
      expect(when(twice, chain(93), escrows(), intents)).toMatchObject({ kind: 'wait' });
      expect(when(twice, chain(94), escrows(), intents)).toEqual({ kind: 'retry_settle', escrowId: '1', attempt: 3 });
      // still inside the window in the next epoch (phase 2 under way)
      const phase2 = [...twice, ev.started(2, after)];
      expect(when(phase2, chain(150), escrows(), intents)).toEqual({ kind: 'retry_settle', escrowId: '1', attempt: 3 });
    });

    it('given the escrow settled, is settling or deferred since, there is nothing to retry', () => {
      for (const state of ['settled', 'settling', 'settleDeferred'] as const) {
        expect(when(transient, chain(95), escrows(state), intents)).toEqual({ kind: 'complete_phase', phase: 1 });
      }
    });

    it('given the settle window closed while a retry was pending, it is given up (recorded, never sent) and not tried again', () => {
      const waiting = [...transient, ev.completed(1, chain(86))];
      expect(when(waiting, chain(212), escrows(), intents)).toEqual({ kind: 'settle_window_closed', escrowId: '1', escrowEpoch: 0, attempts: 1 });
      const closed = [...waiting, ev.settleFailed('1', chain(212), { windowClosed: true })];
      expect(when(closed, chain(212), escrows(), intents)).toMatchObject({ kind: 'start_phase', phase: 2 });
      expect(when(closed, chain(300), escrows(), intents).kind).not.toMatch(/settle/);
    });

    it('given a permanent refusal (or a failure recorded before retries existed), the escrow is never tried again', () => {
      const refused = [...decided, ev.settleFailed('1', pre, { attempt: 1 })];
      const old = [...decided, ev.settleFailed('1', pre)];
      for (const log of [refused, old]) {
        expect(when(log, chain(86), escrows(), intents)).toEqual({ kind: 'complete_phase', phase: 1 });
        expect(when(log, chain(99), escrows(), intents)).toEqual({ kind: 'complete_phase', phase: 1 });
        expect(when([...log, ev.completed(1, chain(99))], chain(150), escrows(), intents).kind).not.toMatch(/settle/);
      }
    });
  });
});
