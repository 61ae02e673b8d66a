/**
 * Finalize and settle as decisions (src/machines/escrow-decide.ts), given the escrow's events,
 * when the command comes, then what the use case must do: answer, refuse, finalize first, defer
 * (with the event to record) or settle.
 */
import { describe, expect, it } from 'vitest';
import { decideFinalize, decideSettle, foldEscrow, type EscrowEvent } from '../../src/machines/index.js';
import { ev } from './events.js';

const given = (...events: EscrowEvent[]) => foldEscrow(events, { routingStop: 100 });
const live = [ev.created(), ev.registered()];
const wish = { origin: 'admin' as const, keySource: { kind: 'env' as const, name: 'KEY' } };

describe('decideSettle', () => {
  it('given a settled escrow, then it answers the settlement again', () => {
    expect(decideSettle(given(...live, ev.finalized(), ev.settleRequested(), ev.settled()), wish)).toEqual({ kind: 'answer_settled' });
  });

  it('given a settle tx out, then it answers that it is settling', () => {
    expect(decideSettle(given(...live, ev.finalized(), ev.settleRequested()), wish)).toEqual({ kind: 'answer_settling' });
  });

  it('given an active escrow with a request in flight, then it is refused busy (devshardctl does not finalize under requests)', () => {
    expect(decideSettle(given(...live, ev.started('a', 1)), wish)).toEqual({ kind: 'refuse', code: 'devshard_busy', inFlight: 1 });
  });

  it('given an idle active escrow, then it finalizes first and settles', () => {
    expect(decideSettle(given(...live), wish)).toEqual({ kind: 'finalize_then_settle' });
  });

  it('given an escrow that cannot be finalized (never created, or its create refused), then it is refused not_finalized naming the state', () => {
    expect(decideSettle(given(ev.createRequested(), ev.createFailed()), wish)).toEqual({ kind: 'refuse', code: 'not_finalized', state: 'createFailed' });
    expect(decideSettle(given(ev.createRequested()), wish)).toEqual({ kind: 'refuse', code: 'not_finalized', state: 'creating' });
  });

  it('given a finalized escrow with requests in flight, then it defers, recording the count and the wish', () => {
    const d = decideSettle(given(...live, ev.started('a', 1), ev.started('b', 2), ev.finalized(2)), { ...wish, txFee: { amount: '7' } });
    expect(d).toEqual({ kind: 'defer', inFlight: 2, event: { type: 'EscrowSettleDeferred', data: { inFlight: 2, origin: 'admin', keySource: wish.keySource, txFee: { amount: '7' } } } });
  });

  it('given a deferred settle still draining, then nothing new is recorded', () => {
    expect(decideSettle(given(...live, ev.started('a', 1), ev.finalized(1), ev.settleDeferred(1)), wish)).toEqual({ kind: 'still_deferred', inFlight: 1 });
  });

  it('given a finalized, drained escrow (or a deferred one whose requests ended), then it settles', () => {
    expect(decideSettle(given(...live, ev.finalized()), wish)).toEqual({ kind: 'settle' });
    expect(decideSettle(given(...live, ev.started('a', 1), ev.finalized(1), ev.settleDeferred(1), ev.finished('a', 1)), wish)).toEqual({ kind: 'settle' });
  });
});

describe('decideFinalize', () => {
  it('given an active or depleted escrow, then it finalizes; finalized again, it finalizes again (a settle refinalizes stale settlements)', () => {
    expect(decideFinalize(given(...live))).toEqual({ kind: 'finalize' });
    expect(decideFinalize(given(...live, ev.depleted()))).toEqual({ kind: 'finalize' });
  });

  it('given a settled or settling escrow, then it is refused with the state', () => {
    expect(decideFinalize(given(...live, ev.finalized(), ev.settleRequested(), ev.settled()))).toMatchObject({ kind: 'refuse', code: 'invalid_state' });
    expect(decideFinalize(given(...live, ev.finalized(), ev.settleRequested()))).toEqual({ kind: 'refuse', code: 'invalid_state', state: 'settling' });
  });
});
