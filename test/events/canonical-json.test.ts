import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { CanonicalJsonError, canonicalJson, canonicalJsonByWalk, isCanonicalPlain } from '../../src/events/canonical-json.js';
import { eventHash, recordCanonicalJson } from '../../src/events/hash.js';
import { createHash } from 'node:crypto';

describe('canonicalJson', () => {
  it('sorts keys at every depth and has no whitespace', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: 'x' } })).toBe('{"a":{"c":"x","d":[3,{"y":2,"z":1}]},"b":1}');
  });

  it('gives the same text for the same value regardless of key insertion order', () => {
    expect(canonicalJson({ x: 1, y: { p: true, q: null } })).toBe(canonicalJson({ y: { q: null, p: true }, x: 1 }));
  });

  it('drops undefined members like JSON.stringify and honours toJSON', () => {
    expect(canonicalJson({ a: undefined, t: new Date('2024-01-02T03:04:05.000Z') })).toBe('{"t":"2024-01-02T03:04:05.000Z"}');
  });

  it('rejects bigint with the path of the offending value', () => {
    expect(() => canonicalJson({ amount: { value: 10n } })).toThrow(CanonicalJsonError);
    expect(() => canonicalJson({ amount: { value: 10n } })).toThrow(/bigint.*\$\.amount\.value/);
  });

  it('rejects non-finite numbers instead of writing null', () => {
    expect(() => canonicalJson({ x: Number.NaN })).toThrow(/non-finite/);
  });
});

describe('canonicalJson fast path (values already in sorted key order)', () => {
  const sortedCopy = (v: unknown): unknown => {
    if (v === null || typeof v !== 'object') return v;
    if (Array.isArray(v)) return v.map(sortedCopy);
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) Object.defineProperty(out, k, { value: sortedCopy((v as Record<string, unknown>)[k]), enumerable: true, writable: true, configurable: true });
    return out;
  };
  const values = fc.oneof(fc.jsonValue(), fc.object({ withNullPrototype: false, values: [fc.jsonValue(), fc.constant(undefined), fc.double(), fc.constant(-0), fc.date()] }));

  it('gives exactly the general walk\'s text, or its refusal, for any value in any key order', () => {
    fc.assert(
      fc.property(values, (v) => {
        for (const x of [v, sortedCopy(v)]) {
          let walked: string | Error;
          try {
            walked = canonicalJsonByWalk(x);
          } catch (e) {
            walked = e as Error;
          }
          if (walked instanceof Error) expect(() => canonicalJson(x)).toThrow(walked.message);
          else expect(canonicalJson(x)).toBe(walked);
          // What the store shares as the record's value (or hands the writer thread) must be what a replay parses.
          if (isCanonicalPlain(x)) expect(JSON.parse(JSON.stringify(x))).toStrictEqual(x);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('leaves integer-like keys, -0, undefined and toJSON to the general path with the same result', () => {
    expect(canonicalJson({ '10': 1, '9': 2 })).toBe('{"10":1,"9":2}');
    expect(canonicalJson({ a: -0, b: [undefined] })).toBe('{"a":0,"b":[null]}');
    expect(isCanonicalPlain({ a: -0 })).toBe(false);
    expect(isCanonicalPlain({ a: [0, -0] })).toBe(false);
    expect(canonicalJson({ a: 1, b: undefined })).toBe('{"a":1}');
    expect(canonicalJson({ a: new Date(0) })).toBe('{"a":"1970-01-01T00:00:00.000Z"}');
    expect(() => canonicalJson({ a: Infinity })).toThrow(/non-finite/);
  });
});

describe('record hashing', () => {
  const row = {
    position: 7,
    streamId: 'escrow-"1"',
    streamVersion: 2,
    type: 'escrow.created',
    schemaVersion: 1,
    dataJson: canonicalJson({ b: '10', a: 1 }),
    metadataJson: canonicalJson({ actor: { kind: 'admin' } }),
    time: '2024-01-01T00:00:00.000Z',
  };

  it('hand-assembled record JSON equals canonicalJson of the record object', () => {
    const obj = {
      position: row.position,
      streamId: row.streamId,
      streamVersion: row.streamVersion,
      type: row.type,
      schemaVersion: row.schemaVersion,
      data: JSON.parse(row.dataJson),
      metadata: JSON.parse(row.metadataJson),
      time: row.time,
    };
    expect(recordCanonicalJson(row)).toBe(canonicalJson(obj));
  });

  it('is sha256 of prevHash + canonical record', () => {
    const expected = createHash('sha256').update('abc' + recordCanonicalJson(row)).digest('hex');
    expect(eventHash('abc', row)).toBe(expected);
  });
});
