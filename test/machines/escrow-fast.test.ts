/**
 * The escrow fast path against xstate: folding random event sequences with `stepEscrowFast` gives
 * the same state value, a deep-equal context and the same `accepted` per event as folding with
 * xstate's `transition` (`step`); its snapshots stay immutable when several successors are derived
 * from one, and they work with `.can()`, `persistState`/`restoreState` and xstate's `transition`.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fastTransitions, PendingMap, stepEscrowFast } from '../../src/machines/escrow-fast.js';
import { escrowMachine, initialSnapshot, persistState, restoreState, step, type EscrowEvent, type EscrowSnapshot } from '../../src/machines/index.js';
import { ev } from './events.js';

/** Few request ids, so duplicates, unknown ends and odd keys (`toString`, `__proto__`) all occur. */
const requestId = fc.constantFrom('r0', 'r1', 'r2', 'r3', 'r4', '7', 'toString', '__proto__');
const amount = fc.integer({ min: 0, max: 4_000_000 }).map(String);

const started = fc.tuple(requestId, fc.integer({ min: 0, max: 30 }), amount).map(([id, nonce, cost]) => ev.started(id, nonce, cost));
const finished = fc.tuple(requestId, fc.nat(30), amount).map(([id, nonce, cost]) => ev.finished(id, nonce, cost));
const failed = fc.tuple(requestId, fc.nat(30), amount).map(([id, nonce, cost]) => ev.failed(id, nonce, cost));
/** Starts and ends recorded together: refused as a whole when any entry is refused in turn. */
export const recorded = fc.array(fc.oneof(started, finished, failed), { minLength: 1, maxLength: 5 }).map((entries) => ev.recorded(...entries));

const event: fc.Arbitrary<EscrowEvent> = fc.oneof(
  { weight: 6, arbitrary: started },
  { weight: 4, arbitrary: finished },
  { weight: 2, arbitrary: failed },
  { weight: 4, arbitrary: recorded },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 40 }).map((upTo) => ev.noncesReserved(upTo)) },
  // Not a number: left to xstate (what the machine makes of it is its business, not the fast path's).
  { weight: 1, arbitrary: fc.constantFrom<unknown>('30', '3', 2.5, Number.NaN, undefined).map((upTo) => ({ type: 'NoncesReserved', data: { upTo } }) as EscrowEvent) },
  { weight: 1, arbitrary: fc.tuple(fc.integer({ min: 0, max: 30 }), fc.integer({ min: 0, max: 40 })).map(([from, upTo]) => ev.noncesSkipped(from, upTo)) },
  { weight: 1, arbitrary: amount.map((cost) => ev.usageRecovered(cost)) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 40 }).map((upTo) => ev.noncesReleased(upTo)) },
  {
    weight: 3,
    arbitrary: fc.constantFrom<EscrowEvent>(
      ev.createRequested(),
      ev.created('e1', 'm1', '10000000', 'i1'),
      ev.createFailed(),
      ev.registered(),
      ev.imported('e1', 3, '100'),
      ev.activated(),
      ev.depleted(),
      ev.routingStopped(0),
      ev.finalized(),
      ev.settleDeferred(),
      ev.settleRequested(),
      ev.settled(),
      ev.settleFailed(),
      ev.deactivated(),
      ev.removed(),
    ),
  },
);

/** A prefix that makes the escrow active most of the time. */
const prefix = fc.constantFrom<EscrowEvent[]>([], [ev.created('e1', 'm1', '10000000'), ev.registered()], [ev.imported('e1', 3, '100'), ev.activated()]);

const plain = (s: EscrowSnapshot) => JSON.parse(JSON.stringify(persistState(s)));

describe('stepEscrowFast', () => {
  it('serves the inference events and nonce reservations where the machine takes them', () => {
    expect(fastTransitions().sort()).toEqual(
      [
        'active:InferenceStarted',
        'active:NoncesReserved',
        ...['active', 'depleted', 'routingStopped', 'finalized', 'settleDeferred', 'deactivated'].flatMap((s) => [`${s}:InferenceFinished`, `${s}:InferenceFailed`, `${s}:InferencesRecorded`]),
      ].sort(),
    );
  });

  it('folds like xstate: same value, deep-equal context, same accepted per event', () => {
    fc.assert(
      fc.property(prefix, fc.array(event, { maxLength: 150 }), fc.integer({ min: 2, max: 40 }), (start, events, routingStop) => {
        let slow = initialSnapshot(escrowMachine, { routingStop });
        let fast = slow;
        for (const e of [...start, ...events]) {
          expect(fast.can(e)).toBe(slow.can(e));
          const a = step(escrowMachine, slow, e);
          const b = stepEscrowFast(fast, e);
          expect(b.accepted).toBe(a.accepted);
          if (!b.accepted) expect(b.snapshot).toBe(fast);
          expect(b.snapshot.value).toEqual(a.snapshot.value);
          expect(b.snapshot.status).toBe(a.snapshot.status);
          expect(b.snapshot.context).toEqual(a.snapshot.context);
          slow = a.snapshot;
          fast = b.snapshot;
        }
        // A checkpoint of either restores to the same state, and the fast snapshot keeps folding.
        expect(plain(fast)).toEqual(plain(slow));
        expect(restoreState(escrowMachine, plain(fast)).context).toEqual(slow.context);
      }),
      { numRuns: 300 },
    );
  });

  it('folds InferencesRecorded as its entries one at a time through xstate: all accepted, or none applied', () => {
    fc.assert(
      fc.property(prefix, fc.array(event, { maxLength: 60 }), recorded, fc.integer({ min: 2, max: 40 }), (start, before, group, routingStop) => {
        let s = initialSnapshot(escrowMachine, { routingStop });
        for (const e of [...start, ...before]) s = step(escrowMachine, s, e).snapshot;
        // The rule written out: each entry as its own event, in order, from the same state.
        let one = s;
        let all = true;
        for (const entry of group.data.entries) {
          const r = step(escrowMachine, one, { type: entry.type, data: entry.data } as EscrowEvent);
          if (!r.accepted) all = false;
          one = r.snapshot;
        }
        for (const next of [step(escrowMachine, s, group), stepEscrowFast(s, group)]) {
          expect(next.accepted).toBe(all);
          expect(next.snapshot.value).toEqual(s.value);
          expect(next.snapshot.context).toEqual(all ? one.context : s.context);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('keeps snapshots immutable when several successors come from one snapshot', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(), event), { maxLength: 120 }), (steps) => {
        // A pool of (fast, slow) pairs; each step extends a randomly chosen earlier one (branching).
        const s0 = [ev.created('e1', 'm1', '10000000'), ev.registered()].reduce((s, e) => step(escrowMachine, s, e).snapshot, initialSnapshot(escrowMachine, { routingStop: 40 }));
        const pairs: { fast: EscrowSnapshot; slow: EscrowSnapshot; frozen: unknown }[] = [{ fast: s0, slow: s0, frozen: plain(s0) }];
        for (const [pick, e] of steps) {
          const from = pairs[pick % pairs.length]!;
          const a = step(escrowMachine, from.slow, e);
          const b = stepEscrowFast(from.fast, e);
          expect(b.accepted).toBe(a.accepted);
          expect(b.snapshot.context).toEqual(a.snapshot.context);
          pairs.push({ fast: b.snapshot, slow: a.snapshot, frozen: plain(b.snapshot) });
        }
        for (const p of pairs) {
          expect(p.fast.context).toEqual(p.slow.context);
          expect(plain(p.fast)).toEqual(p.frozen);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('gives snapshots xstate can take further, and plain copies of the context', () => {
    let s = initialSnapshot(escrowMachine);
    for (const e of [ev.created(), ev.registered(), ev.started('a', 1), ev.started('b', 2), ev.finished('a', 1)]) s = stepEscrowFast(s, e).snapshot;
    expect(s.context.pending).toEqual({ b: '1000' });
    expect(structuredClone(s.context)).toEqual(s.context);
    expect({ ...s.context }.pending).toEqual({ b: '1000' });
    expect(s.matches('active')).toBe(true);
    expect(s.can(ev.finished('b', 2))).toBe(true);
    const finalized = step(escrowMachine, s, ev.finalized()).snapshot;
    expect(finalized.value).toBe('finalized');
    expect(finalized.context.pending).toEqual({ b: '1000' });
    const drained = stepEscrowFast(finalized, ev.finished('b', 2));
    expect(drained.accepted).toBe(true);
    expect(drained.snapshot.context.inFlight).toBe(0);
    expect(step(escrowMachine, drained.snapshot, ev.settleRequested()).snapshot.value).toBe('settling');
  });
});

describe('PendingMap (the persistent map behind the fast path)', () => {
  it('every version reads as it was made, across the map renewals of long runs and branches', () => {
    const op = fc.oneof(
      { weight: 3, arbitrary: fc.tuple(fc.constant('set' as const), fc.integer({ min: 0, max: 60 }), fc.nat(999)) },
      { weight: 2, arbitrary: fc.tuple(fc.constant('delete' as const), fc.integer({ min: 0, max: 60 }), fc.constant(0)) },
      // Derive the next version from an older one (the engine and the projections branch like this).
      { weight: 1, arbitrary: fc.tuple(fc.constant('branch' as const), fc.nat(), fc.constant(0)) },
    );
    fc.assert(
      fc.property(fc.array(op, { minLength: 50, maxLength: 400 }), (ops) => {
        const versions: { map: PendingMap; expected: Record<string, string> }[] = [{ map: PendingMap.from({}), expected: {} }];
        let cur = versions[0]!;
        for (const [kind, k, v] of ops) {
          if (kind === 'branch') {
            cur = versions[k % versions.length]!;
            continue;
          }
          const key = `req-${k}`;
          const expected = { ...cur.expected };
          let map: PendingMap;
          if (kind === 'set') {
            expected[key] = String(v);
            map = cur.map.set(key, String(v));
          } else {
            delete expected[key];
            map = cur.map.delete(key);
          }
          cur = { map, expected };
          versions.push(cur);
        }
        // Read in an order unlike the one they were made in: rerooting must keep every version exact.
        for (const i of [...versions.keys()].reverse().concat([...versions.keys()])) {
          const { map, expected } = versions[i]!;
          expect(map.size).toBe(Object.keys(expected).length);
          for (const key of Object.keys(expected)) expect(map.get(key)).toBe(expected[key]);
          expect(map.has('req-61')).toBe(false);
        }
        expect(cur.map.toRecord()).toEqual(cur.expected);
      }),
      { numRuns: 60 },
    );
  });
});
