/**
 * The txs a devshard session (session.ts) composes into its diffs itself: the request's
 * MsgStartInference, the MsgFinalizeRound, a receipt's MsgConfirmStart, a MsgTimeoutInference with
 * its votes, an idle span's heartbeats; and a tx's identity in the pending set.
 */
import { create, toBinary } from '@bufbuild/protobuf';
import { canonicalPromptHash, type Replica } from '../../protocol/index.js';
import { DevshardTxSchema, type DevshardTx } from '../../protocol/gen/devshard/v1/diff_pb.js';
import { MsgConfirmStartSchema, MsgFinalizeRoundSchema, MsgStartInferenceSchema, MsgTimeoutInferenceSchema, TimeoutReason, TimeoutVoteSchema } from '../../protocol/gen/devshard/v1/tx_pb.js';
import { forceHeightSyncTurnTx, heartbeatTx, type HeightSyncReason } from '../../protocol/height-sync.js';
import type { HostReceipt } from './host-events.js';
import type { InferencePayload } from './request-body.js';

/** The reference gateway's K when it opens a heartbeat turn: max(K or 10, slots) (Z5 user/heartbeat.go). */
const HEARTBEAT_TURN_K = 10;

/** A tx's identity: its deterministic encoding as a string (one byte a char), no digest needed. */
export const txKey = (tx: DevshardTx): string => {
  const b = toBinary(DevshardTxSchema, tx);
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('latin1');
};

/** The MsgStartInference of `nonce` (its prompt's canonical hash is the prompt_hash). */
export function startInferenceTx(nonce: bigint, prompt: Uint8Array, payload: InferencePayload): DevshardTx {
  const start = create(MsgStartInferenceSchema, {
    inferenceId: nonce,
    promptHash: canonicalPromptHash(prompt),
    model: payload.model,
    inputLength: payload.inputLength,
    maxTokens: payload.maxTokens,
    startedAt: payload.startedAt,
  });
  return create(DevshardTxSchema, { tx: { case: 'startInference', value: start } });
}

export function finalizeRoundTx(): DevshardTx {
  return create(DevshardTxSchema, { tx: { case: 'finalizeRound', value: create(MsgFinalizeRoundSchema, {}) } });
}

/** The executor's receipt signature as the MsgConfirmStart of `inferenceId`. */
export function confirmStartTx(r: HostReceipt, executorSig: Uint8Array, inferenceId: bigint): DevshardTx {
  // v5: the stamp the executor signed into its receipt goes into the ConfirmStart unchanged.
  const stamp = { ...(r.observedHeight !== undefined ? { observedHeight: r.observedHeight } : {}), ...(r.observedBlockHash ? { observedBlockHash: r.observedBlockHash } : {}) };
  return create(DevshardTxSchema, { tx: { case: 'confirmStart', value: create(MsgConfirmStartSchema, { inferenceId, executorSig, confirmedAt: r.confirmedAt ?? 0n, ...stamp }) } });
}

/** A MsgTimeoutInference with the accepting votes. */
export function timeoutInferenceTx(nonce: bigint, reason: 'refused' | 'execution', votes: readonly { voterSlot: number; signature: Uint8Array }[]): DevshardTx {
  return create(DevshardTxSchema, {
    tx: {
      case: 'timeoutInference',
      value: create(MsgTimeoutInferenceSchema, {
        inferenceId: nonce,
        reason: reason === 'refused' ? TimeoutReason.REFUSED : TimeoutReason.EXECUTION,
        votes: votes.map((v) => create(TimeoutVoteSchema, { voterSlot: v.voterSlot, accept: true, signature: v.signature })),
      }),
    },
  });
}

/**
 * v5: the txs of an idle span's diff at nonce `m`: one MsgHeartbeat stamped exactly F(m) (absent
 * before any floor), the span's first preceded by a MsgForceHeightSyncTurn over the span unless a
 * forced turn is already open (Z5 user/heartbeat.go, heightsync/compose.go).
 */
export function heartbeatTxs(replica: Replica, m: bigint, slotsNum: number, first: boolean, reason: HeightSyncReason): DevshardTx[] {
  const stamp = replica.referenceStamp(m);
  const extra: DevshardTx[] = [];
  if (first && !replica.forcedTurnActive(m)) {
    extra.push(forceHeightSyncTurnTx({ triggerNonce: m, slotsNum, anchorK: BigInt(Math.max(HEARTBEAT_TURN_K, slotsNum)), reason: 'heartbeat' }));
  }
  extra.push(heartbeatTx({ slotsNum, reason, ...(stamp ? { stamp } : {}) }));
  return extra;
}
