/**
 * readExportedStream, the import's reading of an exported escrow stream: what it folds to (nonce,
 * reservation, spend, per-slot tally) and each check that turns a bad stream into a 400 naming
 * `events[i]` instead of an append (or a 500).
 */
import { describe, expect, it } from 'vitest';
import type { ApiError } from '../../src/http/api-error.js';
import { GatewayError } from '../../src/gateway/errors.js';
import { answerFor } from '../../src/http/gateway-answers.js';
import { readExportedStream } from '../../src/gateway/escrows/exported-stream.js';
import { exportedRows } from '../helpers/exported-stream.js';
import { ev } from '../machines/events.js';

const ID = '7';
const slots = [0, 1, 2].map((slotId) => ({ slotId, host: `host${slotId}`, url: `http://h/${slotId}` }));
const created = { type: 'EscrowCreated', data: { ...ev.created(ID, 'm1', '10000000').data, slots } };
const served = [created, ev.registered(ID), ev.noncesReserved(8), ev.started('r1', 1), ev.finished('r1', 1, '500'), ev.started('r2', 2), ev.failed('r2', 2, '40')];

/** The refusal `f` throws, as the HTTP client gets it. */
function refusal(f: () => unknown): ApiError {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    return answerFor(err as GatewayError);
  }
  throw new Error('no refusal');
}

describe('readExportedStream', () => {
  it('folds a consistent stream: last nonce, reservation, spend and what each slot served', () => {
    const { snapshot, hostStats } = readExportedStream(ID, exportedRows(ID, served));
    expect(snapshot.value).toBe('active');
    expect(snapshot.context).toMatchObject({ escrowId: ID, nonce: 2, nonceReserved: 8, spent: '540', inFlight: 0 });
    expect(hostStats).toEqual([
      { slotId: 0, cost: '0', requests: 0 },
      { slotId: 1, cost: '500', requests: 1 },
      { slotId: 2, cost: '40', requests: 1 },
    ]);
  });

  it("accepts other streams' events between the escrow's (prev_hash links only adjacent positions)", () => {
    expect(readExportedStream(ID, exportedRows(ID, served, { firstPosition: 10, stride: 3 })).snapshot.context.nonce).toBe(2);
  });

  it('an imported stream carries its source tally forward', () => {
    const imported = { type: 'EscrowImported', data: { ...ev.imported(ID, 5, '300').data, slots, hostStats: [{ slotId: 2, cost: '300', requests: 2 }] } };
    const { hostStats } = readExportedStream(ID, exportedRows(ID, [imported, ev.activated(ID), ev.noncesReserved(9), ev.started('r', 6), ev.finished('r', 6, '7')]));
    expect(hostStats).toEqual([
      { slotId: 0, cost: '7', requests: 1 },
      { slotId: 1, cost: '0', requests: 0 },
      { slotId: 2, cost: '300', requests: 2 },
    ]);
  });

  const cases: [string, () => ReturnType<typeof exportedRows>, string, RegExp][] = [
    ['an event left out', () => exportedRows(ID, served).filter((_, i) => i !== 3), 'events[3].stream_version', /whole stream/],
    ['positions going back', () => exportedRows(ID, served).map((r, i) => (i === 2 ? { ...r, position: 1 } : r)), 'events[2].position', /does not follow/],
    ['a broken link between adjacent events', () => exportedRows(ID, served).map((r, i) => (i === 4 ? { ...r, prev_hash: 'a'.repeat(64) } : r)), 'events[4].prev_hash', /altered/],
    ['an edited cost', () => exportedRows(ID, served).map((r, i) => (i === 4 ? { ...r, data: { ...r.data, cost: '1' } } : r)), 'events[4].hash', /altered/],
    ["another escrow's stream", () => exportedRows('8', served), 'events[0].hash', /not of escrow 7/],
    ['a reused nonce (hashes recomputed)', () => exportedRows(ID, [...served, ev.started('r3', 2)]), 'events[7].type', /reused nonce/],
    ['a stream not starting at creation or import', () => exportedRows(ID, served.slice(1)), 'events[0].type', /state none/],
    // The HTTP schema refuses this data first; the fold tripping on it is still this event's 400.
    ['data the fold trips on', () => exportedRows(ID, [{ type: 'EscrowImported', data: {} }]), 'events[0]', /could not be applied/],
  ];
  it.each(cases)('refuses %s with a 400 naming the member', (_, rows, param, message) => {
    const err = refusal(() => readExportedStream(ID, rows()));
    expect(err.status).toBe(400);
    expect(err.param).toBe(param);
    expect(err.message).toContain(param);
    expect(err.message).toMatch(message);
  });
});
