/** The amount arithmetic's Number fast path gives exactly what BigInt gives, on any decimal strings. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { add, lte, sub } from '../../src/machines/amounts.js';

const decimal = fc.oneof(
  fc.bigInt({ min: 0n, max: 10n ** 15n - 1n }).map(String),
  fc.bigInt({ min: 0n, max: 10n ** 30n }).map(String),
  fc.constantFrom('0', '000123', '999999999999999', '1000000000000000', '9007199254740993'),
);

describe('amounts', () => {
  it('add, sub and lte equal BigInt arithmetic', () => {
    fc.assert(
      fc.property(decimal, decimal, (a, b) => {
        expect(add(a, b)).toBe((BigInt(a) + BigInt(b)).toString());
        expect(sub(a, b)).toBe((BigInt(a) - BigInt(b)).toString());
        expect(lte(a, b)).toBe(BigInt(a) <= BigInt(b));
      }),
      { numRuns: 2000 },
    );
  });
  it('odd forms keep the BigInt behaviour', () => {
    expect(() => add('1e3', '1')).toThrow(SyntaxError);
    expect(add('-5', '3')).toBe('-2');
  });
});
