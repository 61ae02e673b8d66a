import { describe, expect, it } from 'vitest';
import { escrowMachine, foldEscrow, step, type EscrowEvent, type EscrowSnapshot } from '../../src/machines/index.js';
import { ev } from './events.js';

/** Given/when/then over the escrow statechart: state is the fold of the given events. */
function given(...events: EscrowEvent[]) {
  const snapshot = foldEscrow(events, { routingStop: 5 });
  return {
    snapshot,
    when(event: EscrowEvent) {
      const can = snapshot.can(event);
      const next = step(escrowMachine, snapshot, event);
      return { can, accepted: next.accepted, then: next.snapshot as EscrowSnapshot };
    },
  };
}

const live = [ev.created(), ev.registered()];

describe('escrow statechart', () => {
  it('given a create intent, when the chain creates it, then created; registering makes it active', () => {
    const g = given(ev.createRequested());
    expect(g.snapshot.value).toBe('creating');
    const w = g.when(ev.created('e1', 'm1', '10000000', 'i1'));
    expect(w.then.value).toBe('created');
    expect(w.then.context.intentId).toBe('i1');
    expect(step(escrowMachine, w.then, ev.registered()).snapshot.value).toBe('active');
  });

  it('given a create intent, when the chain refuses, then createFailed (final) with the reason', () => {
    const w = given(ev.createRequested()).when(ev.createFailed());
    expect(w.then.value).toBe('createFailed');
    expect(w.then.status).toBe('done');
    expect(w.then.context.lastError).toContain('insufficient_funds');
  });

  it('given an imported escrow, then it is inactive until activated, keeping nonce and spent', () => {
    const g = given(ev.imported('e1', 3, '100'));
    expect(g.snapshot.value).toBe('imported');
    expect(g.when(ev.started('r', 4)).accepted).toBe(false);
    const w = g.when(ev.activated());
    expect(w.then.value).toBe('active');
    expect(w.then.context).toMatchObject({ nonce: 3, spent: '100', balance: '9999900' });
  });

  it('given active, when a request starts and finishes, then nonce advances and cost is spent', () => {
    const s = foldEscrow([...live, ev.started('r1', 1, '1000')]);
    expect(s.context).toMatchObject({ nonce: 1, inFlight: 1, reserved: '1000', balance: '10000000' });
    const done = foldEscrow([...live, ev.started('r1', 1, '1000'), ev.finished('r1', 1, '400')]);
    expect(done.context).toMatchObject({ nonce: 1, inFlight: 0, reserved: '0', spent: '400', balance: '9999600', pending: {} });
  });

  it('refuses a reused nonce, an unknown request end, a double end, and a reservation beyond the balance', () => {
    const g = given(...live, ev.started('r1', 1));
    expect(g.when(ev.started('r2', 1)).can).toBe(false);
    expect(g.when(ev.finished('nope', 1)).can).toBe(false);
    expect(given(...live, ev.started('r1', 1), ev.finished('r1', 1)).when(ev.finished('r1', 1)).can).toBe(false);
    expect(given(...live).when(ev.started('big', 1, '10000001')).can).toBe(false);
    expect(g.when(ev.finished('r1', 1, '10000001')).can).toBe(false);
  });

  it('given the nonce at the routing stop, then no new request and EscrowRoutingStopped is accepted', () => {
    const g = given(...live, ev.started('a', 1), ev.started('b', 4));
    expect(g.when(ev.started('c', 5)).can).toBe(false);
    expect(g.when(ev.routingStopped(4)).then.value).toBe('routingStopped');
    expect(given(...live, ev.started('a', 1)).when(ev.routingStopped(1)).can).toBe(false);
  });

  it('given depleted with a request in flight, then it drains but takes no new request', () => {
    const g = given(...live, ev.started('a', 1), ev.depleted());
    expect(g.snapshot.value).toBe('depleted');
    expect(g.when(ev.started('b', 2)).can).toBe(false);
    expect(g.when(ev.finished('a', 1)).then.context.inFlight).toBe(0);
  });

  it('given finalized with a request in flight, when settle is asked, then it is deferred until the request drains', () => {
    const g = given(...live, ev.started('a', 1), ev.finalized(1));
    expect(g.when(ev.settleRequested()).can).toBe(false);
    const deferred = g.when(ev.settleDeferred(1));
    expect(deferred.then.value).toBe('settleDeferred');
    expect(step(escrowMachine, deferred.then, ev.settleRequested()).accepted).toBe(false);
    const drained = step(escrowMachine, deferred.then, ev.finished('a', 1)).snapshot;
    const settling = step(escrowMachine, drained, ev.settleRequested()).snapshot;
    expect(settling.value).toBe('settling');
    expect(step(escrowMachine, settling, ev.settled()).snapshot.value).toBe('settled');
  });

  it('given finalized with nothing in flight, then settle is not deferred; a failed settle can be retried', () => {
    const g = given(...live, ev.finalized());
    expect(g.when(ev.settleDeferred(0)).can).toBe(false);
    const failed = foldEscrow([...live, ev.finalized(), ev.settleRequested(), ev.settleFailed()]);
    expect(failed.value).toBe('finalized');
    expect(failed.context.lastError).toBe('timeout');
    expect(failed.can(ev.settleRequested())).toBe(true);
  });

  it('given a drained settle, when it fails transiently, then it stays deferred with its retry until one settles; the first fold of an old log has no retry', () => {
    const drained = [...live, ev.started('a', 1), ev.finalized(1), ev.settleDeferred(1), ev.finished('a', 1)];
    const g = given(...drained);
    expect(g.snapshot.context.settleRetry).toBeUndefined();
    // Failed before a tx was sent: still deferred, the retry recorded.
    const first = g.when(ev.drainedSettleFailed({ attempt: 1, retryAtHeight: 1002 }));
    expect(first.then.value).toBe('settleDeferred');
    expect(first.then.context).toMatchObject({ settleRetry: { attempt: 1, retryAtHeight: 1002 }, lastError: 'chain RPC unreachable' });
    // Failed after its tx was sent (settling): back to deferred with the next retry.
    const sent = step(escrowMachine, first.then, ev.settleRequested()).snapshot;
    expect(sent.value).toBe('settling');
    const second = step(escrowMachine, sent, ev.drainedSettleFailed({ attempt: 2, retryAtHeight: 1006 })).snapshot;
    expect(second.value).toBe('settleDeferred');
    expect(second.context.settleRetry).toEqual({ attempt: 2, retryAtHeight: 1006 });
    const settled = step(escrowMachine, step(escrowMachine, second, ev.settleRequested()).snapshot, ev.settled()).snapshot;
    expect(settled.value).toBe('settled');
    // Replayed: the same state from the same events.
    expect(foldEscrow([...drained, ev.drainedSettleFailed({ attempt: 1, retryAtHeight: 1002 }), ev.settleRequested(), ev.drainedSettleFailed({ attempt: 2, retryAtHeight: 1006 })], { routingStop: 5 }).context).toEqual(second.context);
    // An escrow whose settle failed without retry fields (every log before them) has no settleRetry key at all.
    expect(Object.keys(foldEscrow([...live, ev.finalized(), ev.settleRequested(), ev.settleFailed()]).context)).not.toContain('settleRetry');
  });

  it('given a drained settle, when it is refused or its retry given up, then finalized without a retry; a failure is refused while requests are in flight', () => {
    const deferred = [...live, ev.started('a', 1), ev.finalized(1), ev.settleDeferred(1)];
    expect(given(...deferred).when(ev.drainedSettleFailed({ attempt: 1, retryAtHeight: 1002 })).can).toBe(false);
    expect(given(...deferred).when(ev.drainedSettleFailed()).can).toBe(false);
    const drained = [...deferred, ev.finished('a', 1)];
    const refused = given(...drained).when(ev.drainedSettleFailed({ attempt: 1 }));
    expect(refused.then.value).toBe('finalized');
    expect(refused.then.context.settleRetry).toBeUndefined();
    const pending = foldEscrow([...drained, ev.drainedSettleFailed({ attempt: 1, retryAtHeight: 1002 })]);
    const givenUp = step(escrowMachine, pending, ev.drainedSettleFailed({ windowClosed: true })).snapshot;
    expect(givenUp.value).toBe('finalized');
    expect(givenUp.context.settleRetry).toBeUndefined();
    // Finalized, it can still be settled by hand (the chain judges).
    expect(givenUp.can(ev.settleRequested())).toBe(true);
  });

  it('removes only after settlement; deactivation is allowed from active and settled', () => {
    expect(given(...live).when(ev.removed()).can).toBe(false);
    const deactivated = given(...live).when(ev.deactivated()).then;
    expect(deactivated.value).toBe('deactivated');
    expect(deactivated.can(ev.removed())).toBe(false);
    expect(deactivated.can(ev.activated())).toBe(true);
    const settled = foldEscrow([...live, ev.finalized(), ev.settleRequested(), ev.settled()]);
    expect(settled.can(ev.removed())).toBe(true);
    const settledOff = step(escrowMachine, settled, ev.deactivated()).snapshot;
    expect(settledOff.value).toBe('deactivated');
    expect(settledOff.can(ev.removed())).toBe(true);
    expect(settledOff.can(ev.activated())).toBe(false);
    expect(step(escrowMachine, settledOff, ev.removed()).snapshot.value).toBe('removed');
  });

  it('never takes a new request after deactivation but drains the ones in flight', () => {
    const g = given(...live, ev.started('a', 1), ev.deactivated());
    expect(g.when(ev.started('b', 2)).can).toBe(false);
    expect(g.when(ev.failed('a', 1)).then.context.inFlight).toBe(0);
  });
});
