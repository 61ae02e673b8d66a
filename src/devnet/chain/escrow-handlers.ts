/**
 * The inference module's two devshard escrow messages, as the devnet runs them inside a block.
 * Handlers validate, then mutate `state` (the block runner hands them a copy it can discard when a
 * message fails, so a failed tx keeps only its fee and sequence, as on a real chain).
 */
import { Secp256k1, Secp256k1Signature, sha256 } from '@cosmjs/crypto';
import { DEVSHARD_FAILURES, type DevshardFailure } from '../../chain/devshard-errors.js';
import { DENOM } from '../../chain/keys.js';
import type { MsgCreateDevshardEscrow, MsgSettleDevshardEscrow } from '../../chain/messages.js';
import type { EscrowSlot } from '../../chain/port.js';
import { hostPubKey } from './genesis.js';
import { ensureAccount, type ChainState, type TxEvent } from './state.js';

export class MsgFailure extends Error {
  constructor(
    readonly failure: DevshardFailure | { code: number; codespace: 'sdk'; reason: string },
    readonly detail: string,
  ) {
    super(`${detail}: ${failure.reason}`);
  }
  get codespace(): string {
    return 'codespace' in this.failure ? this.failure.codespace : 'inference';
  }
}

export interface MsgContext {
  state: ChainState;
  height: number;
  epochIndex: number;
  /** Slots every new escrow gets: all hosts, slot i = host i. */
  slots: EscrowSlot[];
}

export interface MsgResult {
  events: TxEvent[];
  /** Encoded response message, for TxMsgData. */
  response: { typeUrl: string; value: Uint8Array };
}

const attrs = (o: Record<string, string | number | bigint | boolean>) =>
  Object.entries(o).map(([key, value]) => ({ key, value: String(value) }));

function transfer(state: ChainState, from: string | undefined, to: string | undefined, amount: bigint, events: TxEvent[]) {
  if (amount === 0n) return;
  if (from) state.accounts[from]!.balance -= amount;
  if (to) ensureAccount(state, to).balance += amount;
  events.push({
    type: 'transfer',
    attributes: attrs({ recipient: to ?? 'devshard_escrow_module', sender: from ?? 'devshard_escrow_module', amount: `${amount}${DENOM}` }),
  });
}

export function createEscrow(ctx: MsgContext, msg: MsgCreateDevshardEscrow, encodeResponse: (id: bigint) => Uint8Array): MsgResult {
  const { state, epochIndex } = ctx;
  const F = DEVSHARD_FAILURES;
  if (!state.params.allowedCreatorAddresses.includes(msg.creator)) {
    throw new MsgFailure(F.notAllowlisted, `${msg.creator} is not in devshard_escrow_params.allowed_creator_addresses`);
  }
  if (!state.models.includes(msg.modelId)) {
    throw new MsgFailure(F.unknownModel, `model ${JSON.stringify(msg.modelId)} is not a governance model`);
  }
  if (msg.amount < state.params.minAmount) {
    throw new MsgFailure(F.belowMinAmount, `amount ${msg.amount} is below min_amount ${state.params.minAmount}`);
  }
  const created = state.escrowsPerEpoch[epochIndex] ?? 0;
  if (created >= state.params.maxEscrowsPerEpoch) {
    throw new MsgFailure(F.epochLimit, `epoch ${epochIndex} already has ${created} escrows (max_escrows_per_epoch ${state.params.maxEscrowsPerEpoch})`);
  }
  const creator = state.accounts[msg.creator]!;
  if (creator.balance < msg.amount) {
    // The bank module's own error, as the real chain returns it when locking the deposit.
    throw new MsgFailure(
      { code: 5, codespace: 'sdk', reason: 'insufficient funds' },
      `spendable balance ${creator.balance}${DENOM} is smaller than ${msg.amount}${DENOM}`,
    );
  }
  const id = state.nextEscrowId++;
  const events: TxEvent[] = [];
  transfer(state, msg.creator, undefined, msg.amount, events);
  state.escrowsPerEpoch[epochIndex] = created + 1;
  state.escrows[id] = {
    id,
    creator: msg.creator,
    amount: msg.amount,
    settled: false,
    epochIndex,
    modelId: msg.modelId,
    slots: ctx.slots.map((s) => ({ ...s })),
    createdHeight: ctx.height,
  };
  events.push({
    type: 'devshard_escrow_created',
    attributes: attrs({ escrow_id: id, creator: msg.creator, amount: msg.amount, epoch_index: epochIndex, model_id: msg.modelId }),
  });
  return { events, response: { typeUrl: '/inference.inference.MsgCreateDevshardEscrowResponse', value: encodeResponse(BigInt(id)) } };
}

/** Slots whose host signed sha256(state_root) validly; throws on a signature that does not verify. */
function signedSlots(state: ChainState, slots: EscrowSlot[], msg: MsgSettleDevshardEscrow): Set<number> {
  const digest = sha256(msg.stateRoot);
  const valid = new Set<number>();
  for (const entry of msg.signatures) {
    const slot = slots.find((s) => s.slotId === entry.slotId);
    const pubKey = slot ? hostPubKey(state, slot.host) : undefined;
    let ok = false;
    try {
      ok = pubKey !== undefined && entry.signature.length === 64 &&
        Secp256k1.verifySignature(Secp256k1Signature.fromFixedLength(entry.signature), digest, pubKey);
    } catch {
      ok = false;
    }
    if (!ok) throw new MsgFailure(DEVSHARD_FAILURES.badSignatures, `signature of slot ${entry.slotId} does not verify over the state root`);
    valid.add(entry.slotId);
  }
  return valid;
}

export function settleEscrow(ctx: MsgContext, msg: MsgSettleDevshardEscrow): MsgResult {
  const { state, epochIndex } = ctx;
  const F = DEVSHARD_FAILURES;
  const escrow = state.escrows[msg.escrowId.toString()];
  if (!escrow) throw new MsgFailure(F.notFound, `escrow ${msg.escrowId}`);
  if (msg.settler !== escrow.creator) throw new MsgFailure(F.wrongSettler, `escrow ${escrow.id} was created by ${escrow.creator}`);
  if (escrow.settled) throw new MsgFailure(F.alreadySettled, `escrow ${escrow.id} settled at height ${escrow.settledHeight}`);
  if (epochIndex !== escrow.epochIndex && epochIndex !== escrow.epochIndex + 1) {
    throw new MsgFailure(F.wrongEpoch, `escrow ${escrow.id} belongs to epoch ${escrow.epochIndex}, current epoch is ${epochIndex}`);
  }
  if (msg.nonce > BigInt(state.params.maxNonce)) {
    throw new MsgFailure(F.nonceTooHigh, `nonce ${msg.nonce} > max_nonce ${state.params.maxNonce}`);
  }
  if (msg.stateRoot.length === 0) throw new MsgFailure(F.invalidRequest, 'state_root is empty');
  const needed = Math.floor((2 * escrow.slots.length) / 3) + 1;
  const signed = signedSlots(state, escrow.slots, msg);
  if (signed.size < needed) {
    throw new MsgFailure(F.badSignatures, `${signed.size} of ${escrow.slots.length} slots signed, ${needed} needed`);
  }
  let hostCosts = 0n;
  const seen = new Set<number>();
  for (const stat of msg.hostStats) {
    if (!escrow.slots.some((s) => s.slotId === stat.slotId) || seen.has(stat.slotId)) {
      throw new MsgFailure(F.invalidRequest, `host_stats names slot ${stat.slotId} twice or outside the escrow`);
    }
    seen.add(stat.slotId);
    hostCosts += stat.cost;
  }
  if (hostCosts + msg.fees > escrow.amount) {
    throw new MsgFailure(F.overspent, `host costs ${hostCosts} + fees ${msg.fees} > amount ${escrow.amount}`);
  }
  const events: TxEvent[] = [];
  for (const stat of msg.hostStats) {
    const slot = escrow.slots.find((s) => s.slotId === stat.slotId)!;
    transfer(state, undefined, slot.host, stat.cost, events);
  }
  state.feesCollected += msg.fees;
  const refund = escrow.amount - hostCosts - msg.fees;
  transfer(state, undefined, escrow.creator, refund, events);
  escrow.settled = true;
  escrow.settledHeight = ctx.height;
  escrow.refund = refund;
  // The keeper's event (k/msg_server_settle_devshard_escrow.go): deposit = total_payout + remainder.
  events.push({
    type: 'devshard_escrow_settled',
    attributes: attrs({
      escrow_id: escrow.id,
      state_root_and_protocol_version: msg.stateRootAndProtocolVersion,
      settler: msg.settler,
      total_payout: escrow.amount - refund,
      fees: msg.fees,
      remainder: refund,
    }),
  });
  return { events, response: { typeUrl: '/inference.inference.MsgSettleDevshardEscrowResponse', value: new Uint8Array() } };
}
