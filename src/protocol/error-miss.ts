/**
 * v5 error-miss: a finished inference whose signed answer is an error is refunded in full, the
 * executor unpaid and charged a miss, on more than `vote_threshold` accept votes (weighted by slots
 * per address) over ErrorMissVoteContent (zpoken/gonka@86cff503 devshard/state/machine.go
 * `applyErrorMiss`; diff.proto `ErrorMissVoteContent`; tx.proto `MsgErrorMiss`).
 */
import { create } from '@bufbuild/protobuf';
import { DevshardTxSchema, type DevshardTx } from './gen/devshard/v1/diff_pb.js';
import type { ErrorMissVote, MsgErrorMiss } from './gen/devshard/v1/tx_pb.js';
import { refuse } from './errors.js';
import { InferenceStatus } from './inference-record.js';
import { errorMissVoteBytes } from './preimages.js';
import { countVotes, liveForTransition, u32, u64, updateStats, type RuleContext } from './rule-context.js';
import { signMessage } from './signatures.js';

/**
 * `applyErrorMiss`: only a Finished record (not yet challenged or sealed); the votes sign its
 * recorded response hash. The Finish returned the surplus and credited the actual cost; this
 * unwinds that credit: the balance gets the actual cost back and the executor's cost loses it
 * (floored at 0).
 */
export function applyErrorMiss(ctx: RuleContext, msg: MsgErrorMiss): void {
  const st = ctx.state;
  const rec = liveForTransition(ctx, msg.inferenceId);
  if (rec.status !== InferenceStatus.Finished) throw refuse('InvalidTransition', `error-miss requires finished, got ${rec.status}`);
  const accept = countVotes(ctx, msg.votes, (a) => errorMissVoteBytes(st.escrowId, msg.inferenceId, a, rec.responseHash));
  const threshold = st.config.voteThreshold;
  if (accept <= threshold) throw refuse('InsufficientVotes', `need >${threshold} accept votes, got ${accept}`);
  st.putLive({ ...rec, status: InferenceStatus.TimedOut });
  st.balance = u64(st.balance + rec.actualCost);
  updateStats(ctx, rec.executorSlot, (s) => ({ ...s, missed: u32(s.missed + 1), cost: s.cost < rec.actualCost ? 0n : s.cost - rec.actualCost }));
}

/** A host's vote on an error-miss, signed over ErrorMissVoteContent (the gateway collects these). */
export function signErrorMissVote(escrowId: string, inferenceId: bigint, responseHash: Uint8Array, voterSlot: number, accept: boolean, privateKey: Uint8Array): ErrorMissVote {
  return { $typeName: 'devshard.v1.ErrorMissVote', voterSlot, accept, signature: signMessage(errorMissVoteBytes(escrowId, inferenceId, accept, responseHash), privateKey) };
}

/** A MsgErrorMiss as a tx. */
export const errorMissTx = (inferenceId: bigint, votes: readonly ErrorMissVote[]): DevshardTx =>
  create(DevshardTxSchema, { tx: { case: 'errorMiss', value: { inferenceId, votes: [...votes] } } });
