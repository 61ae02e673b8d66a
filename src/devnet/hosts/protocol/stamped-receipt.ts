/**
 * A v5 executor's receipt (zpoken/gonka@86cff503 devshard/host/host.go `signReceipt`). Unlike v2's,
 * it is authorised by the applied state, not by the request's bytes: the request must carry a
 * payload and the diff at its nonce; the inference is the nonce's, its executor slot `nonce mod n`
 * must be this host's, and its record must exist and still be Pending (or already executing here, or
 * answered before). The payload is checked against that record (500 with receipt.ts's texts). The
 * receipt signs ExecutorReceiptContent with confirmed_at = now and the host's stamp (fields 9/10):
 * its oracle's tip lifted to F(id) (host-stamps.ts); MsgConfirmStart carries the same stamp.
 */
import { create } from '@bufbuild/protobuf';
import { DevshardTxSchema } from '../../../protocol/gen/devshard/v1/diff_pb.js';
import { MsgConfirmStartSchema, MsgStartInferenceSchema } from '../../../protocol/gen/devshard/v1/tx_pb.js';
import { InferenceStatus } from '../../../protocol/inference-record.js';
import { executorReceiptBytes } from '../../../protocol/preimages.js';
import { signMessage } from '../../../protocol/signatures.js';
import type { Stamp } from '../../../protocol/stamps.js';
import type { InferencePayload } from '../../../network/devshard/request-body.js';
import type { DevnetChainView } from '../chain-view.js';
import { headerStamp, hostStamp, type OracleRead } from './host-stamps.js';
import { payloadMismatch, type ReceiptOutcome } from './receipt.js';
import type { HostSession } from './session.js';
import { HostHttpError, type ReceivedDiff } from './wire.js';

export interface StampedReceiptOutcome extends ReceiptOutcome {
  /** The stamp the receipt signs (absent when unstamped: no oracle and no floor). */
  stamp?: Stamp;
}

export interface StampContext {
  nowSeconds: bigint;
  read: OracleRead;
  chain: DevnetChainView;
  /** The fault `subFloorStamps`. */
  belowFloor: boolean;
}

export function signStampedReceipt(session: HostSession, diffs: readonly ReceivedDiff[], nonce: bigint, payload: InferencePayload | undefined, c: StampContext): StampedReceiptOutcome {
  if (!payload || !diffs.some((d) => d.nonce === nonce)) return {};
  const id = nonce;
  const executorSlot = Number(id % BigInt(session.groupAddresses.length));
  if (!session.ownSlots.includes(executorSlot)) return {};
  const rec = session.replica.inference(id);
  if (!rec) return {};
  const mismatch = payloadMismatch(payload, rec);
  if (mismatch) throw new HostHttpError(500, mismatch);
  const executing = session.executing.has(id);
  const cached = session.completed.get(id);
  if (rec.status !== InferenceStatus.Pending && !executing && cached === undefined) return {};

  const confirmedAt = c.nowSeconds;
  const stamp = hostStamp(session, id, headerStamp(c.read), { chain: c.chain, belowFloor: c.belowFloor });
  const receipt = signMessage(
    executorReceiptBytes({
      inferenceId: id,
      promptHash: rec.promptHash,
      model: rec.model,
      inputLength: rec.inputLength,
      maxTokens: rec.maxTokens,
      startedAt: rec.startedAt,
      escrowId: session.escrowId,
      confirmedAt,
      observedHeight: stamp.height,
      observedBlockHash: stamp.hash,
    }),
    session.host.privateKey,
  );
  // In the mempool too, so a lost answer still delivers it with the next one.
  const confirm = create(DevshardTxSchema, {
    tx: { case: 'confirmStart', value: create(MsgConfirmStartSchema, { inferenceId: id, executorSig: receipt, confirmedAt, observedHeight: stamp.height, observedBlockHash: stamp.hash }) },
  });
  session.addToMempool(confirm, session.latestNonce);
  const out: StampedReceiptOutcome = { receipt, confirmedAt, inferenceId: id, ...(stamp.height !== 0n || stamp.hash.length > 0 ? { stamp } : {}) };
  if (executing) return out;
  if (cached !== undefined) return { ...out, cached };
  session.executing.add(id);
  const start = create(MsgStartInferenceSchema, { inferenceId: id, promptHash: rec.promptHash, model: rec.model, inputLength: rec.inputLength, maxTokens: rec.maxTokens, startedAt: rec.startedAt });
  return { ...out, execute: { start, prompt: payload.prompt, executorSlot } };
}
