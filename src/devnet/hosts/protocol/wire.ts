/**
 * The JSON a real devshard host reads and writes (gonka 8a35022 devshard/transport/types.go:
 * DiffJSON, PayloadJSON, InferenceRequest, VerifyTimeoutRequest, DiffFromJSON; server.go for the
 * refusal texts). Go `[]byte` fields are std base64; refusals are echo HTTP errors, answered as
 * `{"message": text}` with their status (HostHttpError).
 */
import { fromBinary } from '@bufbuild/protobuf';
import { DiffContentSchema } from '../../../protocol/gen/devshard/v1/diff_pb.js';
import type { Diff } from '../../../protocol/replica.js';
import { decodeStdBase64 } from '../../../network/devshard/host-events.js';
import type { InferencePayload } from '../../../network/devshard/request-body.js';

/** An echo `HTTPError`: answered as `{"message": message}` with `status`. */
export class HostHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'HostHttpError';
  }
}

/** A diff as received, with its wire JSON kept (GET diffs re-encodes it the same way: DiffToJSON). */
export interface ReceivedDiff extends Diff {
  json: { nonce: number; txs: string; user_sig: string; post_state_root?: string };
}

export interface ParsedInferenceRequest {
  diffs: ReceivedDiff[];
  nonce: bigint;
  payload?: InferencePayload;
}

export interface ParsedVerifyTimeout {
  inferenceId: bigint;
  reason: string;
  payload?: InferencePayload;
  /** Decoded later (`decode diff i: …` comes after the reason check). */
  rawDiffs: unknown[];
}

/** A JSON type error, as Go's decoder would refuse the body (the text after the prefix is ours). */
class JsonShapeError extends Error {}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function uint(o: Record<string, unknown>, key: string): bigint {
  const v = o[key];
  if (v === undefined || v === null) return 0n;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new JsonShapeError(`cannot unmarshal ${JSON.stringify(v)} into Go struct field .${key} of type uint64`);
  return BigInt(v);
}

function int(o: Record<string, unknown>, key: string): bigint {
  const v = o[key];
  if (v === undefined || v === null) return 0n;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new JsonShapeError(`cannot unmarshal ${JSON.stringify(v)} into Go struct field .${key} of type int64`);
  return BigInt(v);
}

function bytes(o: Record<string, unknown>, key: string): Uint8Array {
  const v = o[key];
  if (v === undefined || v === null || v === '') return new Uint8Array(0);
  try {
    return decodeStdBase64(v, key);
  } catch {
    throw new JsonShapeError(`illegal base64 data in field .${key}`);
  }
}

function str(o: Record<string, unknown>, key: string): string {
  const v = o[key];
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new JsonShapeError(`cannot unmarshal ${JSON.stringify(v)} into Go struct field .${key} of type string`);
  return v;
}

function payloadOf(v: unknown): InferencePayload | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObj(v)) throw new JsonShapeError('cannot unmarshal payload into Go struct field .payload of type transport.PayloadJSON');
  return { prompt: bytes(v, 'prompt'), model: str(v, 'model'), inputLength: uint(v, 'input_length'), maxTokens: uint(v, 'max_tokens'), startedAt: int(v, 'started_at') };
}

interface DiffJsonFields {
  nonce: bigint;
  txs: Uint8Array;
  userSig: Uint8Array;
  postStateRoot: Uint8Array;
}

function diffFields(v: unknown): DiffJsonFields {
  if (!isObj(v)) throw new JsonShapeError('cannot unmarshal diff into Go value of type transport.DiffJSON');
  return { nonce: uint(v, 'nonce'), txs: bytes(v, 'txs'), userSig: bytes(v, 'user_sig'), postStateRoot: bytes(v, 'post_state_root') };
}

function listOf(o: Record<string, unknown>, key: string): unknown[] {
  const v = o[key];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new JsonShapeError(`cannot unmarshal ${typeof v} into Go struct field .${key} of type []transport.DiffJSON`);
  return v;
}

const b64 = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64');

/** `DiffFromJSON`: the wire `txs` is DiffContent{nonce, txs}; its error text is `unmarshal diff content: …`. */
function decodeDiff(f: DiffJsonFields): ReceivedDiff {
  let txs;
  try {
    txs = fromBinary(DiffContentSchema, f.txs).txs;
  } catch (e) {
    throw new Error(`unmarshal diff content: ${(e as Error).message}`, { cause: e });
  }
  const json: ReceivedDiff['json'] = { nonce: Number(f.nonce), txs: b64(f.txs), user_sig: b64(f.userSig) };
  if (f.postStateRoot.length > 0) json.post_state_root = b64(f.postStateRoot);
  return { nonce: f.nonce, txs, userSig: f.userSig, postStateRoot: f.postStateRoot, json };
}

function parseJson(body: Uint8Array, goType = 'transport.InferenceRequest'): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(body).toString('utf8'));
  } catch (e) {
    throw new JsonShapeError((e as Error).message);
  }
  if (!isObj(v)) throw new JsonShapeError(`cannot unmarshal ${Array.isArray(v) ? 'array' : typeof v} into Go value of type ${goType}`);
  return v;
}

/** HandleInference: 400 `invalid json: …`, then 400 `decode request: diff i: unmarshal diff content: …`. */
export function parseInferenceRequest(body: Uint8Array): ParsedInferenceRequest {
  let fields: RequestJsonFields;
  try {
    fields = requestFields(parseJson(body));
  } catch (e) {
    if (e instanceof JsonShapeError) throw new HostHttpError(400, `invalid json: ${e.message}`);
    throw e;
  }
  return decodeRequest(fields);
}

interface RequestJsonFields {
  diffs: DiffJsonFields[];
  nonce: bigint;
  payload?: InferencePayload;
  forceAnchor: boolean;
}

function bool(o: Record<string, unknown>, key: string): boolean {
  const v = o[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw new JsonShapeError(`cannot unmarshal ${JSON.stringify(v)} into Go struct field .${key} of type bool`);
  return v;
}

/** `transport.InferenceRequest` (v5 adds `stream` and `force_height_sync_anchor`, both optional). */
function requestFields(o: Record<string, unknown>): RequestJsonFields {
  const diffs = listOf(o, 'diffs').map(diffFields);
  const nonce = uint(o, 'nonce');
  const payload = payloadOf(o.payload);
  bool(o, 'stream');
  const forceAnchor = bool(o, 'force_height_sync_anchor');
  return payload ? { diffs, nonce, payload, forceAnchor } : { diffs, nonce, forceAnchor };
}

/** `HostRequestFromJSON`: 400 `decode request: diff i: unmarshal diff content: …`. */
function decodeRequest(f: RequestJsonFields): ParsedInferenceRequest {
  const diffs = f.diffs.map((d, i) => {
    try {
      return decodeDiff(d);
    } catch (e) {
      throw new HostHttpError(400, `decode request: diff ${i}: ${(e as Error).message}`);
    }
  });
  return f.payload ? { diffs, nonce: f.nonce, payload: f.payload } : { diffs, nonce: f.nonce };
}

/** A v5 request body: JSON, or the JSON a protobuf envelope carried (envelope.ts unwraps it). */
export interface ParsedInferenceRequestV5 extends ParsedInferenceRequest {
  /** `force_height_sync_anchor`: the host's answer carries an Anchor even off cadence. */
  forceAnchor: boolean;
}

/**
 * The JSON of a v5 request (Z5 transport/envelope.go `UnwrapInferenceRequestBody`, then
 * `HostRequestFromJSON`): a JSON error is 400 `decode body: <context>: <detail>` (`context` says
 * which JSON it was), a diff error 400 `decode request: diff i: …`.
 */
export function parseInferenceRequestJsonV5(json: Uint8Array, context: string): ParsedInferenceRequestV5 {
  let fields: RequestJsonFields;
  try {
    fields = requestFields(parseJson(json, 'transport.InferenceRequest'));
  } catch (e) {
    if (e instanceof JsonShapeError) throw new HostHttpError(400, `decode body: ${context}: ${e.message}`);
    throw e;
  }
  return { ...decodeRequest(fields), forceAnchor: fields.forceAnchor };
}

export interface ParsedVerifyErrorMiss {
  inferenceId: bigint;
  finishTx: Uint8Array;
  responsePayload: Uint8Array;
  /** Decoded later (`decode diff i: …`). */
  rawDiffs: unknown[];
}

/** HandleVerifyErrorMiss (Z5): any JSON error is 400 `invalid json` (no detail). */
export function parseVerifyErrorMiss(body: Uint8Array): ParsedVerifyErrorMiss {
  try {
    const o = parseJson(body);
    return { inferenceId: uint(o, 'inference_id'), rawDiffs: listOf(o, 'diffs'), finishTx: bytes(o, 'finish_tx'), responsePayload: bytes(o, 'response_payload') };
  } catch (e) {
    if (e instanceof JsonShapeError) throw new HostHttpError(400, 'invalid json');
    throw e;
  }
}

/** HandleVerifyTimeout: any JSON error is 400 `invalid json` (no detail). */
export function parseVerifyTimeout(body: Uint8Array): ParsedVerifyTimeout {
  try {
    const o = parseJson(body);
    const payload = payloadOf(o.payload);
    const out: ParsedVerifyTimeout = { inferenceId: uint(o, 'inference_id'), reason: str(o, 'reason'), rawDiffs: listOf(o, 'diffs') };
    if (payload) out.payload = payload;
    return out;
  } catch (e) {
    if (e instanceof JsonShapeError) throw new HostHttpError(400, 'invalid json');
    throw e;
  }
}

/** The catch-up diffs of a verify-timeout request: 400 `decode diff i: …`. */
export function decodeTimeoutDiffs(raw: unknown[]): ReceivedDiff[] {
  return raw.map((v, i) => {
    try {
      return decodeDiff(diffFields(v));
    } catch (e) {
      throw new HostHttpError(400, `decode diff ${i}: ${(e as Error).message}`);
    }
  });
}
