/**
 * A host's vote on a timeout claim (gonka 8a35022 devshard/host/timeout.go `VerifyRefusedTimeout`,
 * `VerifyExecutionTimeout`; transport/server.go `HandleVerifyTimeout`, `signTimeoutVote`).
 * Errors are answered 500 with their text: `inference N not found` (not live here),
 * `inference N: expected pending, got S` / `expected started, got S` (S the numeric status),
 * `no payload for refused timeout verification`. Otherwise accept or reject:
 * - refused: reject before `started_at + refusal_timeout`, or when this host's mempool holds a
 *   ConfirmStart or Finish of it, or the payload does not match the Start; else accept.
 * - execution: reject before `confirmed_at + execution_timeout`, or when this host's mempool (or the
 *   executor's, asked as a peer) holds its Finish; else accept.
 * An accepted vote is signed over TimeoutVoteContent{escrow_id, id, reason, accept: true} by this
 * host's key, voter_slot its primary (lowest) slot.
 * Simplified: the refused path does not challenge the executor for a receipt (`ChallengeReceipt`):
 * gonka does so only when peer clients are wired, and a failed challenge accepts anyway.
 */
import type { DevshardTx } from '../../../protocol/gen/devshard/v1/diff_pb.js';
import { TimeoutReason } from '../../../protocol/gen/devshard/v1/tx_pb.js';
import { InferenceStatus } from '../../../protocol/inference-record.js';
import { timeoutVoteBytes } from '../../../protocol/preimages.js';
import { signMessage } from '../../../protocol/signatures.js';
import type { InferencePayload } from '../../../network/devshard/request-body.js';
import { payloadMismatch } from './receipt.js';
import type { HostSession } from './session.js';
import { HostHttpError } from './wire.js';

/** `TimeoutReasonFromString`: 400 `unknown timeout reason: X`. */
export function timeoutReason(s: string): TimeoutReason {
  if (s === 'refused') return TimeoutReason.REFUSED;
  if (s === 'execution') return TimeoutReason.EXECUTION;
  throw new HostHttpError(400, `unknown timeout reason: ${s}`);
}

const mentions = (txs: readonly DevshardTx[], id: bigint, kinds: ReadonlyArray<DevshardTx['tx']['case']>): boolean =>
  txs.some((tx) => kinds.includes(tx.tx.case) && (tx.tx.value as { inferenceId?: bigint } | undefined)?.inferenceId === id);

export interface TimeoutVoteInput {
  inferenceId: bigint;
  reason: TimeoutReason;
  payload?: InferencePayload;
  nowSeconds: bigint;
  /** The executor's mempool, when this host can ask it (a peer client). */
  executorMempool?: () => readonly DevshardTx[] | undefined;
}

export function decideTimeout(session: HostSession, i: TimeoutVoteInput): boolean {
  const rec = session.replica.inference(i.inferenceId);
  if (!rec) throw new HostHttpError(500, `inference ${i.inferenceId} not found`);
  const cfg = session.replica.config;
  const local = session.mempoolTxs();
  if (i.reason === TimeoutReason.REFUSED) {
    if (rec.status !== InferenceStatus.Pending) throw new HostHttpError(500, `inference ${i.inferenceId}: expected pending, got ${rec.status}`);
    if (i.nowSeconds - rec.startedAt < cfg.refusalTimeout) return false;
    if (mentions(local, i.inferenceId, ['confirmStart', 'finishInference'])) return false;
    if (!i.payload) throw new HostHttpError(500, 'no payload for refused timeout verification');
    if (payloadMismatch(i.payload, rec) !== undefined) return false;
    return true;
  }
  if (rec.status !== InferenceStatus.Started) throw new HostHttpError(500, `inference ${i.inferenceId}: expected started, got ${rec.status}`);
  if (i.nowSeconds - rec.confirmedAt < cfg.executionTimeout) return false;
  if (mentions(local, i.inferenceId, ['finishInference'])) return false;
  const remote = i.executorMempool?.();
  if (remote && mentions(remote, i.inferenceId, ['finishInference'])) return false;
  return true;
}

/** `signTimeoutVote`: the accept vote's signature and the voter slot. */
export function signTimeoutVote(session: HostSession, inferenceId: bigint, reason: TimeoutReason): { signature: Uint8Array; voterSlot: number } {
  return { signature: signMessage(timeoutVoteBytes(session.escrowId, inferenceId, reason, true), session.host.privateKey), voterSlot: session.primarySlot };
}

/** `RecoveryTxsFor` (Z5 host/timeout.go): the ConfirmStart and Finish txs of one inference, in mempool order. */
export function recoveryTxsFor(txs: readonly DevshardTx[], id: bigint): DevshardTx[] {
  return txs.filter((tx) => (tx.tx.case === 'confirmStart' || tx.tx.case === 'finishInference') && tx.tx.value.inferenceId === id);
}
