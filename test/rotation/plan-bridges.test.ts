/**
 * Issue 38, item 2: a bridge escrow an earlier cycle left serving (its phase 2 created no routable
 * replacement) is settled by the next phase 1 while its settle window is open, and one the chain
 * will prune with no phase left to settle it is flagged (pruneRisk). A configuration error holds
 * the create instead of failing it, and the create is planned again once the key is usable.
 */
import { describe, expect, it } from 'vitest';
import type { CatalogEventOf, ChainInputs, EscrowRole, RotationModelSettings } from '../../src/events/catalog.js';
import { foldRotation, stateName, type RotationEvent } from '../../src/machines/index.js';
import { planRotation, pruneRisk, type PlanEscrow, type PlanIntent } from '../../src/gateway/workers/rotation/plan.js';

const M = 'm1';
const settings: RotationModelSettings = { model_id: M, temp_count: 1, target_count: 1, amount: '1000000000', private_key_env: 'KEY' };
const chain = (height: number, epoch = Math.floor(height / 100)): ChainInputs => {
  const next = (epoch + 1) * 100;
  return { height, epoch, nextBoundaryHeight: next, blocksUntilBoundary: next - height, pocActive: epoch >= 1 && height < epoch * 100 + 10 };
};
type E<K extends RotationEvent['type']> = CatalogEventOf<K>;
const started = (phase: 1 | 2, c: ChainInputs): E<'RotationPhaseStarted'> => ({ type: 'RotationPhaseStarted', data: { model: M, phase, chain: c, target: 1, existing: 1 } });
const completed = (phase: 1 | 2, c: ChainInputs): E<'RotationPhaseCompleted'> => ({ type: 'RotationPhaseCompleted', data: { model: M, phase, chain: c, created: 0, promoted: 0, settleDecided: 0 } });
const decided = (role: EscrowRole, ids: string[], c: ChainInputs): E<'RotationCreateDecided'> => ({ type: 'RotationCreateDecided', data: { model: M, role, chain: c, target: 1, existing: 1, intentIds: ids } });
const settles = (role: EscrowRole, ids: string[], c: ChainInputs): E<'RotationSettleDecided'> => ({ type: 'RotationSettleDecided', data: { model: M, role, chain: c, escrowIds: ids } });
const createFailed = (role: EscrowRole, intentId: string, c: ChainInputs): E<'RotationFailed'> => ({
  type: 'RotationFailed',
  data: { model: M, step: role === 'temporary' ? 'create_temporary' : 'create_target', role, chain: c, error: { kind: 'insufficient_funds', message: 'insufficient funds' }, suppress: true, intentId },
});
const configFailed = (intentId: string, c: ChainInputs, variable = 'KEY'): E<'RotationFailed'> => ({
  type: 'RotationFailed',
  data: { model: M, step: 'create_temporary', role: 'temporary', chain: c, error: { kind: 'rejected', message: `configuration: the variable ${variable} is unset` }, suppress: false, intentId, configuration: { variable } },
});
const escrow = (id: string, role: EscrowRole, epoch: number, intentId: string | null = null, state: PlanEscrow['state'] = 'active'): PlanEscrow => ({ id, role, state, intentId, epoch });

function when(events: RotationEvent[], c: ChainInputs, escrows: PlanEscrow[], intents: Record<string, PlanIntent> = {}, keyProblem?: string) {
  const s = foldRotation(M, events);
  return planRotation({ model: settings, prePocBlocks: 20, chain: c, rotation: { state: stateName(s.value), context: s.context }, escrows, intent: (id) => intents[id] ?? 'absent', ...(keyProblem ? { keyProblem } : {}) });
}

describe('rotation plan, issue 38', () => {
  // Cycle of epoch 0: temporary t (escrow 2) bridged; phase 2 (epoch 1) could not create its
  // target, so t kept serving. Phase 1 of epoch 1 (height 185) creates a new temporary (escrow 3).
  const p0 = chain(85);
  const p2 = chain(112);
  const p1 = chain(185);
  const cycle0 = [started(1, p0), decided('temporary', ['t'], p0), settles('regular', ['1'], p0), completed(1, p0), started(2, p2), decided('regular', ['r'], p2), createFailed('regular', 'r', p2), completed(2, p2)];
  const next = [...cycle0, started(1, p1), decided('temporary', ['t2'], p1)];

  it("the next phase 1 settles the bridge an earlier cycle left serving (it is in its settle window's last epoch)", () => {
    const escrows = [escrow('1', 'regular', 0, null, 'settled'), escrow('2', 'temporary', 0, 't'), escrow('3', 'temporary', 1, 't2')];
    const plan = when(next, p1, escrows, { t: 'created', t2: 'created', r: 'failed' });
    expect(plan).toEqual({ kind: 'decide_settles', role: 'regular', escrowIds: ['2'] });
  });

  it('pruneRisk: after this epoch\'s phase 1 promoted instead of settling, a bridge whose window ends now is flagged; none before phase 1 ran', () => {
    const escrows = [escrow('2', 'temporary', 0, 't'), escrow('5', 'regular', 1)];
    const before = foldRotation(M, cycle0).context;
    expect(pruneRisk(escrows, before, p1)).toEqual([]); // this epoch's phase 1 is still to come
    const promotedOnly = foldRotation(M, [...cycle0, started(1, p1), decided('temporary', ['t2'], p1), createFailed('temporary', 't2', p1), { type: 'RotationPromoted', data: { model: M, chain: p1, escrowIds: ['5'] } }]).context;
    expect(pruneRisk(escrows, promotedOnly, p1).map((e) => e.id)).toEqual(['2']);
    const settled = foldRotation(M, [...next, settles('regular', ['2'], p1)]).context;
    expect(pruneRisk(escrows, settled, p1)).toEqual([]);
  });

  it('a configuration error holds the create (recorded once per intent and variable) and the phase does not move on; a usable key plans the create again', () => {
    const decidedOnly = [started(1, p0), decided('temporary', ['t'], p0)];
    const escrows = [escrow('1', 'regular', 0)];
    expect(when(decidedOnly, p0, escrows, {}, 'is unset')).toEqual({ kind: 'configuration_error', role: 'temporary', intentId: 't', variable: 'KEY', problem: 'is unset' });
    const held = [...decidedOnly, configFailed('t', p0)];
    const s = foldRotation(M, held);
    expect(stateName(s.value)).toBe('phase1.creatingTemporaries');
    expect(s.context.cycle.failedIntents).toEqual([]);
    expect(s.context.blocked).toMatchObject({ intentId: 't', variable: 'KEY', step: 'create_temporary' });
    expect(when(held, p0, escrows, {}, 'is unset')).toMatchObject({ kind: 'wait', reason: expect.stringContaining('configuration: the variable KEY is unset') });
    expect(when(held, p0, escrows)).toEqual({ kind: 'create', role: 'temporary', intentId: 't' });
    // The next decision clears it.
    expect(foldRotation(M, [...held, settles('regular', ['1'], p0)]).context.blocked).toBeUndefined();
  });
});
