/**
 * Go-canonical JSON and the prompt hash (gonka 8a35022 devshard/json.go `CanonicalizeJSON`,
 * `CanonicalPromptHash`). Go decodes the prompt into `interface{}` (objects → maps, numbers →
 * float64, invalid UTF-8 → U+FFFD) and re-encodes it with `encoding/json` (Go 1.24): map keys sorted
 * by their UTF-8 bytes, no HTML escaping, float64 printed shortest with an exponent only below 1e-6
 * or from 1e21 up, U+2028/U+2029 escaped, the trailing newline trimmed. `JSON.stringify` differs
 * (key order, U+2028/2029, lone surrogates, -0), so the encoder is written out here.
 */
import { isUtf8 } from 'node:buffer';
import { hash } from 'node:crypto';

/** The prompt is not JSON Go can decode (Go's error is `canonicalize json: …`). */
export class CanonicalJsonError extends Error {}

/** A character Go writes differently from itself: quote, backslash, controls, U+2028/2029, surrogates. */
// eslint-disable-next-line no-control-regex -- the control characters are the ones Go escapes
const NEEDS_CARE = /[\u0000-\u001f"\\\u2028\u2029\ud800-\udfff]/;
const LINE_SEPARATORS = /[\u2028\u2029]/g;
/** String#toWellFormed (ES2024, in Node 20; our TypeScript lib is older): lone surrogates become U+FFFD. */
const toWellFormed = (s: string): string => (s as string & { toWellFormed(): string }).toWellFormed();

function encodeString(s: string): string {
  if (!NEEDS_CARE.test(s)) return `"${s}"`;
  // JSON.stringify escapes what Go escapes, the same way (\b \f \n \r \t, other controls as
  // lowercase \u00xx, quote, backslash; not <, >, & or U+007F), except two things: Go also escapes
  // U+2028/2029, and Go holds a lone surrogate as U+FFFD (toWellFormed) where JSON.stringify escapes it.
  return JSON.stringify(toWellFormed(s)).replace(LINE_SEPARATORS, (c) => (c === '\u2028' ? '\\u2028' : '\\u2029'));
}

/** Go's encoding/json float64 form (encode.go `floatEncoder`); JS's shortest digits are the same. */
function encodeNumber(n: number): string {
  if (!Number.isFinite(n)) throw new CanonicalJsonError('canonicalize json: number out of range');
  if (n === 0) return Object.is(n, -0) ? '-0' : '0';
  // Number#toString switches to exponent form at the same bounds as Go (1e-6, 1e21) and prints
  // exponents without padding ("1e-7", "1e+21"), which is what Go's cleanup of "e-07" leaves.
  return String(n);
}

const compareUtf8 = (a: string, b: string): number => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
const compareCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const ABOVE_D800 = /[\ud800-\uffff]/;

function encodeValue(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'string') return encodeString(v);
  if (typeof v === 'number') return encodeNumber(v);
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (Array.isArray(v)) return `[${v.map(encodeValue).join(',')}]`;
  const obj = v as Record<string, unknown>;
  // Two keys that differ only in invalid UTF-16 collapse to one in Go; last one wins, as in Go's decoder.
  const entries = new Map<string, unknown>();
  for (const k of Object.keys(obj)) entries.set(normalizeKey(k), obj[k]);
  const keys = [...entries.keys()];
  // Below U+D800 UTF-16 code units sort as UTF-8 bytes do: plain comparison, no buffers (the usual keys).
  keys.sort(keys.some((k) => ABOVE_D800.test(k)) ? compareUtf8 : compareCodeUnits);
  return `{${keys.map((k) => `${encodeString(k)}:${encodeValue(entries.get(k))}`).join(',')}}`;
}

/** A key as Go holds it after decoding (lone surrogates are U+FFFD). */
const normalizeKey = (k: string): string => k.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');

/** Parses JSON text as Go's decoder fills `interface{}`: numbers must fit a float64. */
function parseGo(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new CanonicalJsonError(`canonicalize json: ${(e as Error).message}`);
  }
  const check = (v: unknown): void => {
    if (typeof v === 'number' && !Number.isFinite(v)) throw new CanonicalJsonError('canonicalize json: number out of range for float64');
    if (Array.isArray(v)) v.forEach(check);
    else if (v && typeof v === 'object') Object.values(v).forEach(check);
  };
  check(value);
  return value;
}

/**
 * UTF-8 bytes to text as Go reads them (`utf8.DecodeRune`): each byte that does not start a valid
 * sequence becomes one U+FFFD (a truncated 3-byte sequence is two, where TextDecoder makes one).
 */
export function decodeUtf8AsGo(b: Uint8Array): string {
  // Valid UTF-8 decodes the same in Go and in Node; only invalid bytes need Go's own rule below,
  // whose string built a character at a time cost ~27 µs per KB of prompt.
  if (isUtf8(b)) return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('utf8');
  let out = '';
  let i = 0;
  const cont = (k: number) => i + k < b.length && (b[i + k]! & 0xc0) === 0x80;
  while (i < b.length) {
    const c = b[i]!;
    if (c < 0x80) {
      out += String.fromCharCode(c);
      i++;
      continue;
    }
    let cp = -1;
    let n = 1;
    if (c >= 0xc2 && c <= 0xdf && cont(1)) {
      cp = ((c & 0x1f) << 6) | (b[i + 1]! & 0x3f);
      n = 2;
    } else if (c >= 0xe0 && c <= 0xef && cont(1) && cont(2)) {
      const c1 = b[i + 1]!;
      if ((c !== 0xe0 || c1 >= 0xa0) && (c !== 0xed || c1 <= 0x9f)) {
        cp = ((c & 0x0f) << 12) | ((c1 & 0x3f) << 6) | (b[i + 2]! & 0x3f);
        n = 3;
      }
    } else if (c >= 0xf0 && c <= 0xf4 && cont(1) && cont(2) && cont(3)) {
      const c1 = b[i + 1]!;
      if ((c !== 0xf0 || c1 >= 0x90) && (c !== 0xf4 || c1 <= 0x8f)) {
        cp = ((c & 0x07) << 18) | ((c1 & 0x3f) << 12) | ((b[i + 2]! & 0x3f) << 6) | (b[i + 3]! & 0x3f);
        n = 4;
      }
    }
    if (cp < 0) {
      out += '\ufffd';
      i++;
    } else {
      out += String.fromCodePoint(cp);
      i += n;
    }
  }
  return out;
}

/** Canonical JSON text (devshard/json.go `CanonicalizeJSON`) of JSON bytes or text. */
export function canonicalizeJson(input: Uint8Array | string): string {
  // Go reads bytes: inside strings an invalid byte becomes U+FFFD (outside strings it is a syntax error either way).
  const text = typeof input === 'string' ? input : decodeUtf8AsGo(input);
  return encodeValue(parseGo(text));
}

/** sha256 of the canonical JSON: MsgStartInference.prompt_hash (devshard/json.go `CanonicalPromptHash`). */
// crypto hashes the string's UTF-8 itself: no copy of the encoded text (the canonical text has no lone surrogates).
export const canonicalPromptHash = (prompt: Uint8Array | string): Uint8Array => new Uint8Array(hash('sha256', canonicalizeJson(prompt), 'buffer') as unknown as Buffer);
