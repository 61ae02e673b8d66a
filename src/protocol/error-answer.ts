/**
 * v5 error-miss: what counts as an answer that is an error, over the bytes the executor's Finish
 * pins (zpoken/gonka@86cff503 common/completionapi/terminal_error.go `IsTerminalErrorResponse`, the
 * consensus rule every host and the gateway run; completionapi `SerializedStreamedResponse`, the
 * `{"events":[…]}` form a stream is stored and hashed in). One implementation for both sides: the
 * simulated hosts vote with it (devnet/hosts/protocol/error-miss-vote.ts) and the gateway only asks
 * for votes on a payload it accepts (network/devshard/error-miss.ts).
 */
import { bytesEqual, sha256 } from './bytes.js';

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Go's encoding/json field lookup: keys match case-insensitively, the last matching key wins. */
function goField(o: Record<string, unknown>, name: string): unknown {
  let out: unknown;
  for (const [k, v] of Object.entries(o)) if (k.toLowerCase() === name) out = v;
  return out;
}

/** A JSON value Go decodes into a `string` field: a string or null, else the whole decode fails. */
const stringOrNull = (v: unknown): v is string | null | undefined => v === undefined || v === null || typeof v === 'string';

/** `sseDataJSON`: the payload of a `data:` line, except empty and `[DONE]`. */
function sseData(line: string): string | undefined {
  const t = line.trim();
  if (!t.startsWith('data:')) return undefined;
  const p = t.slice(5).trim();
  return p === '' || p === '[DONE]' ? undefined : p;
}

/** One event's verdict: an `error` object, or `object: "error"` with a message. Undecodable: not an error. */
function carriesError(payload: string): boolean {
  let v: unknown;
  try {
    v = JSON.parse(payload);
  } catch {
    return false;
  }
  if (!isObj(v)) return false;
  const err = goField(v, 'error');
  const object = goField(v, 'object');
  const message = goField(v, 'message');
  if (!stringOrNull(object) || !stringOrNull(message) || !stringOrNull(goField(v, 'type'))) return false;
  if (err !== undefined && err !== null) {
    if (!isObj(err) || !stringOrNull(goField(err, 'type')) || !stringOrNull(goField(err, 'message'))) return false;
    return true;
  }
  return object === 'error' && typeof message === 'string' && message !== '';
}

/**
 * `IsTerminalErrorResponse`: a streamed answer's stored bytes (`{"events":[…lines…]}`) in which some
 * `data:` event carries an error object, or some `data:` payload is not JSON at all (else a host
 * could veto a miss with junk). A whole (non-streamed) answer never qualifies.
 */
export function isTerminalErrorResponse(payload: Uint8Array): boolean {
  if (payload.length === 0) return false;
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(payload).toString('utf8'));
  } catch {
    return false;
  }
  if (!isObj(v)) return false;
  const events = goField(v, 'events');
  // []string: a null element decodes as "", anything else not a string fails the decode.
  if (!Array.isArray(events) || events.length === 0 || !events.every((e) => e === null || typeof e === 'string')) return false;
  const lines = events.map((e) => (e === null ? '' : (e as string)));
  const datas = lines.map(sseData).filter((p): p is string => p !== undefined);
  if (datas.some(carriesError)) return true;
  return datas.some((p) => {
    try {
      JSON.parse(p);
      return false;
    } catch {
      return true;
    }
  });
}

/** Go's json.Marshal escapes these inside strings (HTML-safe output); JSON.stringify leaves them. */
const GO_HTML_ESCAPES: Record<string, string> = { '<': '\\u003c', '>': '\\u003e', '&': '\\u0026', '\u2028': '\\u2028', '\u2029': '\\u2029' };

/** JSON text as Go's json.Marshal spells it: `<`, `>`, `&`, U+2028/9 escaped (they occur only inside strings in JSON). */
const goHtmlEscaped = (json: string): string => json.replace(/[<>&\u2028\u2029]/g, (c) => GO_HTML_ESCAPES[c]!);

/** A streamed answer's stored form as a real host writes it (Go's json.Marshal of `{"events":[…]}`). */
export const goStoredStreamForm = (lines: readonly string[]): string => goHtmlEscaped(JSON.stringify({ events: lines }));

/**
 * The stored form of a streamed answer, `{"events":["data: …",…,"data: [DONE]"]}`, in the two
 * spellings a host may have hashed: Go's json.Marshal (a real host: `<`, `>`, `&`, U+2028/9
 * escaped) and plain JSON (identical when the answer holds none of those). The characters Go
 * escapes only occur inside strings here, so escaping the whole text is exact.
 */
export function streamedPayloadForms(lines: readonly string[]): Uint8Array[] {
  const plain = JSON.stringify({ events: lines });
  const go = goHtmlEscaped(plain);
  const enc = new TextEncoder();
  return go === plain ? [enc.encode(plain)] : [enc.encode(go), enc.encode(plain)];
}

/** The stored form of `lines` whose sha256 is `responseHash` (what the Finish signed), if any. */
export function streamedPayloadFor(lines: readonly string[], responseHash: Uint8Array): Uint8Array | undefined {
  return streamedPayloadForms(lines).find((p) => bytesEqual(sha256(p), responseHash));
}
