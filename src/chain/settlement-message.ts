/** Turns the gateway's Settlement (finalize output) into the on-chain settle message. */
import { fromBase64, fromHex } from '@cosmjs/encoding';
import { MsgSettleDevshardEscrowType, type MsgSettleDevshardEscrow } from './messages.js';
import { ChainError, type Settlement } from './port.js';

const hexBytes = (value: string, name: string): Uint8Array => {
  if (!/^([0-9a-fA-F]{2})*$/.test(value)) throw new ChainError('rejected', `settlement ${name} must be hex`);
  return fromHex(value);
};

export function settleMessage(settler: string, s: Settlement): MsgSettleDevshardEscrow {
  if (!/^\d+$/.test(s.escrowId)) throw new ChainError('rejected', 'settlement escrow id must be an unsigned integer');
  return MsgSettleDevshardEscrowType.create({
    settler,
    escrowId: BigInt(s.escrowId),
    stateRoot: hexBytes(s.stateRoot, 'state root'),
    nonce: BigInt(s.nonce),
    restHash: hexBytes(s.restHash, 'rest hash'),
    // `requests` is off-chain bookkeeping; the message carries only what the chain pays by.
    hostStats: s.hostStats.map((h) => ({ slotId: h.slotId, missed: h.missed, invalid: h.invalid, cost: h.cost, requiredValidations: 0, completedValidations: 0 })),
    signatures: s.signatures.map((sig) => ({ slotId: sig.slotId, signature: fromBase64(sig.signature) })),
    fees: s.fees,
    stateRootAndProtocolVersion: s.stateRootVersion ?? `v${s.version}`,
  });
}
