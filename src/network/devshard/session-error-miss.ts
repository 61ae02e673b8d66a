/** v5: how a session (session.ts) counts the other hosts' votes on an error-miss claim (error-miss.ts). */
import { errorMissVoteBytes, recoverAddress, type Replica } from '../../protocol/index.js';
import type { ErrorMissVote } from '../../protocol/gen/devshard/v1/tx_pb.js';

/**
 * An accepting vote signed over ErrorMissVoteContent{escrow, id, true, response_hash} by the
 * address of its slot (or the warm key bound to it): a forged vote would make the replica refuse
 * the whole MsgErrorMiss, so it is not counted.
 */
export function errorMissVoteValid(replica: Replica, escrowId: string, inferenceId: bigint, responseHash: Uint8Array, vote: ErrorMissVote): boolean {
  const expected = replica.slots[vote.voterSlot];
  if (expected === undefined || !vote.accept) return false;
  let signer: string;
  try {
    signer = recoverAddress(errorMissVoteBytes(escrowId, inferenceId, true, responseHash), vote.signature);
  } catch {
    return false;
  }
  return signer === expected || replica.warmKeys.get(vote.voterSlot) === signer;
}

/** Accepting weight of `votes`: each voter address counts its slots once (the replica's countVotes). */
export function voteWeight(replica: Replica, votes: readonly { voterSlot: number }[]): number {
  const addresses = new Set(votes.map((v) => replica.slots[v.voterSlot]).filter((a): a is string => a !== undefined));
  let w = 0;
  for (const a of addresses) w += replica.slots.filter((x) => x === a).length;
  return w;
}
