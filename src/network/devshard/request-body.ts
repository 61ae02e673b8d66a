/**
 * The body of `POST {inference_url}{prefix}/sessions/{escrow_id}/chat/completions`:
 * `InferenceRequest{diffs:[{nonce, txs, user_sig, post_state_root}], nonce, payload}`. Byte fields
 * are Go `[]byte` in JSON (std base64); `txs` is the proto `DiffContent{nonce, txs}` (the wire form:
 * no escrow id, no root; the user signature covers the longer signed form). The payload's prompt is
 * the client's OpenAI body bytes; `stream` lives inside that body.
 * Source: gonka-ai/gonka 8a35022 devshard/transport/types.go (DiffJSON, PayloadJSON,
 * InferenceRequest, DiffToJSON); routes: devshard/server/routes.go, transport/client.go
 * (DefaultRoutePrefix "/v1/devshard").
 */
import type { DevshardTx } from '../../protocol/gen/devshard/v1/diff_pb.js';
import { diffWireBytes } from '../../protocol/preimages.js';

import { LEGACY_ROUTE_PREFIX } from '../../protocol/versions.js';

/** A signed diff. Not changed once made: its JSON is cached per object (a diff rides along as catch-up in several requests). */
export interface SignedDiff {
  readonly nonce: bigint;
  readonly txs: readonly DevshardTx[];
  readonly userSig: Uint8Array;
  readonly postStateRoot?: Uint8Array;
}

export interface InferencePayload {
  prompt: Uint8Array;
  model: string;
  inputLength: bigint;
  maxTokens: bigint;
  startedAt: bigint;
}

const b64 = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64');

const wireCache = new WeakMap<object, Uint8Array>();

/**
 * The wire bytes of a diff's txs: DiffContent{nonce, txs}. Cached per diff object (a diff is not
 * changed once signed): the request body and the log's DevshardDiffSent both need them.
 */
export function wireTxs(diff: Pick<SignedDiff, 'nonce' | 'txs'>): Uint8Array {
  let w = wireCache.get(diff);
  if (w === undefined) {
    w = diffWireBytes(diff.nonce, diff.txs);
    wireCache.set(diff, w);
  }
  return w;
}

/**
 * The JSON text of an InferenceRequest. Integers are written as JSON numbers (Go reads uint64 from
 * a number literal exactly, beyond 2^53 too), so they are spliced in as text, not as JS numbers.
 */
export function inferenceRequestJson(diffs: readonly SignedDiff[], nonce: bigint, payload?: InferencePayload): string {
  const p = payload ? `,"payload":${payloadJson(payload)}` : '';
  return `{"diffs":${diffsJson(diffs)},"nonce":${nonce}${p}}`;
}

const diffJsonCache = new WeakMap<SignedDiff, string>();

/** One diff's JSON (DiffJSON), cached per diff object. */
function diffJson(d: SignedDiff): string {
  let j = diffJsonCache.get(d);
  if (j === undefined) {
    const root = d.postStateRoot && d.postStateRoot.length > 0 ? `,"post_state_root":"${b64(d.postStateRoot)}"` : '';
    j = `{"nonce":${d.nonce},"txs":"${b64(wireTxs(d))}","user_sig":"${b64(d.userSig)}"${root}}`;
    diffJsonCache.set(d, j);
  }
  return j;
}

const diffsJson = (diffs: readonly SignedDiff[]): string => `[${diffs.map(diffJson).join(',')}]`;

const payloadJson = (p: InferencePayload): string =>
  `{"prompt":"${b64(p.prompt)}","model":${JSON.stringify(p.model)},"input_length":${p.inputLength},"max_tokens":${p.maxTokens},"started_at":${p.startedAt}}`;

/**
 * The body of `POST …/verify-timeout`: `{inference_id, reason: "refused"|"execution", payload?, diffs?}`
 * (gonka 8a35022 devshard/transport/types.go VerifyTimeoutRequest; host/timeout.go).
 */
export function verifyTimeoutJson(diffs: readonly SignedDiff[], inferenceId: bigint, reason: 'refused' | 'execution', payload?: InferencePayload): string {
  const p = payload ? `,"payload":${payloadJson(payload)}` : '';
  return `{"inference_id":${inferenceId},"reason":"${reason}"${p},"diffs":${diffsJson(diffs)}}`;
}

/**
 * The body of v5's `POST …/verify-error-miss`: `{inference_id, diffs?, finish_tx, response_payload}`,
 * the Finish as DevshardTx bytes and the answer as the bytes its response_hash covers, both std
 * base64 (Z5 devshard/transport/types.go VerifyErrorMissRequest, `diffs` omitted when empty).
 */
export function verifyErrorMissJson(diffs: readonly SignedDiff[], inferenceId: bigint, finishTx: Uint8Array, responsePayload: Uint8Array): string {
  const d = diffs.length > 0 ? `,"diffs":${diffsJson(diffs)}` : '';
  return `{"inference_id":${inferenceId}${d},"finish_tx":"${b64(finishTx)}","response_payload":"${b64(responsePayload)}"}`;
}

/** `{prefix}/sessions/{escrow_id}/{route}` under a host's inference_url. */
export function sessionUrl(inferenceUrl: string, escrowId: string, route: string, prefix = LEGACY_ROUTE_PREFIX): string {
  return `${inferenceUrl.replace(/\/+$/, '')}${prefix}/sessions/${encodeURIComponent(escrowId)}/${route}`;
}
