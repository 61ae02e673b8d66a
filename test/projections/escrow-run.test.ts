/**
 * The batch fold's escrow runs (escrow-run.ts) against the per-event fast path: folding random
 * escrow logs with `EscrowPoolProjection.fold` inside a batch gives, per event, the same state value
 * and `accepted` as `apply`, the same exception where `apply` throws, and at the end the same pool
 * (checkpoint JSON, key order included). Amounts include the odd ones (long, negative, leading
 * zeros, beyond 2^53, not numbers at all) where a run must hand the event back; so do nonce
 * reservations that are not safe integers.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseStreamId } from '../../src/events/catalog.js';
import type { RecordedEvent } from '../../src/events/envelope.js';
import { EscrowPoolProjection } from '../../src/projections/index.js';
import { exactInt } from '../../src/projections/escrow-run.js';
import { ev } from '../machines/events.js';

const requestId = fc.constantFrom<unknown>('r0', 'r1', 'r2', 'r3', '7', 'toString', '__proto__', 5, null);
const amount = fc.oneof(
  { weight: 12, arbitrary: fc.integer({ min: 0, max: 4_000_000 }).map(String) },
  {
    weight: 1,
    arbitrary: fc.constantFrom<unknown>('007', '-5', '0', '-0', '9007199254740991', '9007199254740993', '123456789012345678', '1e3', ' 5', '', '+1', 12, null),
  },
);
const nonce = fc.oneof({ weight: 12, arbitrary: fc.integer({ min: 0, max: 30 }) }, { weight: 1, arbitrary: fc.constantFrom<unknown>('3', Number.NaN, null) });
const deposit = fc.constantFrom('10000000', '1000000000000000', '9007199254740990', '99999999999999999999');

type Loose = { type: string; data: unknown };
const META = { actor: { kind: 'admin' as const } };
const odd = (e: { type: string; data: object }, patch: Record<string, unknown>): Loose => ({ type: e.type, data: { ...e.data, ...patch } });

const started = fc.tuple(requestId, nonce, amount).map(([id, n, cost]) => odd(ev.started('x', 1), { requestId: id, nonce: n, reservedCost: cost }));
const finished = fc.tuple(requestId, amount).map(([id, cost]) => odd(ev.finished('x', 1), { requestId: id, cost }));
const failed = fc.tuple(requestId, amount).map(([id, cost]) => odd(ev.failed('x', 1), { requestId: id, cost }));
/** An entry of InferencesRecorded, now and then one a run must refuse or hand back. */
const entry = fc.oneof(
  { weight: 12, arbitrary: fc.oneof(started, finished, failed).map((e) => ({ data: e.data, type: e.type }) as unknown) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, { type: 'EscrowDepleted', data: {} }, { type: 'InferenceStarted', data: null }, { type: 'InferenceFinished' }) },
);
const recorded: fc.Arbitrary<Loose> = fc.oneof(
  { weight: 12, arbitrary: fc.array(entry, { minLength: 1, maxLength: 5 }).map((entries) => ({ type: 'InferencesRecorded', data: { entries } })) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>([], null, 'x', undefined).map((entries) => ({ type: 'InferencesRecorded', data: { entries } })) },
);

const event: fc.Arbitrary<Loose> = fc.oneof(
  { weight: 8, arbitrary: started },
  { weight: 6, arbitrary: finished },
  { weight: 2, arbitrary: failed },
  { weight: 8, arbitrary: recorded },
  { weight: 1, arbitrary: fc.constant<Loose>({ type: 'InferenceStarted', data: null }) },
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 40 }).map((upTo) => ev.noncesReserved(upTo)) },
  // Reservations a run must hand back (not a safe integer) or refuse like the machine.
  { weight: 1, arbitrary: fc.constantFrom<unknown>('30', 2.5, Number.NaN, 2 ** 53, null, undefined).map((upTo) => odd(ev.noncesReserved(1), { upTo })) },
  { weight: 1, arbitrary: fc.constant<Loose>({ type: 'NoncesReserved', data: null }) },
  { weight: 1, arbitrary: amount.map((cost) => odd(ev.usageRecovered(), { cost })) },
  {
    weight: 2,
    arbitrary: fc.constantFrom<Loose>(ev.registered(), ev.activated(), ev.depleted(), ev.routingStopped(0), ev.finalized(), ev.settleDeferred(), ev.deactivated(), ev.removed()),
  },
);

/** A log of two escrows (so runs of one are finished and restarted by the other's events). */
const log = fc.tuple(deposit, fc.array(fc.tuple(fc.boolean(), event), { maxLength: 200 })).map(([amount, steps]) => {
  const records: RecordedEvent[] = [];
  const versions = new Map<string, number>();
  const push = (streamId: string, e: Loose) => {
    const v = versions.get(streamId) ?? 0;
    versions.set(streamId, v + 1);
    records.push({ position: records.length + 1, streamId, streamVersion: v, type: e.type, schemaVersion: 1, data: e.data, metadata: META, time: 't', prevHash: '', hash: '' });
  };
  for (const id of ['e1', 'e2']) {
    push(`escrow-${id}`, ev.created(id, 'm1', amount));
    push(`escrow-${id}`, ev.registered(id));
  }
  for (const [second, e] of steps) push(second ? 'escrow-e2' : 'escrow-e1', e);
  return records;
});

/** The outcome of one record: the value and accepted, or the error's class. */
function outcome(f: () => { value: unknown; accepted: boolean } | undefined): unknown {
  try {
    const r = f();
    return r && { value: r.value, accepted: r.accepted };
  } catch (error) {
    return { threw: (error as Error).constructor.name };
  }
}

describe('escrow runs (batch fold)', () => {
  it('fold like apply: per event and at the end', () => {
    fc.assert(
      fc.property(log, fc.integer({ min: 2, max: 40 }), (records, routingStop) => {
        const plain = new EscrowPoolProjection({ routingStop });
        const batch = new EscrowPoolProjection({ routingStop });
        batch.beginBatch();
        for (const r of records) {
          const stream = parseStreamId(r.streamId);
          const a = outcome(() => {
            const x = plain.apply(r, stream);
            return x && { value: x.snapshot.value, accepted: x.accepted };
          });
          const b = outcome(() => batch.fold(r, stream));
          expect(b).toEqual(a);
        }
        batch.endBatch();
        expect(JSON.stringify(batch.snapshot())).toBe(JSON.stringify(plain.snapshot()));
        expect(batch.routableOf('m1')).toEqual(plain.routableOf('m1'));
      }),
      { numRuns: 400 },
    );
  });

  it('a refused InferencesRecorded leaves the pending reservations in their order (live and batch)', () => {
    // Found by the property above: the first entry ends a request, the second cannot; the event is
    // refused, and both folds must still read the two reservations in the order they were made.
    const rec = (i: number, e: Loose): RecordedEvent => ({ position: i + 1, streamId: 'escrow-e1', streamVersion: i, type: e.type, schemaVersion: 1, data: e.data, metadata: META, time: 't', prevHash: '', hash: '' });
    const events: Loose[] = [
      ev.created('e1', 'm1', '10000000'),
      ev.registered('e1'),
      ev.started('toString', 1, '0'),
      ev.started('r0', 2, '0'),
      ev.recorded(ev.failed('toString', 1, '0'), ev.finished('toString', 1, '0')),
    ];
    const plain = new EscrowPoolProjection();
    const batch = new EscrowPoolProjection();
    batch.beginBatch();
    events.forEach((e, i) => {
      plain.apply(rec(i, e));
      batch.fold(rec(i, e), parseStreamId('escrow-e1'));
    });
    batch.endBatch();
    for (const p of [plain, batch]) expect(Object.keys(JSON.parse(JSON.stringify(p.snapshot())).escrows.e1.context.pending)).toEqual(['toString', 'r0']);
  });

  it('finishes its runs before any read, and keeps folding after', () => {
    const record = (i: number, e: Loose): RecordedEvent => ({ position: i + 1, streamId: 'escrow-e1', streamVersion: i, type: e.type, schemaVersion: 1, data: e.data, metadata: META, time: 't', prevHash: '', hash: '' });
    const records = [ev.created('e1', 'm1', '10000000'), ev.registered('e1'), ev.started('a', 1), ev.started('b', 2), ev.finished('a', 1, '300')];
    const batch = new EscrowPoolProjection();
    batch.beginBatch();
    records.forEach((e, i) => batch.fold(record(i, e), { kind: 'escrow', id: 'e1' }));
    const c = batch.escrow('e1')!.context;
    expect([c.inFlight, c.reserved, c.spent, c.balance, c.pending]).toEqual([1, '1000', '300', '9999700', { b: '1000' }]);
    batch.fold(record(5, ev.finished('b', 2, '200')), { kind: 'escrow', id: 'e1' });
    batch.endBatch();
    expect(batch.escrow('e1')!.context.pending).toEqual({});
    expect(batch.escrow('e1')!.context.balance).toBe('9999500');
  });

  it('keeps the pending order across many starts (the run renews its map every few starts)', () => {
    const records: RecordedEvent[] = [];
    const push = (e: Loose) => records.push({ position: records.length + 1, streamId: 'escrow-e1', streamVersion: records.length, type: e.type, schemaVersion: 1, data: e.data, metadata: META, time: 't', prevHash: '', hash: '' });
    push(ev.created('e1', 'm1', '1000000000'));
    push(ev.registered('e1'));
    push(ev.noncesReserved(500));
    const inFlight: string[] = [];
    for (let n = 1; n <= 300; n++) {
      push(ev.started(`r${n}`, n, '10'));
      inFlight.push(`r${n}`);
      // Ends out of order, and in bursts, so the pending map grows and shrinks.
      if (n % 7 === 0) for (const id of inFlight.splice(n % 3, 4)) push(ev.finished(id, 1, '5'));
      if (n % 97 === 0) push(ev.noncesReserved(500 + n));
    }
    const plain = new EscrowPoolProjection();
    const batch = new EscrowPoolProjection();
    batch.beginBatch();
    for (const r of records) {
      plain.apply(r, { kind: 'escrow', id: 'e1' });
      batch.fold(r, { kind: 'escrow', id: 'e1' });
    }
    batch.endBatch();
    expect(Object.keys(batch.escrow('e1')!.context.pending)).toEqual(inFlight);
    expect(JSON.stringify(batch.snapshot())).toBe(JSON.stringify(plain.snapshot()));
  });

  it('reads plain safe integers only', () => {
    expect([exactInt('0'), exactInt('-12'), exactInt('007'), exactInt('9007199254740991')]).toEqual([0, -12, 7, 9007199254740991]);
    for (const s of ['', '-', '+1', '1e3', ' 1', '1.0', '9007199254740992', '123456789012345678', 12, null]) expect(exactInt(s)).toBeUndefined();
  });
});
