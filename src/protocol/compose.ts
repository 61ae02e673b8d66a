/**
 * The user side of a nonce: compose a diff from pending host txs, apply it best-effort, sign it
 * (gonka 8a35022 devshard/user/session.go `composeDiffLocked`, `txPriority`, `signDiff`;
 * devshard/state/machine.go `ApplyLocalBestEffort`). The gateway calls this once per request.
 */
import type { DevshardTx } from './gen/devshard/v1/diff_pb.js';
import { diffSignedBytes, diffWireBytes } from './preimages.js';
import type { BestEffortResult, Diff, Replica, WarmKeyResolver } from './replica.js';
import { signMessage } from './signatures.js';

/** `txPriority`: ConfirmStart < Finish < Validation < ValidationVote < everything else. */
export function txPriority(tx: DevshardTx): number {
  switch (tx.tx.case) {
    case 'confirmStart':
      return 0;
    case 'finishInference':
      return 1;
    case 'validation':
      return 2;
    case 'validationVote':
      return 3;
    default:
      return 4;
  }
}

/** Pending txs stably sorted by priority, then the extra txs (the Start, or the FinalizeRound) last. */
export function orderCandidates(pending: readonly DevshardTx[], extra: readonly DevshardTx[]): DevshardTx[] {
  const sorted = pending.map((tx, i) => ({ tx, i, p: txPriority(tx) })).sort((a, b) => a.p - b.p || a.i - b.i);
  return [...sorted.map((x) => x.tx), ...extra];
}

export interface ComposeInput {
  /** Host txs waiting to be included (from mempools and gossip). All are consumed, applied or not. */
  pending: readonly DevshardTx[];
  /** This nonce's own txs: the MsgStartInference of the request, or the MsgFinalizeRound. */
  extra: readonly DevshardTx[];
  warmKeys?: WarmKeyResolver;
}

export interface ComposedDiff extends BestEffortResult {
  nonce: bigint;
}

/**
 * Applies the next nonce to the replica best-effort and returns what to sign: only the applied
 * txs, and the root. A refused Start throws (the nonce is then not used; the replica is unchanged).
 */
export function composeDiff(replica: Replica, input: ComposeInput): ComposedDiff {
  const nonce = replica.latestNonce + 1n;
  const result = replica.applyLocalBestEffort(nonce, orderCandidates(input.pending, input.extra), { warmKeys: input.warmKeys });
  return { ...result, nonce };
}

/** The user's signature over DiffContent{nonce, txs, escrow_id, post_state_root} (sha256 once). */
export function signDiff(escrowId: string, nonce: bigint, txs: readonly DevshardTx[], postStateRoot: Uint8Array, userPrivateKey: Uint8Array): Diff {
  return { nonce, txs, postStateRoot, userSig: signMessage(diffSignedBytes(escrowId, nonce, txs, postStateRoot), userPrivateKey) };
}

/** A diff as JSON on the wire (`DiffJSON{nonce, txs, user_sig, post_state_root}`, bytes std base64). */
export function diffJson(d: Diff): { nonce: number; txs: string; user_sig: string; post_state_root: string } {
  const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
  return { nonce: Number(d.nonce), txs: b64(diffWireBytes(d.nonce, d.txs)), user_sig: b64(d.userSig), post_state_root: b64(d.postStateRoot) };
}
