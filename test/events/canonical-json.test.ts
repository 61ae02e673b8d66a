import { describe, expect, it } from 'vitest';
import { CanonicalJsonError, canonicalJson } from '../../src/events/canonical-json.js';
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
