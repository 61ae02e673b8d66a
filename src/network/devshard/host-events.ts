/**
 * The SSE data events a devshard host answers `chat/completions` with, told apart (HTTP 200 only):
 *   1. `{"devshard_receipt":{state_sig, state_hash, nonce, receipt, confirmed_at}}`, before execution
 *      (v5 adds `observed_height`, `observed_block_hash`, and a `height_sync` key beside it: the
 *      host's signed Anchor, read by nothing here yet: our own stamps stay absent);
 *   2. the model's output: OpenAI chunks, or one whole `chat.completion` (non-streamed), then `[DONE]`;
 *   3. `{"devshard_meta":{"mempool":[base64 DevshardTx, …]}}`.
 * A non-executor answers 1 and 3 only; a failure after the receipt ends the stream without 3.
 * Byte fields are Go `[]byte` in JSON: standard padded base64.
 * Source: gonka-ai/gonka 8a35022 devshard/transport/server.go (HandleInference, writeSSEEvent),
 * types.go (DevshardReceiptEvent, DevshardMetaEvent), client.go (handleSSELine, protocolEnvelope).
 */

export interface HostReceipt {
  /** Host signature over sha256(StateSignatureContent); may be absent. */
  stateSig?: Uint8Array;
  /** The host's state root after the request's nonce: must equal ours. */
  stateHash?: Uint8Array;
  nonce: bigint;
  /** The executor's signature over ExecutorReceiptContent (becomes MsgConfirmStart). */
  receipt?: Uint8Array;
  confirmedAt?: bigint;
  /**
   * v5: the executor's stamp, signed inside its receipt (ExecutorReceiptContent 9/10): the
   * MsgConfirmStart made of the receipt must carry it unchanged (Z5 transport/types.go
   * DevshardReceiptEvent `observed_height`, `observed_block_hash`).
   */
  observedHeight?: bigint;
  observedBlockHash?: Uint8Array;
}

export type HostEvent =
  | { kind: 'receipt'; receipt: HostReceipt }
  | { kind: 'meta'; mempool: Uint8Array[] }
  | { kind: 'done' }
  /** Model output: `value` is the parsed JSON (undefined when the data is not JSON, forwarded as text). */
  | { kind: 'output'; data: string; value: unknown };

/** A protocol event the host sent in a shape we cannot read: the answer is bad, not the model's. */
export class HostEventError extends Error {
  override name = 'HostEventError';
}

const STD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Go's base64.StdEncoding: padded, standard alphabet; anything else is refused, not guessed. */
export function decodeStdBase64(text: unknown, field: string): Uint8Array {
  if (typeof text !== 'string' || !STD_BASE64.test(text)) throw new HostEventError(`${field} is not standard base64`);
  return new Uint8Array(Buffer.from(text, 'base64'));
}

const optionalBytes = (o: Record<string, unknown>, key: string, field: string): Uint8Array | undefined =>
  o[key] === undefined || o[key] === null ? undefined : decodeStdBase64(o[key], field);

/** JSON numbers Go wrote from uint64/int64: exact only below 2^53, so read them from the text. */
function integerField(o: Record<string, unknown>, key: string, field: string, raw: string): bigint | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new HostEventError(`${field} is not an integer`);
  if (Number.isSafeInteger(v)) return BigInt(v);
  const m = new RegExp(`"${key}"\\s*:\\s*(-?\\d+)`).exec(raw);
  if (!m) throw new HostEventError(`${field} is not an integer`);
  return BigInt(m[1]!);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Classifies one SSE `data:` payload (the text after "data: "). */
export function readHostEvent(data: string): HostEvent {
  if (data === '[DONE]') return { kind: 'done' };
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return { kind: 'output', data, value: undefined };
  }
  if (isObject(value) && 'devshard_receipt' in value) {
    const r = value.devshard_receipt;
    if (!isObject(r)) throw new HostEventError('devshard_receipt is not an object');
    const nonce = integerField(r, 'nonce', 'devshard_receipt.nonce', data);
    const receipt: HostReceipt = { nonce: nonce ?? 0n };
    const stateSig = optionalBytes(r, 'state_sig', 'devshard_receipt.state_sig');
    const stateHash = optionalBytes(r, 'state_hash', 'devshard_receipt.state_hash');
    const exec = optionalBytes(r, 'receipt', 'devshard_receipt.receipt');
    const confirmedAt = integerField(r, 'confirmed_at', 'devshard_receipt.confirmed_at', data);
    if (stateSig) receipt.stateSig = stateSig;
    if (stateHash) receipt.stateHash = stateHash;
    if (exec) receipt.receipt = exec;
    if (confirmedAt !== undefined) receipt.confirmedAt = confirmedAt;
    const observedHeight = integerField(r, 'observed_height', 'devshard_receipt.observed_height', data);
    const observedBlockHash = optionalBytes(r, 'observed_block_hash', 'devshard_receipt.observed_block_hash');
    if (observedHeight !== undefined) receipt.observedHeight = observedHeight;
    if (observedBlockHash) receipt.observedBlockHash = observedBlockHash;
    return { kind: 'receipt', receipt };
  }
  if (isObject(value) && 'devshard_meta' in value) {
    const m = value.devshard_meta;
    if (!isObject(m)) throw new HostEventError('devshard_meta is not an object');
    const list = m.mempool ?? [];
    if (!Array.isArray(list)) throw new HostEventError('devshard_meta.mempool is not a list');
    return { kind: 'meta', mempool: list.map((t, i) => decodeStdBase64(t, `devshard_meta.mempool[${i}]`)) };
  }
  return { kind: 'output', data, value };
}
