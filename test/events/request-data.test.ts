/**
 * scanRequestData against JSON.parse: whenever it gives fields, they are what JSON.parse reads from
 * the same text (for the store's canonical JSON of per-request events with any strings, numbers and
 * extra fields, and for that text damaged at random); and it does give them for the usual data.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/events/canonical-json.js';
import { scanRecordedEntries, scanRequestData } from '../../src/events/request-data.js';

const text = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('req-1', 'a"b', 'a\\b', 'é', '\u0001', '', '100'));
const integer = fc.oneof(fc.integer(), fc.constantFrom(0, -0, 2 ** 53, 123456789012345, 1234567890123456, 1.5, 1e21));
const usage = fc.record({ promptTokens: integer, completionTokens: integer, totalTokens: integer });

const started = fc.record({ requestId: text, nonce: integer, clientKeyId: fc.oneof(text, fc.constant(null)), reservedCost: text, inputTokens: integer, maxTokens: integer });
const finished = fc.record({ requestId: text, nonce: integer, usage, cost: text });
const failed = fc.record({ requestId: text, nonce: integer, reason: text, usage, cost: text });
/** Other shapes: fields missing, added, of another type. */
const odd = fc.dictionary(fc.constantFrom('requestId', 'nonce', 'cost', 'reservedCost', 'usage', 'extra', 'clientKeyId', '__proto__'), fc.oneof(text, integer, fc.constant(null), usage, fc.boolean()));

const typed = fc.oneof(
  fc.tuple(fc.constant('InferenceStarted'), fc.oneof(started, odd)),
  fc.tuple(fc.constant('InferenceFinished'), fc.oneof(finished, odd)),
  fc.tuple(fc.constant('InferenceFailed'), fc.oneof(failed, odd)),
);

/** Text damaged at one place (a character replaced, inserted or removed). */
const damaged = fc.tuple(typed, fc.nat(), fc.constantFrom('', ' ', '"', '\\', ',', '}', '0', '-', '{', 'x')).map(([[type, data], at, c]) => {
  const t = canonicalJson(data);
  const i = at % (t.length + 1);
  return [type, t.slice(0, i) + c + t.slice(i + (at % 2))] as const;
});

function agrees(type: string, t: string): void {
  const fields = scanRequestData(type, t);
  if (!fields) return;
  const parsed = JSON.parse(t) as Record<string, unknown>;
  expect(fields.requestId).toBe(parsed.requestId);
  expect(Object.is(fields.nonce, parsed.nonce)).toBe(true);
  expect(type === 'InferenceStarted' ? fields.reservedCost : fields.cost).toBe(type === 'InferenceStarted' ? parsed.reservedCost : parsed.cost);
}

describe('scanRequestData', () => {
  it('gives what JSON.parse gives, for canonical data of any content', () => {
    fc.assert(fc.property(typed, ([type, data]) => agrees(type, canonicalJson(data))), { numRuns: 2_000 });
  });

  it('gives nothing JSON.parse would not, for damaged text', () => {
    fc.assert(fc.property(damaged, ([type, t]) => agrees(type, t)), { numRuns: 3_000 });
  });

  it('reads the usual data of the three events', () => {
    const usageOf = { completionTokens: 128, promptTokens: 512, totalTokens: 640 };
    expect(scanRequestData('InferenceStarted', canonicalJson({ requestId: 'req-1', nonce: 19, clientKeyId: 'ck_1', reservedCost: '100000', inputTokens: 512, maxTokens: 1024 }))).toEqual({ requestId: 'req-1', nonce: 19, reservedCost: '100000', cost: undefined });
    expect(scanRequestData('InferenceStarted', canonicalJson({ requestId: 'req-2', nonce: 0, clientKeyId: null, reservedCost: '1', inputTokens: 1, maxTokens: 2 }))?.requestId).toBe('req-2');
    expect(scanRequestData('InferenceFinished', canonicalJson({ requestId: 'req-1', nonce: 19, usage: usageOf, cost: '4921' }))).toEqual({ requestId: 'req-1', nonce: 19, reservedCost: undefined, cost: '4921' });
    expect(scanRequestData('InferenceFailed', canonicalJson({ requestId: 'req-1', nonce: 19, reason: 'upstream 502', usage: usageOf, cost: '0' }))?.cost).toBe('0');
    expect(scanRequestData('EscrowCreated', '{}')).toBeUndefined();
  });
});

/** InferencesRecorded's data: entries of the three types with any content, now and then an odd entry. */
const entry = fc.oneof(
  { weight: 8, arbitrary: typed.map(([type, data]) => ({ data, type }) as unknown) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, {}, { type: 'InferenceStarted' }, { data: {}, type: 'EscrowSettled' }, { data: {}, type: 'InferenceStarted', extra: 1 }) },
);
const recorded = fc.oneof({ weight: 8, arbitrary: fc.array(entry, { maxLength: 6 }).map((entries) => ({ entries }) as unknown) }, { weight: 1, arbitrary: fc.constantFrom<unknown>({}, { entries: 'x' }, { entries: [], more: 1 }) });

/** Whenever the scan gives entries, they are what JSON.parse reads from the same text. */
function agreesRecorded(t: string): void {
  const entries = scanRecordedEntries(t);
  if (!entries) return;
  const parsed = (JSON.parse(t) as { entries: { type: string; data: Record<string, unknown> }[] }).entries;
  expect(entries.map((e) => e.type)).toEqual(parsed.map((e) => e.type));
  entries.forEach((e, i) => {
    const d = parsed[i]!.data;
    expect(e.requestId).toBe(d.requestId);
    expect(Object.is(e.nonce, d.nonce)).toBe(true);
    expect(e.amount).toBe(e.type === 'InferenceStarted' ? d.reservedCost : d.cost);
  });
}

describe('scanRecordedEntries', () => {
  it('gives what JSON.parse gives, for canonical data of any content', () => {
    fc.assert(fc.property(recorded, (data) => agreesRecorded(canonicalJson(data))), { numRuns: 2_000 });
  });

  it('gives nothing JSON.parse would not, for damaged text', () => {
    const damagedRecorded = fc.tuple(recorded, fc.nat(), fc.constantFrom('', ' ', '"', '\\', ',', '}', ']', '0', '-', '{', 'x')).map(([data, at, c]) => {
      const t = canonicalJson(data);
      const i = at % (t.length + 1);
      return t.slice(0, i) + c + t.slice(i + (at % 2));
    });
    fc.assert(fc.property(damagedRecorded, agreesRecorded), { numRuns: 3_000 });
  });

  it('reads what the gateway records', () => {
    const usageOf = { completionTokens: 128, promptTokens: 512, totalTokens: 640 };
    const text = canonicalJson({
      entries: [
        { data: { requestId: 'req-1', nonce: 19, clientKeyId: 'ck_1', reservedCost: '100000', inputTokens: 512, maxTokens: 1024 }, type: 'InferenceStarted' },
        { data: { requestId: 'req-0', nonce: 18, usage: usageOf, cost: '4921' }, type: 'InferenceFinished' },
        { data: { requestId: 'req-1', nonce: 19, reason: 'upstream 502', usage: usageOf, cost: '0' }, type: 'InferenceFailed' },
      ],
    });
    expect(scanRecordedEntries(text)).toEqual([
      { type: 'InferenceStarted', requestId: 'req-1', nonce: 19, amount: '100000' },
      { type: 'InferenceFinished', requestId: 'req-0', nonce: 18, amount: '4921' },
      { type: 'InferenceFailed', requestId: 'req-1', nonce: 19, amount: '0' },
    ]);
    expect(scanRecordedEntries('{"entries":[]}')).toBeUndefined();
  });
});
