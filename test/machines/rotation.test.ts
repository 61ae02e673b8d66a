import { describe, expect, it } from 'vitest';
import { foldRotation, rotationMachine, stateName, step, type RotationEvent } from '../../src/machines/index.js';
import { ev } from './events.js';

const given = (...events: RotationEvent[]) => foldRotation('m1', events);

describe('rotation statechart', () => {
  it('runs a full cycle: temporaries, settle regulars, wait out PoC, targets, settle temporaries, idle', () => {
    const cycle = [
      ev.phaseStarted(1),
      ev.createDecided('temporary', 7, ['t1', 't2']),
      ev.settleDecided('regular', ['e1']),
      ev.phaseCompleted(1),
    ];
    const waiting = given(...cycle);
    expect(stateName(waiting.value)).toBe('waitingPoc');
    expect(waiting.context).toMatchObject({ created: 2, settleDecided: 1, epoch: 7 });
    const done = given(...cycle, ev.phaseStarted(2), ev.createDecided('regular', 7, ['n1', 'n2']), ev.settleDecided('temporary', ['t1', 't2']), ev.phaseCompleted(2));
    expect(done.value).toBe('idle');
    expect(done.context).toMatchObject({ created: 4, settleDecided: 3 });
  });

  it('given temporary creation failed on chain, then promotion is the fallback and the create is suppressed', () => {
    const s = given(ev.phaseStarted(1), ev.rotationFailed('create_temporary', 'temporary', 7, true));
    expect(stateName(s.value)).toBe('phase1.promoting');
    expect(s.context.suppressed).toEqual(['temporary@7']);
    expect(s.context.lastError?.kind).toBe('insufficient_funds');
    const promoted = step(rotationMachine, s, ev.promoted(['e1'])).snapshot;
    expect(stateName(promoted.value)).toBe('phase1.settlingRegulars');
    expect(promoted.context.promoted).toBe(1);
  });

  it('given a suppressed (model, role, epoch), when the same create is decided again, then it is refused; another epoch is not', () => {
    const failedBefore = [
      ev.phaseStarted(1, 7),
      ev.rotationFailed('create_temporary', 'temporary', 7, true),
      ev.promoted(),
      ev.phaseCompleted(1, 7),
      ev.phaseStarted(2, 7),
      ev.rotationFailed('create_target', 'regular', 7, true),
    ];
    const s = given(...failedBefore);
    expect(s.can(ev.createDecided('regular', 7))).toBe(false);
    expect(s.can(ev.createSuppressed('regular', 7))).toBe(true);
    expect(s.context.suppressed).toEqual(['temporary@7', 'regular@7']);
    const next = given(...failedBefore, ev.phaseCompleted(2, 7), ev.phaseStarted(1, 8));
    expect(next.can(ev.createDecided('temporary', 8))).toBe(true);
    expect(next.can(ev.createDecided('temporary', 7))).toBe(false);
  });

  it('given a suppressed create in phase 1, then the phase moves on to promotion', () => {
    expect(stateName(given(ev.phaseStarted(1), ev.createSuppressed('temporary')).value)).toBe('phase1.promoting');
  });

  it('records depletion replacements and their failures in any state without moving it', () => {
    const s = given(ev.replacementDecided(), ev.replacementFailed());
    expect(s.value).toBe('idle');
    expect(s.context.replacements).toBe(1);
    expect(s.context.suppressed).toEqual(['regular@7']);
  });

  it('given a transient settle failure of a replaced escrow, then it awaits a depletion retry (replacement and suppressions untouched), and a final failure ends it', () => {
    const decided = [ev.replacementDecided(), ev.phaseStarted(1)];
    const s = given(...decided, ev.replacementSettleFailed('e1', { attempt: 1, retryAtHeight: 1002 }));
    expect(stateName(s.value)).toBe('phase1.creatingTemporaries');
    expect(s.context.depletionSettleRetries).toEqual({ e1: { attempt: 1, retryAtHeight: 1002, reason: 'depleted' } });
    expect(s.context.replacing).toEqual({ e1: { intentId: 'r1' } });
    expect(s.context.suppressed).toEqual([]);
    expect(s.context.lastError?.kind).toBe('unreachable');
    expect('settleRetries' in s.context).toBe(false);
    const again = given(...decided, ev.replacementSettleFailed('e1', { attempt: 1, retryAtHeight: 1002 }), ev.replacementSettleFailed('e1', { attempt: 2, retryAtHeight: 1006, height: 1002 }));
    expect(again.context.depletionSettleRetries).toEqual({ e1: { attempt: 2, retryAtHeight: 1006, reason: 'depleted' } });
    const closed = step(rotationMachine, again, ev.replacementSettleFailed('e1', { windowClosed: true }));
    expect(closed.accepted).toBe(true);
    expect(closed.snapshot.context.depletionSettleRetries).toEqual({});
    expect(closed.snapshot.context.lastError?.kind).toBe('wrong_epoch');
  });

  it('given a replacement failure recorded before settle retries existed (no step), then it replays as before: a create failure, no retry state', () => {
    const s = given(ev.replacementDecided(), ev.replacementFailed());
    expect(s.context.replacing).toEqual({ e1: { intentId: 'r1', failedEpoch: 7 } });
    expect('depletionSettleRetries' in s.context).toBe(false);
  });

  it('does not start phase 2 without phase 1, nor complete a phase it is not in', () => {
    expect(given().can(ev.phaseStarted(2))).toBe(false);
    expect(given(ev.phaseStarted(1)).can(ev.phaseCompleted(2))).toBe(false);
  });

  it('given a transient settle failure, then the escrow awaits a retry (not kept out), its next failures are accepted after the phase, and a final one ends the retries', () => {
    const settling = [ev.phaseStarted(1), ev.settleDecided('regular', ['e1'])];
    const s = given(...settling, ev.rotationSettleFailed('e1', { attempt: 1, retryAtHeight: 1002 }));
    expect(s.context.settleRetries).toEqual({ e1: { attempt: 1, retryAtHeight: 1002 } });
    expect(s.context.cycle.settleFailed).toEqual([]);
    // The phase moves on; the retry's failure is still recorded (another escrow's final one is refused).
    const waiting = given(...settling, ev.rotationSettleFailed('e1', { attempt: 1, retryAtHeight: 1002 }), ev.phaseCompleted(1));
    expect(waiting.value).toBe('waitingPoc');
    expect(waiting.can(ev.rotationSettleFailed('e2', { attempt: 1 }))).toBe(false);
    const again = step(rotationMachine, waiting, ev.rotationSettleFailed('e1', { attempt: 2, retryAtHeight: 1006, height: 1002 }));
    expect(again.accepted).toBe(true);
    expect(again.snapshot.value).toBe('waitingPoc');
    expect(again.snapshot.context.settleRetries).toEqual({ e1: { attempt: 2, retryAtHeight: 1006 } });
    const closed = step(rotationMachine, again.snapshot, ev.rotationSettleFailed('e1', { windowClosed: true }));
    expect(closed.accepted).toBe(true);
    expect(closed.snapshot.context.settleRetries).toEqual({});
    expect(closed.snapshot.context.lastError?.kind).toBe('wrong_epoch');
    expect(closed.snapshot.can(ev.rotationSettleFailed('e1', { attempt: 3 }))).toBe(false);
  });

  it('given a phase that completed while a settle was pending, when the reconciler finds its tx refused transiently, then the retry is scheduled in any state', () => {
    const waiting = given(ev.phaseStarted(1), ev.settleDecided('regular', ['e1']), ev.phaseCompleted(1));
    expect(waiting.value).toBe('waitingPoc');
    const late = step(rotationMachine, waiting, ev.rotationSettleFailed('e1', { attempt: 1, retryAtHeight: 1002 }));
    expect(late.accepted).toBe(true);
    expect(late.snapshot.value).toBe('waitingPoc');
    expect(late.snapshot.context.settleRetries).toEqual({ e1: { attempt: 1, retryAtHeight: 1002 } });
    expect(late.snapshot.context.cycle.settleFailed).toEqual([]);
    // A chain refusal found that late is not retried: the owner's statechart does not take it.
    expect(waiting.can(ev.rotationSettleFailed('e1', { attempt: 1 }))).toBe(false);
  });

  it('given a settle failure recorded before retries existed (no attempt, no retryAtHeight), then it replays as before: kept out, no retry state', () => {
    const s = given(ev.phaseStarted(1), ev.settleDecided('regular', ['e1']), ev.rotationSettleFailed('e1'));
    expect(s.context.cycle.settleFailed).toEqual(['e1']);
    expect(s.context.settleFailed).toBe(1);
    expect('settleRetries' in s.context).toBe(false);
  });

  it('counts settle failures while settling', () => {
    const s = given(ev.phaseStarted(1), ev.settleDecided('regular'), ev.rotationFailed('settle', undefined, 7, false));
    expect(s.context.settleFailed).toBe(1);
  });
});
