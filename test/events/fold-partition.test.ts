/**
 * The partition read (fold-partition.ts): the records `readAll` yields (time, stream version,
 * metadata and hashes loaded on demand, per-request data scanned and parsed on demand), minus the
 * per-request events of the streams it skips; and the log's tail and streams for planning.
 */
import { describe, expect, it } from 'vitest';
import { openSqliteEventStore } from '../../src/events/sqlite-store.js';
import { REQUEST_TYPES } from '../../src/events/request-data.js';
import { foldWeight } from '../../src/events/fold-partition.js';
import { ev as machineEv } from '../machines/events.js';
import { useTempStore } from '../helpers/store-fixtures.js';

const t = useTempStore();

const client = { actor: { kind: 'client' as const, keyId: 'k1' }, requestId: 'r' };

/** 2,500 events over three escrow streams: requests (some data the scan does not take) and others. */
async function seed(): Promise<void> {
  for (let i = 0; i < 2_500; i += 250) {
    await Promise.all(
      Array.from({ length: 250 }, (_, j) => {
        const n = i + j;
        const e = n % 10 === 0 ? machineEv.registered() : n % 2 ? machineEv.started(n % 7 ? `req-${n}` : `req-"${n}`, n) : machineEv.finished(`req-${n - 1}`, n - 1);
        return t.store.append(`escrow-e${n % 3}`, [{ type: e.type, data: e.data, metadata: client }], { expectedVersion: 'any' });
      }),
    );
  }
}

describe('partition read', () => {
  it('yields the records readAll yields, but the skipped streams’ requests', async () => {
    await seed();
    const log = t.store.foldPartitions()!;
    expect(log.upTo).toBe(2_500);
    expect(log.streams.sort()).toEqual([['escrow-e0', 833], ['escrow-e1', 832], ['escrow-e2', 832]]);
    const all = [...t.store.readAll()];
    const read = [...log.read({ after: 0, upTo: log.upTo, skipStreams: [], skipTypes: REQUEST_TYPES })];
    expect(read.map((r) => r.toRecord())).toEqual(all);
    expect(read.filter((r) => r.request).length).toBeGreaterThan(1_500);

    const part = [...log.read({ after: 100, upTo: 2_000, skipStreams: ['escrow-e1'], skipTypes: REQUEST_TYPES })];
    const expected = all.filter((r) => r.position > 100 && r.position <= 2_000 && !(r.streamId === 'escrow-e1' && REQUEST_TYPES.includes(r.type)));
    expect(part.map((r) => r.position)).toEqual(expected.map((r) => r.position));
    expect(part.map((r) => [r.streamVersion, r.time, r.data, r.metadata])).toEqual(expected.map((r) => [r.streamVersion, r.time, r.data, r.metadata]));
  });

  it('weighs the events of a log of InferencesRecorded as the starts and ends they hold (split thresholds and head starts)', async () => {
    await seed();
    const single = t.store.foldPartitions()!;
    expect(single.bytes).toBeGreaterThan(0);
    expect(foldWeight(single)).toBeLessThan(2); // one start or end per event
    // The same number of requests as entries, 40 per event (as a busy escrow's batches hold them).
    const entries = (k: number) => Array.from({ length: 40 }, (_, j) => ({ data: machineEv.started(`req-${k}-${j}`, k * 40 + j + 1).data, type: 'InferenceStarted' }));
    for (let k = 0; k < 1_000; k += 250) {
      await Promise.all(
        Array.from({ length: 250 }, (_, j) => t.store.append('escrow-g', [{ type: 'InferencesRecorded', data: { entries: entries(k + j) }, metadata: { actor: { kind: 'chat' } } }], { expectedVersion: 'any' })),
      );
    }
    const grouped = t.store.foldPartitions()!;
    expect(foldWeight(grouped)).toBeGreaterThan(3); // 40,000 entries and 2,500 events in 3,500 events
    expect(foldWeight({ upTo: 10, streams: [], bytes: 60_000 })).toBe(10);
    expect(foldWeight({ upTo: 10, streams: [], bytes: 10 })).toBe(1);
    expect(foldWeight({ upTo: 0, streams: [] })).toBe(1);
    // Their entries are scanned, not parsed, by a partition read.
    const read = [...grouped.read({ after: single.upTo, upTo: grouped.upTo, skipStreams: [], skipTypes: REQUEST_TYPES })];
    expect(read.every((r) => Array.isArray(r.request) && r.request.length === 40)).toBe(true);
    expect(read.map((r) => r.toRecord())).toEqual([...t.store.readAll(single.upTo)]);
  });

  it('is not offered for an in-memory log (no other connection can read it)', async () => {
    const mem = openSqliteEventStore(':memory:');
    expect(mem.foldPartitions()).toBeUndefined();
    await mem.close();
  });
});
