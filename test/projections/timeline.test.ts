/**
 * An escrow's timeline read from the log (readEscrowTimeline): the creation intent's events, then
 * the escrow's, each with the state after it; refused events marked; InferencesRecorded with its
 * counts; the newest `limit` entries of any stream and the total of all, read in pages with a
 * pause between them.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createIntentStream, escrowStream, type CatalogEvent } from '../../src/events/catalog.js';
import type { RecordedEvent } from '../../src/events/envelope.js';
import { readEscrowTimeline, TIMELINE_PAGE_EVENTS, type Timeline } from '../../src/projections/timeline.js';
import { ev, record } from '../machines/events.js';

/** Pages of `records` as the store reads them; counts the pauses between pages. */
function pagesOf(records: RecordedEvent[]) {
  const log = { pauses: 0, reads: 0 };
  const timeline = (escrowId: string, limit?: number): Promise<Timeline | undefined> =>
    readEscrowTimeline(
      (streamId, from, n) => {
        log.reads++;
        return records.filter((r) => r.streamId === streamId && r.streamVersion >= from).slice(0, n);
      },
      escrowId,
      limit,
      async () => void log.pauses++,
    );
  return { log, timeline };
}

describe('escrowTimeline', () => {
  it("an escrow's timeline starts with its creation intent's events; each entry has the state after it", async () => {
    const recs = record([
      { streamId: createIntentStream('i1'), event: ev.createRequested('i1') },
      { streamId: createIntentStream('i2'), event: ev.createRequested('i2', 'm2') },
      { streamId: escrowStream('e1'), event: ev.created('e1', 'm1', '10000000', 'i1') },
      { streamId: escrowStream('e1'), event: ev.registered('e1') },
      { streamId: escrowStream('e2'), event: ev.created('e2', 'm1') },
      { streamId: escrowStream('e1'), event: ev.started('a', 1, '1000') },
    ]);
    const { timeline } = pagesOf(recs);
    const t = (await timeline('e1'))!;
    expect(t.total).toBe(4);
    expect(t.entries.map((e) => [e.position, e.event, e.actor, e.state, e.accepted])).toEqual([
      [1, 'EscrowCreateRequested', 'admin', 'creating', true],
      [3, 'EscrowCreated', 'admin', 'created', true],
      [4, 'EscrowRegistered', 'admin', 'active', true],
      [6, 'InferenceStarted', 'admin', 'active', true],
    ]);
    expect(t.entries[0]!.time).toBe(recs[0]!.time);
    expect((await timeline('e2'))!.entries.map((e) => e.event)).toEqual(['EscrowCreated']);
    expect(await timeline('nope')).toBeUndefined();
  });

  it('marks refused events and keeps the state; counts the starts and ends of InferencesRecorded', async () => {
    const recs = record([
      { streamId: escrowStream('e1'), event: ev.created('e1') },
      { streamId: escrowStream('e1'), event: ev.registered('e1') },
      { streamId: escrowStream('e1'), event: ev.recorded(ev.started('a', 1), ev.started('b', 2), ev.finished('a', 1)) },
      { streamId: escrowStream('e1'), event: ev.finalized(2) },
      { streamId: escrowStream('e1'), event: ev.started('c', 3) },
    ]);
    const t = (await pagesOf(recs).timeline('e1'))!;
    const [, , recorded, finalized, late] = t.entries;
    expect(recorded).toMatchObject({ event: 'InferencesRecorded', accepted: true, requests: { started: 2, ended: 1 } });
    expect(late).toMatchObject({ event: 'InferenceStarted', accepted: false, state: finalized!.state });
    expect(late!.requests).toBeUndefined();
  });

  it('shows the newest `limit` entries of any stream and counts them all, reading it in pages', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 12 }), fc.oneof(fc.nat(200), fc.constantFrom(TIMELINE_PAGE_EVENTS - 2, 2 * TIMELINE_PAGE_EVENTS - 2)), async (limit, n) => {
        const events: { streamId: string; event: CatalogEvent }[] = [
          { streamId: escrowStream('e1'), event: ev.created('e1') },
          { streamId: escrowStream('e1'), event: ev.registered('e1') },
        ];
        for (let i = 1; i <= n; i++) events.push({ streamId: escrowStream('e1'), event: i % 2 ? ev.started(`r${i}`, i) : ev.finished(`r${i - 1}`, i - 1) });
        const { log, timeline } = pagesOf(record(events));
        const all = (await timeline('e1', 10_000))!;
        const pages = Math.floor((n + 2) / TIMELINE_PAGE_EVENTS) + 1;
        expect(log).toEqual({ reads: pages, pauses: pages - 1 });
        const shown = (await timeline('e1', limit))!;
        expect(all.entries).toHaveLength(n + 2);
        expect(all.entries.map((e) => e.position)).toEqual(events.map((_, i) => i + 1));
        expect(shown.total).toBe(n + 2);
        expect(shown.entries).toEqual(all.entries.slice(-limit));
      }),
    );
  });
});
