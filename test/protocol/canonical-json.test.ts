/**
 * Go-canonical JSON and the prompt hash (gonka 8a35022 devshard/json.go CanonicalizeJSON,
 * CanonicalPromptHash; devshard/json_test.go): Go's encoding/json over interface{} (float64
 * numbers, keys sorted by UTF-8 bytes, no HTML escaping, U+2028/2029 escaped, newline trimmed).
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalizeJson, canonicalPromptHash, CanonicalJsonError, decodeUtf8AsGo } from '../../src/protocol/canonical-json.js';
import { toHex, utf8 } from '../../src/protocol/bytes.js';

describe('canonical JSON (devshard/json.go)', () => {
  it('TestCanonicalizeJSON_SortsKeys / _NoTrailingNewline / _Idempotent / _InvalidJSON', () => {
    expect(canonicalizeJson('{"b":2,"a":1}')).toBe('{"a":1,"b":2}');
    expect(canonicalizeJson('{"key":"value"}\n').endsWith('\n')).toBe(false);
    const once = canonicalizeJson('{"z":3,"a":1,"m":2}');
    expect(canonicalizeJson(once)).toBe(once);
    expect(() => canonicalizeJson('not json')).toThrow(CanonicalJsonError);
  });

  it('TestCanonicalPromptHash_MatchesCanonicalThenSha256 / _KeyOrderIndependent / _WhitespaceInsensitive', () => {
    const a = utf8('{"model":"llama","messages":[{"role":"user","content":"test"}]}');
    const b = utf8('{ "messages" : [ {"content":"test", "role":"user"} ],\n "model":"llama" }');
    const expected = createHash('sha256').update('{"messages":[{"content":"test","role":"user"}],"model":"llama"}').digest('hex');
    expect(toHex(canonicalPromptHash(a))).toBe(expected);
    expect(toHex(canonicalPromptHash(b))).toBe(expected);
  });

  it('numbers are float64 printed as Go prints them', () => {
    expect(canonicalizeJson('[1.0, 1e21, 1e20, 1e-7, 0.000001, 123456789012345678901234, 12345678901234567890, -0, 0.1, 1.5e300, -2.5e-8]')).toBe(
      '[1,1e+21,100000000000000000000,1e-7,0.000001,1.2345678901234569e+23,12345678901234567000,-0,0.1,1.5e+300,-2.5e-8]',
    );
    expect(() => canonicalizeJson('[1e400]')).toThrow(CanonicalJsonError);
  });

  it('strings: no HTML escaping, U+2028/2029 escaped, control characters as Go writes them', () => {
    expect(canonicalizeJson('"<a href=\\"x\\">&amp;</a>"')).toBe('"<a href=\\"x\\">&amp;</a>"');
    expect(canonicalizeJson('"\\u2028\\u2029"')).toBe('"\\u2028\\u2029"');
    expect(canonicalizeJson('"\\u0001\\b\\f\\n\\r\\t\\u001f\\u007f\\/"')).toBe('"\\u0001\\b\\f\\n\\r\\t\\u001f\u007f/"');
    expect(canonicalizeJson('"\\ud800x"')).toBe('"\ufffdx"'); // a lone surrogate decodes to U+FFFD
    expect(JSON.stringify('\u2028')).not.toBe(canonicalizeJson('"\\u2028"')); // why JSON.stringify will not do
  });

  it('invalid UTF-8 in a string: one U+FFFD per bad byte, as Go decodes (not TextDecoder)', () => {
    const bytes = (...parts: Array<string | number[]>) => Uint8Array.from(parts.flatMap((p) => (typeof p === 'string' ? [...utf8(p)] : p)));
    expect(canonicalizeJson(bytes('"a', [0xe2, 0x82], 'b"'))).toBe('"a\ufffd\ufffdb"');
    expect(canonicalizeJson(bytes('"', [0xc0, 0x80], '"'))).toBe('"\ufffd\ufffd"');
    expect(canonicalizeJson(bytes('"', [0xed, 0xa0, 0x80], '"'))).toBe('"\ufffd\ufffd\ufffd"');
    expect(canonicalizeJson(bytes('"', [0xf0, 0x9f, 0x98, 0x80], '"'))).toBe('"😀"');
    expect(decodeUtf8AsGo(bytes([0xe2, 0x82, 0xac]))).toBe('€');
    expect(() => canonicalizeJson(bytes([0xef, 0xbb, 0xbf], '{}'))).toThrow(CanonicalJsonError); // a BOM is not JSON to Go
  });

  it('any string, lone surrogates and U+2028/2029 included, is written as Go writes it', () => {
    // Go: a lone surrogate decodes to U+FFFD; U+2028/2029 and controls are escaped; nothing else is.
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), fc.constantFrom('', '\u2028', '\u2029', '\n', '\u007f', '"', '\\'), (s, extra) => {
        const text = s + extra;
        const out = canonicalizeJson(JSON.stringify(text));
        // eslint-disable-next-line no-control-regex -- raw control characters are what must not appear
        expect(out).not.toMatch(/[\u2028\u2029\u0000-\u001f]/);
        expect(JSON.parse(out)).toBe(text.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd'));
      }),
      { numRuns: 300 },
    );
  });

  it('bytes decode as Go reads them: valid UTF-8 as written, a bad byte as one U+FFFD', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.string({ unit: 'grapheme', maxLength: 3 }).map((t) => [...utf8(t)]), fc.integer({ min: 0x80, max: 0xff }).map((b) => [b])), { maxLength: 20 }), (parts) => {
        const bytes = Uint8Array.from(parts.flat());
        const out = decodeUtf8AsGo(bytes);
        // Valid input round-trips; invalid input never loses the valid text around a bad byte.
        if (Buffer.from(bytes).equals(Buffer.from(out, 'utf8'))) expect(out).not.toContain('\ufffd');
        else expect(out).toContain('\ufffd');
        for (const p of parts) if (p.length > 1 || p[0]! < 0x80) expect(out).toContain(Buffer.from(p).toString('utf8'));
      }),
      { numRuns: 300 },
    );
  });

  it('keys are ordered by their UTF-8 bytes, at every depth (not by UTF-16 units)', () => {
    const text = '{"😀":1,"\\ue000":2,"é":3,"z":{"b":1,"a":2},"A":4}';
    expect(canonicalizeJson(text)).toBe('{"A":4,"z":{"a":2,"b":1},"é":3,"\ue000":2,"😀":1}');
    // duplicate keys: the last one wins, as in Go's decoder
    expect(canonicalizeJson('{"a":1,"a":2}')).toBe('{"a":2}');
  });

  it('agrees with JSON.parse on structure: canonical output parses back to the same value', () => {
    fc.assert(
      fc.property(fc.jsonValue({ noUnicodeString: false }), (v) => {
        const text = JSON.stringify(v);
        const out = canonicalizeJson(text);
        expect(JSON.parse(out)).toEqual(JSON.parse(text));
        expect(canonicalizeJson(out)).toBe(out);
      }),
      { numRuns: 200 },
    );
  });
});
