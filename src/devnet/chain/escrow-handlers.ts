/**
 * The inference module's two devshard escrow messages, as the devnet runs them inside a block.
 * Handlers validate, then mutate `state` (the block runner hands them a copy it can discard when a
 * message fails, so a failed tx keeps only its fee and sequence, as on a real chain).
 */
import {
  CURRENT_EPOCH_GROUP_NOT_FOUND,
  DEVSHARD_TEXT as T,
  NOT_ALLOWED_ESCROW_CREATOR,
  UNREGISTERED,
} from '../../chain/devshard-errors.js';
import { DENOM } from '../../chain/keys.js';
import type { MsgCreateDevshardEscrow, MsgSettleDevshardEscrow } from '../../chain/messages.js';
import type { EscrowSlot } from '../../chain/port.js';
import { hostStatsHash, Phase, recoverDigestAddress, sha256 as sha256Bytes, stateRoot, stateSignatureBytes } from '../../protocol/index.js';
import { WARM_KEY_GRANT_MARKER } from '../../chain/warm-keys.js';
import { COMPILED_DEFAULTS, sealGraceNonces } from './params.js';
import { ensureAccount, type AuthzGrant, type ChainState, type EscrowParamsState, type TxEvent } from './state.js';

/**
 * A message the keeper refuses: a plain text (codespace `undefined`, code 1) unless a registered
 * error says otherwise (the allowlist's inference/1173, the bank's sdk/5).
 */
export class MsgFailure extends Error {
  readonly code: number;
  readonly codespace: string;
  constructor(text: string, registered: { code: number; codespace: string } = UNREGISTERED) {
    super(text);
    this.code = registered.code;
    this.codespace = registered.codespace;
  }
}

export interface MsgContext {
  state: ChainState;
  height: number;
  epochIndex: number;
  /** Slots every new escrow gets: all hosts, slot i = host i. */
  slots: EscrowSlot[];
  /** Hex app hash of the block (DevshardEscrow.app_hash). */
  appHash: string;
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

/** k/permissions.go EscrowAllowListPermission: an empty allowlist lets anyone create and settle. */
function checkAllowed(state: ChainState, address: string): void {
  const allowed = state.params.allowedCreatorAddresses;
  if (allowed.length > 0 && !allowed.includes(address)) {
    throw new MsgFailure(NOT_ALLOWED_ESCROW_CREATOR.text, NOT_ALLOWED_ESCROW_CREATOR);
  }
}

/**
 * The chain params an escrow freezes at create (DevshardEscrow 15–18), each 0 (or less) in params
 * falling back to the compiled default: validation_rate (t/devshard_escrow_consensus.go
 * DevshardValidationRateForCreate, gonka 59b1ee7e), vote_threshold_factor
 * (DevshardVoteThresholdFactorForCreate, gonka-ai/gonka@5f56ba68), refusal_timeout and
 * execution_timeout (DevshardRefusalTimeoutForCreate / DevshardExecutionTimeoutForCreate, Z5 =
 * zpoken/gonka@86cff503 msg_server_create_devshard_escrow.go).
 */
export function frozenAtCreate(p: EscrowParamsState) {
  return {
    validationRate: p.validationRate > 0 ? p.validationRate : COMPILED_DEFAULTS.validationRate,
    voteThresholdFactor: p.voteThresholdFactor > 0 ? p.voteThresholdFactor : COMPILED_DEFAULTS.voteThresholdFactor,
    refusalTimeout: p.refusalTimeout > 0n ? p.refusalTimeout : COMPILED_DEFAULTS.refusalTimeout,
    executionTimeout: p.executionTimeout > 0n ? p.executionTimeout : COMPILED_DEFAULTS.executionTimeout,
  };
}

/** k/msg_server_create_devshard_escrow.go, in its order. */
export function createEscrow(ctx: MsgContext, msg: MsgCreateDevshardEscrow, encodeResponse: (id: bigint) => Uint8Array): MsgResult {
  const { state, epochIndex } = ctx;
  const p = state.params;
  checkAllowed(state, msg.creator);
  if (msg.modelId === '') throw new MsgFailure(T.modelRequired());
  if (msg.amount < p.minAmount || msg.amount > p.maxAmount) throw new MsgFailure(T.amountOutOfRange(msg.amount, p.minAmount, p.maxAmount));
  const created = state.escrowsPerEpoch[epochIndex] ?? 0;
  if (created >= p.maxEscrowsPerEpoch) throw new MsgFailure(T.epochLimit(epochIndex, created, p.maxEscrowsPerEpoch));
  if (!state.models.includes(msg.modelId)) throw new MsgFailure(T.noEpochGroup(msg.modelId), CURRENT_EPOCH_GROUP_NOT_FOUND);
  const creator = state.accounts[msg.creator]!;
  if (creator.balance < msg.amount) {
    // The bank module's registered error, wrapped by the keeper (so sdk/5 with the keeper's text).
    throw new MsgFailure(T.lockFunds(`spendable balance ${creator.balance}${DENOM} is smaller than ${msg.amount}${DENOM}: insufficient funds`), { code: 5, codespace: 'sdk' });
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
    appHash: ctx.appHash,
    tokenPrice: p.tokenPrice,
    createDevshardFee: p.createDevshardFee,
    feePerNonce: p.feePerNonce,
    inferenceSealGraceNonces: p.defaultInferenceSealGraceNonces || sealGraceNonces(ctx.slots.length),
    inferenceSealGraceSeconds: p.defaultInferenceSealGraceSeconds,
    autoSealEveryNNonces: p.defaultAutoSealEveryNNonces,
    ...frozenAtCreate(p),
  };
  events.push({
    type: 'devshard_escrow_created',
    attributes: attrs({ escrow_id: id, creator: msg.creator, amount: msg.amount, epoch_index: epochIndex, model_id: msg.modelId }),
  });
  return { events, response: { typeUrl: '/inference.inference.MsgCreateDevshardEscrowResponse', value: encodeResponse(BigInt(id)) } };
}

/** `HasWarmKeyGrant(granter = the slot's address, grantee = the recovered signer)`: any grant of the marker. */
const isWarmKey = (grants: readonly AuthzGrant[], cold: string, warm: string) =>
  grants.some((g) => g.granter === cold && g.grantee === warm && g.msgTypeUrl === WARM_KEY_GRANT_MARKER);

/**
 * `devshardAssignedUpperBoundForSlot`: how many inference ids `slots[id % n]` can have executed up
 * to nonce `latest` (nonce 0 is never an inference, so slot 0 first works at nonce n).
 */
function assignedUpperBound(latest: bigint, slotCount: bigint, slotId: number): bigint {
  if (BigInt(slotId) >= slotCount) throw new MsgFailure(T.slotOutOfRangeForCount(slotId, Number(slotCount)));
  const first = slotId === 0 ? slotCount : BigInt(slotId);
  return latest < first ? 0n : 1n + (latest - first) / slotCount;
}

/**
 * `VerifyDevshardSettlement` (k/devshard_settlement.go), in its order, after the checks every
 * settlement shares: the state root recomputed as sha256(host_stats hash ‖ fees_be8 ‖ rest_hash ‖
 * sha256(version) ‖ 0x02) (the chain does not recompute rest_hash), every signature 65 bytes and
 * recovered over sha256(StateSignatureContent{state_root, escrow id decimal, nonce}) to its slot's
 * address, or to a warm key the slot's address granted the marker (`HasWarmKeyGrant`: an authz grant
 * of WARM_KEY_GRANT_MARKER, chain v0.2.15+); one bad signature rejects all. Then the quorum 2n/3+1
 * counted per entry, then host_stats: no duplicate, missed/invalid within what was assigned to the
 * slot, Σcost + fees ≤ amount.
 */
function verifyProtocolSettlement(escrow: { id: number; amount: bigint; slots: EscrowSlot[] }, msg: MsgSettleDevshardEscrow, grants: readonly AuthzGrant[]): void {
  const version = msg.stateRootAndProtocolVersion;
  const stats = msg.hostStats.map((h) => ({ slotId: h.slotId, missed: h.missed, invalid: h.invalid, cost: h.cost, requiredValidations: h.requiredValidations, completedValidations: h.completedValidations }));
  const expected = stateRoot(hostStatsHash(stats), msg.fees, msg.restHash, version, Phase.Settlement);
  if (msg.stateRoot.length !== 32) throw new MsgFailure(T.stateRootLength(msg.stateRoot.length));
  if (!expected.every((b, i) => b === msg.stateRoot[i])) throw new MsgFailure(T.stateRootMismatch());
  const digest = sha256Bytes(stateSignatureBytes(msg.stateRoot, String(escrow.id), msg.nonce));
  const seen = new Set<number>();
  let votes = 0;
  for (const sig of msg.signatures) {
    if (seen.has(sig.slotId)) throw new MsgFailure(T.duplicateSignature(sig.slotId));
    seen.add(sig.slotId);
    if (sig.slotId >= escrow.slots.length) throw new MsgFailure(T.signatureSlotOutOfRange(sig.slotId));
    const expectedAddr = escrow.slots[sig.slotId]!.host;
    if (sig.signature.length !== 65) throw new MsgFailure(T.recoverFailed(sig.slotId, T.signatureLength(sig.signature.length)));
    let recovered: string;
    try {
      recovered = recoverDigestAddress(digest, sig.signature);
    } catch (err) {
      throw new MsgFailure(T.recoverFailed(sig.slotId, (err as Error).message));
    }
    if (recovered !== expectedAddr && !isWarmKey(grants, expectedAddr, recovered)) throw new MsgFailure(T.signatureRecovered(sig.slotId, recovered, expectedAddr));
    votes++;
  }
  const needed = Math.floor((2 * escrow.slots.length) / 3) + 1;
  if (votes < needed) throw new MsgFailure(T.insufficientQuorum(votes, needed));
  const slotCount = BigInt(escrow.slots.length);
  if (slotCount === 0n) throw new MsgFailure('no slots in escrow');
  const seenStats = new Set<number>();
  let totalCost = 0n;
  for (const hs of msg.hostStats) {
    if (seenStats.has(hs.slotId)) throw new MsgFailure(T.duplicateHostStats(hs.slotId));
    seenStats.add(hs.slotId);
    const assigned = assignedUpperBound(msg.nonce, slotCount, hs.slotId);
    if (BigInt(hs.missed) > assigned) throw new MsgFailure(T.missedExceeds(hs.slotId, hs.missed, assigned));
    const completed = assigned - BigInt(hs.missed);
    if (BigInt(hs.invalid) > completed) throw new MsgFailure(T.invalidExceeds(hs.slotId, hs.invalid, completed));
    totalCost += hs.cost;
  }
  if (totalCost + msg.fees > escrow.amount) throw new MsgFailure(T.totalDebit(totalCost + msg.fees, totalCost, msg.fees, escrow.amount));
}

/**
 * k/msg_server_settle_devshard_escrow.go and k/devshard_settlement.go, in their order. Payout as the
 * keeper computes it: each host_stats entry's slot address gets its cost plus fees / slots (the
 * first fees % slots entries one more coin); total_payout includes the fee shares, and the
 * remainder (deposit − total_payout) goes back to the creator. The proof is verified as the keeper
 * does (verifyProtocolSettlement).
 */
export function settleEscrow(ctx: MsgContext, msg: MsgSettleDevshardEscrow): MsgResult {
  const { state, epochIndex } = ctx;
  const p = state.params;
  checkAllowed(state, msg.settler);
  const escrow = state.escrows[msg.escrowId.toString()];
  if (!escrow) throw new MsgFailure(T.notFound(msg.escrowId));
  if (escrow.settled) throw new MsgFailure(T.alreadySettled(escrow.id));
  if (msg.settler !== escrow.creator) throw new MsgFailure(T.wrongSettler(msg.settler, escrow.creator));
  const version = msg.stateRootAndProtocolVersion;
  if (version === '') throw new MsgFailure(T.versionRequired());
  if (msg.nonce > BigInt(p.maxNonce)) throw new MsgFailure(T.nonceTooHigh(msg.nonce, p.maxNonce));
  if (version.length > 128) throw new MsgFailure(T.versionTooLong());
  // The approved-versions store (chain v0.2.16); an empty store accepts any version.
  const approved = state.approvedVersions ?? [];
  if (approved.length > 0 && !approved.some((v) => v.name === version)) throw new MsgFailure(T.versionNotApproved(version));
  verifyProtocolSettlement(escrow, msg, state.authzGrants ?? []);
  if (escrow.slots.length === 0) throw new MsgFailure(`escrow ${escrow.id} has no slots`);
  if (epochIndex < escrow.epochIndex || epochIndex > escrow.epochIndex + 1) throw new MsgFailure(T.wrongEpoch(epochIndex, escrow.epochIndex));

  const totalSlots = BigInt(escrow.slots.length);
  const feePerSlot = msg.fees / totalSlots;
  let remainderFees = msg.fees % totalSlots;
  const payouts = new Map<string, bigint>();
  for (const stat of msg.hostStats) {
    const slot = escrow.slots.find((s) => s.slotId === stat.slotId);
    if (!slot) throw new MsgFailure(T.hostStatsOutOfRange(stat.slotId));
    let pay = (payouts.get(slot.host) ?? 0n) + stat.cost + feePerSlot;
    if (remainderFees > 0n) {
      pay += 1n;
      remainderFees -= 1n;
    }
    payouts.set(slot.host, pay);
  }
  const totalPayout = [...payouts.values()].reduce((a, b) => a + b, 0n);
  if (totalPayout > escrow.amount) throw new MsgFailure(T.totalPayout(totalPayout, escrow.amount));
  const events: TxEvent[] = [];
  const paid = new Set<string>();
  for (const slot of escrow.slots) {
    const pay = payouts.get(slot.host);
    if (!pay || paid.has(slot.host)) continue;
    paid.add(slot.host);
    transfer(state, undefined, slot.host, pay, events);
  }
  const remainder = escrow.amount - totalPayout;
  transfer(state, undefined, escrow.creator, remainder, events);
  escrow.settled = true;
  escrow.settledHeight = ctx.height;
  escrow.refund = remainder;
  // The keeper's event: deposit = total_payout + remainder.
  events.push({
    type: 'devshard_escrow_settled',
    attributes: attrs({
      escrow_id: escrow.id,
      state_root_and_protocol_version: version,
      settler: msg.settler,
      total_payout: totalPayout,
      fees: msg.fees,
      remainder,
    }),
  });
  return { events, response: { typeUrl: '/inference.inference.MsgSettleDevshardEscrowResponse', value: new Uint8Array() } };
}
