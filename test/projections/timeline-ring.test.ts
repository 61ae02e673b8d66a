/**
 * The timeline's ring (timeline-ring.ts) against the obvious model, an array of every entry: for
 * any limit and any mix of entries (label known, actor object, metadata text parsed on read,
 * columns left in the table), a view shows exactly the model's newest entries, labelled, with the
 * total of all pushes; reading twice gives the same; a ring made from a view reads as that view.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Actor } from '../../src/events/envelope.js';
import type { DeferredColumns, DeferredRow } from '../../src/events/fold-read.js';
import { actorLabel } from '../../src/projections/actor.js';
import { TimelineRing, type EntryInput, type TimelineEntry } from '../../src/projections/timeline-ring.js';

const actor = fc.oneof(
  fc.constantFrom<Actor>({ kind: 'admin' }, { kind: 'rotation-task' } as Actor),
  fc.constantFrom('k1', 'k2', 'k3').map((keyId): Actor => ({ kind: 'client', keyId })),
);

/** A table of rows left unread, keyed by position; counts its loads. */
class Table implements DeferredColumns {
  rows = new Map<number, DeferredRow>();
  loads = 0;
  load(positions: readonly number[]): DeferredRow[] {
    this.loads++;
    return positions.map((p) => this.rows.get(p)!);
  }
}

type Kind = 'label' | 'actor' | 'text' | 'table';
const entry = fc.record({
  kind: fc.constantFrom<Kind>('label', 'actor', 'text', 'table'),
  actor,
  event: fc.constantFrom('InferencesRecorded', 'InferenceStarted', 'InferenceFinished', 'NoncesReserved', 'EscrowCreated'),
  state: fc.constantFrom('active', 'active.serving', 'finalizing'),
  accepted: fc.boolean(),
  /** InferencesRecorded's starts and ends (ignored for other events). */
  started: fc.nat(200),
  ended: fc.nat(200),
});

describe('TimelineRing', () => {
  it('views the newest entries of the model, labelled, for any limit and mix of entries', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.array(entry, { maxLength: 60 }), fc.integer({ min: 1, max: 15 }), (limit, entries, shown) => {
        const table = new Table();
        const ring = new TimelineRing(limit);
        const model: TimelineEntry[] = [];
        entries.forEach((e, n) => {
          const position = 10 + n * 3;
          const time = `2026-11-22T00:00:${String(n % 60).padStart(2, '0')}.000Z`;
          const meta = JSON.stringify({ actor: e.actor, requestId: `r${n}` });
          table.rows.set(position, { streamVersion: n + 1, time, metadata: meta });
          const input: EntryInput = {
            position,
            time: e.kind === 'table' ? undefined : time,
            event: e.event,
            actor: e.kind === 'label' ? actorLabel(e.actor) : e.kind === 'actor' ? e.actor : undefined,
            state: e.state,
            accepted: e.accepted,
            meta: e.kind === 'text' ? meta : e.kind === 'table' ? table : undefined,
            started: e.event === 'InferencesRecorded' ? e.started : -1,
            ended: e.event === 'InferencesRecorded' ? e.ended : -1,
          };
          ring.push(input);
          const requests = e.event === 'InferencesRecorded' ? { requests: { started: e.started, ended: e.ended } } : {};
          model.push({ position, time, event: e.event, actor: actorLabel(e.actor), state: e.state, accepted: e.accepted, ...requests });
        });
        const expected = { total: entries.length, entries: model.slice(Math.max(0, model.length - Math.min(limit, shown))) };
        expect(ring.view(shown)).toEqual(expected);
        expect(ring.view(shown)).toEqual(expected);
        const full = ring.view(limit);
        expect(TimelineRing.from(full, limit).view(limit)).toEqual(full);
      }),
      { numRuns: 300 },
    );
  });

  it('a ring made from a view (of any length, for any limit) keeps its newest entries and goes on like the model', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 0, max: 30 }), fc.integer({ min: 0, max: 30 }), fc.integer({ min: 0, max: 5 }), (limit, before, after, dropped) => {
        const made = (n: number): TimelineEntry => ({
          position: n,
          time: `t${n}`,
          event: n % 3 ? 'InferencesRecorded' : 'NoncesReserved',
          actor: `k${n % 3}`,
          state: 'active',
          accepted: n % 5 !== 0,
          ...(n % 3 ? { requests: { started: n % 7, ended: n % 4 } } : {}),
        });
        const model = Array.from({ length: before }, (_, n) => made(n));
        // A view may hold more entries than the new limit (a checkpoint written with a larger one).
        const ring = TimelineRing.from({ total: before + dropped, entries: model }, limit);
        for (let n = before; n < before + after; n++) {
          const e = made(n);
          ring.push({ ...e, meta: undefined, started: e.requests?.started ?? -1, ended: e.requests?.ended ?? -1 });
          model.push(e);
        }
        expect(ring.view(limit)).toEqual({ total: before + dropped + after, entries: model.slice(Math.max(0, model.length - limit)) });
      }),
      { numRuns: 300 },
    );
  });

  it('loads the entries a view shows that were left in the table with one query per source', () => {
    const table = new Table();
    const ring = new TimelineRing(4);
    for (let n = 0; n < 10; n++) {
      table.rows.set(n, { streamVersion: n, time: `t${n}`, metadata: JSON.stringify({ actor: { kind: 'admin' } }) });
      ring.push({ position: n, time: undefined, event: 'E', actor: undefined, state: 's', accepted: true, meta: table, started: -1, ended: -1 });
    }
    expect(ring.view(4).entries.map((e) => [e.position, e.time, e.actor])).toEqual([6, 7, 8, 9].map((n) => [n, `t${n}`, 'admin']));
    expect(table.loads).toBe(1);
    ring.view(4);
    expect(table.loads).toBe(1);
  });
});
