/**
 * A v5 host's vote on an error-miss claim (zpoken/gonka@86cff503 devshard/host/timeout.go
 * `VerifyErrorMiss`, `resolveFinishMessage`; state/machine.go `VerifyFinishProposerSig`;
 * common/completionapi/terminal_error.go `IsTerminalErrorResponse`, shared with the gateway in
 * protocol/error-answer.ts; transport/server.go
 * `HandleVerifyErrorMiss`, `signErrorMissVote`). Local evidence only: the Finish from this host's
 * mempool, else the request's `finish_tx` (a DevshardTx); the answer bytes the Finish's
 * response_hash pins. Every failure rejects with a cause, in this order:
 *   no_finish_tx (no live Started/Finished record, no Finish, or one naming another id, escrow or
 *   executor slot) · hash_mismatch (a Finished record's hash differs) · sig (the Finish's
 *   proposer signature is not the executor slot's key) · no_payload · hash_mismatch (sha256 of the
 *   payload) · not_error_body.
 * An accept is signed over ErrorMissVoteContent{escrow, id, accept: true, response_hash}.
 */
import { fromBinary } from '@bufbuild/protobuf';
import { bytesEqual, sha256 } from '../../../protocol/bytes.js';
import { isTerminalErrorResponse } from '../../../protocol/error-answer.js';
import { DevshardTxSchema, type DevshardTx } from '../../../protocol/gen/devshard/v1/diff_pb.js';
import type { MsgFinishInference } from '../../../protocol/gen/devshard/v1/tx_pb.js';
import { InferenceStatus } from '../../../protocol/inference-record.js';
import { errorMissVoteBytes, finishProposerBytes } from '../../../protocol/preimages.js';
import { recoverAddress, signMessage } from '../../../protocol/signatures.js';
import type { HostSession } from './session.js';

export type ErrorMissRejectCause = 'no_finish_tx' | 'no_payload' | 'sig' | 'hash_mismatch' | 'not_error_body';

export type ErrorMissVerdict = { accept: true; responseHash: Uint8Array } | { accept: false; cause: ErrorMissRejectCause };

/** `resolveFinishMessage`: this host's own mempool first, then the request's tx bytes. */
function resolveFinish(session: HostSession, id: bigint, finishTx: Uint8Array): MsgFinishInference | undefined {
  for (const tx of session.mempoolTxs()) if (tx.tx.case === 'finishInference' && tx.tx.value.inferenceId === id) return tx.tx.value;
  if (finishTx.length === 0) return undefined;
  let tx: DevshardTx;
  try {
    tx = fromBinary(DevshardTxSchema, finishTx);
  } catch {
    return undefined;
  }
  return tx.tx.case === 'finishInference' ? tx.tx.value : undefined;
}

/** `VerifyFinishProposerSig`: the executor slot's cold key, or the warm key bound to that slot. */
function finishSignedByExecutor(session: HostSession, msg: MsgFinishInference): boolean {
  const expected = session.groupAddresses[msg.executorSlot];
  if (expected === undefined) return false;
  let recovered: string;
  try {
    recovered = recoverAddress(finishProposerBytes(msg), msg.proposerSig);
  } catch {
    return false;
  }
  return recovered === expected || session.replica.warmKeys.get(msg.executorSlot) === recovered;
}

export function verifyErrorMiss(session: HostSession, id: bigint, finishTx: Uint8Array, responsePayload: Uint8Array): ErrorMissVerdict {
  const reject = (cause: ErrorMissRejectCause): ErrorMissVerdict => ({ accept: false, cause });
  const rec = session.replica.inference(id);
  if (!rec || (rec.status !== InferenceStatus.Started && rec.status !== InferenceStatus.Finished)) return reject('no_finish_tx');
  const msg = resolveFinish(session, id, finishTx);
  if (!msg || msg.inferenceId !== id || msg.escrowId !== session.escrowId || msg.executorSlot !== rec.executorSlot) return reject('no_finish_tx');
  if (rec.status === InferenceStatus.Finished && !bytesEqual(msg.responseHash, rec.responseHash)) return reject('hash_mismatch');
  if (!finishSignedByExecutor(session, msg)) return reject('sig');
  if (responsePayload.length === 0) return reject('no_payload');
  if (!bytesEqual(sha256(responsePayload), msg.responseHash)) return reject('hash_mismatch');
  if (!isTerminalErrorResponse(responsePayload)) return reject('not_error_body');
  return { accept: true, responseHash: msg.responseHash };
}

/** `signErrorMissVote`: this host's signature and its primary (lowest) slot. */
export function signErrorMissAccept(session: HostSession, id: bigint, responseHash: Uint8Array): { signature: Uint8Array; voterSlot: number } {
  return { signature: signMessage(errorMissVoteBytes(session.escrowId, id, true, responseHash), session.host.privateKey), voterSlot: session.primarySlot };
}
