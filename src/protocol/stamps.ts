/**
 * v5 height stamps: the (observed_height, observed_block_hash) a tx may carry, whose height it is and
 * which nonce it must be judged at (zpoken/gonka@86cff503 devshard/heightsync/stamp.go). Presence is
 * keyed on the hash: proto3 cannot tell "no height" from height 0, so a stamp without a hash is no
 * stamp at all, whatever its height.
 */
import type { DevshardTx } from './gen/devshard/v1/diff_pb.js';

export interface Stamp {
  height: bigint;
  hash: Uint8Array;
}

/** Who signed a stamp in the floor's eyes: the user (sequencer) owns no slot, so it takes the top id. */
export const SEQUENCER_SIGNER = 0xffff_ffff;

export const stampPresent = (blockHash: Uint8Array): boolean => blockHash.length > 0;

/** The reference height a tx carries (Start, ConfirmStart, Finish, Heartbeat, HeightAck), if stamped. */
export function stampOf(tx: DevshardTx): Stamp | undefined {
  switch (tx.tx.case) {
    case 'startInference':
    case 'confirmStart':
    case 'finishInference':
    case 'heartbeat':
    case 'heightAck': {
      const m = tx.tx.value;
      return stampPresent(m.observedBlockHash) ? { height: m.observedHeight, hash: m.observedBlockHash } : undefined;
    }
    default:
      return undefined;
  }
}

/**
 * The nonce whose floor a stamp is judged against: one past what its producer had certainly
 * applied. Start and heartbeat are made at the nonce they land at; confirm and finish at their
 * inference's start nonce (its id); an ack answers the heartbeat at ref_nonce, so ref_nonce + 1.
 * Judging at the landing nonce would fail honest legs queued behind a floor raise.
 */
export function producingNonce(diffNonce: bigint, tx: DevshardTx): bigint | undefined {
  switch (tx.tx.case) {
    case 'startInference':
    case 'heartbeat':
      return diffNonce;
    case 'confirmStart':
    case 'finishInference':
      return tx.tx.value.inferenceId;
    case 'heightAck':
      return BigInt.asUintN(64, tx.tx.value.refNonce + 1n);
    default:
      return undefined;
  }
}

/** User-signed legs (Start, Heartbeat): their stamps never raise the floor nor the turn clock. */
export const sequencerComposed = (tx: DevshardTx): boolean => tx.tx.case === 'startInference' || tx.tx.case === 'heartbeat';

/** A stamp bound to a host key: ConfirmStart (executor_sig), Finish (proposer_sig), HeightAck (host_sig). */
export function hostSignedStamp(tx: DevshardTx): Stamp | undefined {
  const c = tx.tx.case;
  return c === 'confirmStart' || c === 'finishInference' || c === 'heightAck' ? stampOf(tx) : undefined;
}

/** An executor's stamp on ConfirmStart or Finish (acks excluded): what ratchets the turn clock on a busy escrow. */
export function executorStamp(tx: DevshardTx): bigint | undefined {
  const c = tx.tx.case;
  return c === 'confirmStart' || c === 'finishInference' ? stampOf(tx)?.height : undefined;
}

/** The log's clock for one diff: its highest host-signed stamp, else the last completed height. */
export function logResidentHeight(txs: readonly DevshardTx[], lastCompleted: bigint): bigint {
  let h = 0n;
  for (const tx of txs) {
    const s = hostSignedStamp(tx);
    if (s && s.height > h) h = s.height;
  }
  return h === 0n ? lastCompleted : h;
}

/** The leg name the log plane's texts use. */
export function legName(tx: DevshardTx): string {
  switch (tx.tx.case) {
    case 'startInference':
      return 'start';
    case 'confirmStart':
      return 'confirm';
    case 'finishInference':
      return 'finish';
    case 'heartbeat':
      return 'heartbeat';
    case 'heightAck':
      return 'ack';
    default:
      return 'stamp';
  }
}
