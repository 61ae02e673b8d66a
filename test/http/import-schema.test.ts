/**
 * The import body schema through the app's own validator: every escrow-stream event the catalog
 * types allow (the typed builders) passes its data schema, and a bad member is a 400 naming it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpApp } from '../../src/http/app.js';
import { createLogger } from '../../src/http/logger.js';
import { ESCROW_STREAM_EVENT_TYPES } from '../../src/events/catalog/escrow-data-schemas.js';
import { importBodySchema } from '../../src/http/schemas/import.js';
import { exportedRows } from '../helpers/exported-stream.js';
import { ev } from '../machines/events.js';

const app = createHttpApp({ logger: createLogger({ level: 'silent' }) });
app.post('/import', { schema: { body: importBodySchema } }, async () => ({ ok: true }));
beforeAll(() => app.ready());
afterAll(() => app.close());

const post = (payload: object) => app.inject({ method: 'POST', url: '/import', payload });

// One of each escrow-stream event, as the typed builders make them (optional members both ways).
const streamEvents = [
  ev.created('7'),
  ev.registered('7'),
  ev.imported('7'),
  { type: 'EscrowImported', data: { ...ev.imported('7').data, hostStats: [{ slotId: 0, cost: '5', requests: 1 }], provenance: { source: 'a', exportedAt: 't', lastPosition: 3, lastHash: 'h' } } },
  ev.activated('7'),
  ev.noncesReserved(9),
  ev.noncesSkipped(1, 9),
  ev.noncesReleased(3),
  ev.usageRecovered(),
  ev.started('r', 1),
  { type: 'InferenceStarted', data: { ...ev.started('r', 1).data, clientKeyId: null } },
  ev.finished('r', 1),
  ev.failed('r', 1),
  ev.recorded(ev.started('r', 1), ev.finished('r', 1)),
  ev.depleted(),
  ev.routingStopped(),
  ev.finalized(),
  ev.settleRequested(),
  // A drained settle's intent names its attempt; its failures carry the retry, or the give-up.
  { type: 'EscrowSettleRequested', data: { ...ev.settleRequested().data, attempt: 2, height: 40 } },
  ev.settleDeferred(),
  ev.settled(),
  ev.settleFailed(),
  { type: 'EscrowSettleFailed', data: { reason: 'r', error: { kind: 'timeout', message: 'm', code: 5, txHash: 'T' }, txHash: 'T' } },
  { type: 'EscrowSettleFailed', data: { reason: 'r', error: { kind: 'bad_sequence', message: 'm' }, txHash: 'T', attempt: 1, height: 40, retryAtHeight: 42 } },
  { type: 'EscrowSettleFailed', data: { reason: 'r', error: { kind: 'wrong_epoch', message: 'm' }, height: 130, windowClosed: true } },
  ev.deactivated(),
  ev.removed(),
];

describe('import body schema', () => {
  it('accepts every escrow-stream event the catalog types allow', async () => {
    expect(new Set(streamEvents.map((e) => e.type))).toEqual(new Set(ESCROW_STREAM_EVENT_TYPES));
    for (const e of streamEvents) {
      const res = await post({ escrow: { escrow_id: '7' }, events: exportedRows('7', [e]) });
      expect(res.statusCode, `${e.type}: ${res.body}`).toBe(200);
    }
  });

  const body = (data: object) => ({ escrow: { escrow_id: '7' }, events: exportedRows('7', [ev.created('7'), { type: 'InferenceFinished', data }]) });
  const finished = ev.finished('r', 1).data;
  const recorded = (entry: object) => ({ escrow: { escrow_id: '7' }, events: exportedRows('7', [ev.created('7'), { type: 'InferencesRecorded', data: { entries: [entry] } }]) });
  it.each([
    ['an amount that is not a decimal string', body({ ...finished, cost: '12a' }), 'events[1].data.cost', /decimal string of an amount/],
    ['an amount given as a number', body({ ...finished, cost: 12 }), 'events[1].data.cost', /expected a string/],
    ['a missing member', body({ ...finished, usage: undefined }), 'events[1].data.usage', /Missing required/],
    ['a nonce that is not an integer', body({ ...finished, nonce: 1.5 }), 'events[1].data.nonce', /integer/],
    ['an entry amount that is not a decimal string', recorded({ data: { ...finished, cost: '12a' }, type: 'InferenceFinished' }), 'events[1].data.entries[0].data.cost', /decimal string of an amount/],
    ['an entry missing a member of its type', recorded({ data: { ...finished, usage: undefined }, type: 'InferenceFailed' }), 'events[1].data.entries[0].data.reason', /Missing required/],
    ['an entry of another type', recorded({ data: finished, type: 'EscrowSettled' }), 'events[1].data.entries[0].type', /supported values/],
    ['no entries', { escrow: { escrow_id: '7' }, events: exportedRows('7', [ev.created('7'), { type: 'InferencesRecorded', data: { entries: [] } }]) }, 'events[1].data.entries', /empty array/],
    [
      'a settle retry height that is not an integer',
      { escrow: { escrow_id: '7' }, events: exportedRows('7', [ev.created('7'), { type: 'EscrowSettleFailed', data: { ...ev.settleFailed().data, attempt: 1, height: 40, retryAtHeight: '42' } }]) },
      'events[1].data.retryAtHeight',
      /integer/,
    ],
    ['an unknown event type', { escrow: { escrow_id: '7' }, events: exportedRows('7', [{ type: 'SettingsChanged', data: {} }]) }, 'events[0].type', /supported values/],
    ['a schema version this gateway does not record', { escrow: { escrow_id: '7' }, events: exportedRows('7', [ev.registered('7')]).map((r) => ({ ...r, schema_version: 2 })) }, 'events[0].schema_version', /only supported value/],
    ['a row member the export does not write', { escrow: { escrow_id: '7' }, events: exportedRows('7', [ev.registered('7')]).map((r) => ({ ...r, stream_id: 'x' })) }, 'events[0].stream_id', /Unrecognized/],
    ['an escrow member the export does not write', { escrow: { escrow_id: '7', extra: 1 }, events: exportedRows('7', [ev.registered('7')]) }, 'escrow.extra', /Unrecognized/],
    ['an exported_at that is not a time', { escrow: { escrow_id: '7' }, events: exportedRows('7', [ev.registered('7')]), exported_at: 'yesterday' }, 'exported_at', /date-time/],
  ])('refuses %s, naming the member', async (_, payload, param, message) => {
    const res = await post(payload);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toMatchObject({ type: 'invalid_request_error', param });
    expect(res.json().error.message).toMatch(message);
  });
});
