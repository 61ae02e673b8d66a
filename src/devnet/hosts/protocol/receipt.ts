/**
 * The executor's receipt (gonka 8a35022 devshard/host/host.go `signReceipt`, `VerifyPayload`):
 * when the request has a payload and its diff (nonce == request nonce) starts an inference whose
 * executor slot `id % n` this host holds, the payload is checked against the MsgStartInference,
 * ExecutorReceiptContent is signed with confirmed_at = now, and MsgConfirmStart goes into the
 * mempool. Payload refusals (500, after the diffs were applied):
 *   `prompt does not match hash in StartInference` ·
 *   `request payload does not match StartInference params: input_length A vs B` (max_tokens,
 *   started_at, model likewise, in that order).
 */
import { create } from '@bufbuild/protobuf';
import { bytesEqual } from '../../../protocol/bytes.js';
import { canonicalPromptHash } from '../../../protocol/canonical-json.js';
import { DevshardTxSchema } from '../../../protocol/gen/devshard/v1/diff_pb.js';
import type { MsgStartInference } from '../../../protocol/gen/devshard/v1/tx_pb.js';
import { MsgConfirmStartSchema } from '../../../protocol/gen/devshard/v1/tx_pb.js';
import { executorReceiptBytes } from '../../../protocol/preimages.js';
import { signMessage } from '../../../protocol/signatures.js';
import type { InferencePayload } from '../../../network/devshard/request-body.js';
import type { HostSession } from './session.js';
import { HostHttpError, type ReceivedDiff } from './wire.js';

const PROMPT_HASH_MISMATCH = 'prompt does not match hash in StartInference';
const PAYLOAD_MISMATCH = 'request payload does not match StartInference params';

/** `VerifyPayload`: undefined when the payload matches, else Go's text. */
export function payloadMismatch(p: InferencePayload, start: Pick<MsgStartInference, 'promptHash' | 'model' | 'inputLength' | 'maxTokens' | 'startedAt'>): string | undefined {
  let hash: Uint8Array;
  try {
    hash = canonicalPromptHash(p.prompt);
  } catch (e) {
    return `${PROMPT_HASH_MISMATCH}: ${(e as Error).message}`;
  }
  if (!bytesEqual(hash, start.promptHash)) return PROMPT_HASH_MISMATCH;
  if (p.inputLength !== start.inputLength) return `${PAYLOAD_MISMATCH}: input_length ${p.inputLength} vs ${start.inputLength}`;
  if (p.maxTokens !== start.maxTokens) return `${PAYLOAD_MISMATCH}: max_tokens ${p.maxTokens} vs ${start.maxTokens}`;
  if (p.startedAt !== start.startedAt) return `${PAYLOAD_MISMATCH}: started_at ${p.startedAt} vs ${start.startedAt}`;
  if (p.model !== start.model) return `${PAYLOAD_MISMATCH}: model ${p.model} vs ${start.model}`;
  return undefined;
}

export interface ReceiptOutcome {
  receipt?: Uint8Array;
  confirmedAt?: bigint;
  inferenceId?: bigint;
  /** Run the model now (this host is the executor and is not already running or done with it). */
  execute?: { start: MsgStartInference; prompt: Uint8Array; executorSlot: number };
  /** The answer already given once (a retried request): replayed as one data event. */
  cached?: string;
}

export function signReceipt(session: HostSession, diffs: readonly ReceivedDiff[], nonce: bigint, payload: InferencePayload | undefined, nowSeconds: bigint): ReceiptOutcome {
  if (!payload) return {};
  const target = diffs.find((d) => d.nonce === nonce);
  if (!target) return {};
  const n = BigInt(session.groupAddresses.length);
  for (const tx of target.txs) {
    if (tx.tx.case !== 'startInference') continue;
    const start = tx.tx.value;
    const executorSlot = Number(start.inferenceId % n);
    if (!session.ownSlots.includes(executorSlot)) continue;
    const mismatch = payloadMismatch(payload, start);
    if (mismatch) throw new HostHttpError(500, mismatch);
    const confirmedAt = nowSeconds;
    const receipt = signMessage(
      executorReceiptBytes({
        inferenceId: start.inferenceId,
        promptHash: start.promptHash,
        model: start.model,
        inputLength: start.inputLength,
        maxTokens: start.maxTokens,
        startedAt: start.startedAt,
        escrowId: session.escrowId,
        confirmedAt,
      }),
      session.host.privateKey,
    );
    const confirm = create(DevshardTxSchema, {
      tx: { case: 'confirmStart', value: create(MsgConfirmStartSchema, { inferenceId: start.inferenceId, executorSig: receipt, confirmedAt }) },
    });
    session.addToMempool(confirm, session.latestNonce);
    const out: ReceiptOutcome = { receipt, confirmedAt, inferenceId: start.inferenceId };
    if (session.executing.has(start.inferenceId)) return out;
    const cached = session.completed.get(start.inferenceId);
    if (cached !== undefined) return { ...out, cached };
    session.executing.add(start.inferenceId);
    return { ...out, execute: { start, prompt: payload.prompt, executorSlot } };
  }
  return {};
}
