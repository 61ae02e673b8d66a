/**
 * The body of a v5 `chat/completions` request (zpoken/gonka@86cff503 devshard/transport/envelope.go
 * `UnwrapInferenceRequestBody`; proto/devshard/v1/inference_envelope.proto): after trimming
 * whitespace, a body whose first byte is `{` is the JSON InferenceRequest itself (a top-level
 * `"message"` key refused); anything else is a protobuf InferenceRequestEnvelope{1 schema_version,
 * 2 height_sync, 3 inference_request_json} whose field 3 holds that JSON. The request-leg
 * height_sync is only audited by a real host, never a reason to refuse, so it is parsed and dropped.
 * Refusals are 400 `decode body: …`:
 *   `empty body` · `deprecated JSON inference envelope (top-level "message") is not supported; use
 *   protobuf InferenceRequestEnvelope / InferenceResponseEnvelope` · `decode legacy inference
 *   request json: …` · `decode inference request envelope protobuf: …` · `inference_request_json
 *   is empty` · `decode inference request json: …`.
 */
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import { HostHttpError, parseInferenceRequestJsonV5, type ParsedInferenceRequestV5 } from './wire.js';

const DEPRECATED_MESSAGE_KEY =
  'deprecated JSON inference envelope (top-level "message") is not supported; use protobuf InferenceRequestEnvelope / InferenceResponseEnvelope';

/** protobuf-go's text for bytes that are not a message (the detail differs by cause; this is its common form). */
const INVALID_WIRE = 'proto: cannot parse invalid wire-format data';

const isSpace = (b: number): boolean => b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;

function trim(body: Uint8Array): Uint8Array {
  let a = 0;
  let z = body.length;
  while (a < z && isSpace(body[a]!)) a++;
  while (z > a && isSpace(body[z - 1]!)) z--;
  return body.subarray(a, z);
}

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Reads every field of a message, checking its wire format (and proto3 strings' UTF-8) without keeping it. */
function checkSection(bytes: Uint8Array): void {
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if ((no === 3 || no === 6) && wt === WireType.LengthDelimited) fatalUtf8.decode(r.bytes());
    else r.skip(wt, no);
  }
}

/** InferenceRequestEnvelope: the inner JSON (field 3), the other fields checked and dropped. */
function envelopeJson(bytes: Uint8Array): Uint8Array {
  let json: Uint8Array = new Uint8Array(0);
  try {
    const r = new BinaryReader(bytes);
    while (r.pos < r.len) {
      const [no, wt] = r.tag();
      if (no === 1 && wt === WireType.Varint) r.int32();
      else if (no === 2 && wt === WireType.LengthDelimited) checkSection(r.bytes());
      else if (no === 3 && wt === WireType.LengthDelimited) json = r.bytes();
      else r.skip(wt, no);
    }
  } catch (e) {
    const detail = e instanceof TypeError && /encoded data was not valid/i.test(e.message) ? 'proto: invalid UTF-8' : INVALID_WIRE;
    throw new HostHttpError(400, `decode body: decode inference request envelope protobuf: ${detail}`);
  }
  return json;
}

function hasTopLevelMessageKey(json: Uint8Array): boolean {
  try {
    const v: unknown = JSON.parse(Buffer.from(json).toString('utf8'));
    return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.hasOwn(v, 'message');
  } catch {
    // Not a JSON object: the decode below says why.
    return false;
  }
}

export function unwrapInferenceRequest(body: Uint8Array): ParsedInferenceRequestV5 {
  const raw = trim(body);
  if (raw.length === 0) throw new HostHttpError(400, 'decode body: empty body');
  if (raw[0] === 0x7b) {
    if (hasTopLevelMessageKey(raw)) throw new HostHttpError(400, `decode body: ${DEPRECATED_MESSAGE_KEY}`);
    return parseInferenceRequestJsonV5(raw, 'decode legacy inference request json');
  }
  const json = envelopeJson(raw);
  if (json.length === 0) throw new HostHttpError(400, 'decode body: inference_request_json is empty');
  return parseInferenceRequestJsonV5(json, 'decode inference request json');
}
