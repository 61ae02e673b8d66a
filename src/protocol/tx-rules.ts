/**
 * The rule of each devshard tx (gonka 8a35022 devshard/state/machine.go `applyTx` and the
 * `apply*` functions; v5: zpoken/gonka@86cff503 state/machine.go, state/heightsync.go). Each rule
 * checks first and changes the state last, so a refused tx leaves the state as it was, except a
 * warm-key binding made while checking a signature (as in Go).
 */
import type { DevshardTx } from './gen/devshard/v1/diff_pb.js';
import { TimeoutReason, type MsgConfirmStart, type MsgFinishInference, type MsgStartInference, type MsgTimeoutInference, type MsgValidation, type MsgValidationVote } from './gen/devshard/v1/tx_pb.js';
import { refuse } from './errors.js';
import { applyErrorMiss } from './error-miss.js';
import { Phase } from './hashes.js';
import { applyForceHeightSyncTurn, applyHeartbeat, applyHeightAck } from './height-sync.js';
import { bitmapIsSet, bitmapSet, InferenceStatus, type InferenceRecord } from './inference-record.js';
import { executorReceiptBytes, finishProposerBytes, timeoutVoteBytes, validationProposerBytes, validationVoteProposerBytes } from './preimages.js';
import { countVotes, liveForTransition, recover, slotAddress, tokenCost, u32, u64, updateStats, weightOf, type RuleContext } from './rule-context.js';
import { stampPresent } from './stamps.js';
import { keepBytes, NO_BYTES } from './byte-slab.js';

/** v5's `completionapi.MinTokensFloor`: a smaller reservation is refused by the executor, so Start refuses it. */
export const MIN_TOKENS_FLOOR = 64n;

export { tokenCost, type RuleContext } from './rule-context.js';

/** A live record, or the refusal Go gives for a sealed or unknown id (validation / vote). */
function liveForValidation(ctx: RuleContext, id: bigint): InferenceRecord {
  const rec = ctx.state.getLive(id);
  if (rec) return rec;
  const sealNonce = ctx.state.sealNonceOf(id);
  if (sealNonce !== undefined && sealNonce > 0n) throw refuse('InferenceSealed', `inference ${id}`);
  throw refuse('InferenceNotFound', `inference ${id}`);
}

/** `verifyProposerSig`: the signer must be the slot's address or its warm key. */
function verifyProposer(ctx: RuleContext, bytes: Uint8Array, sig: Uint8Array, expected: string, slot: number): void {
  const recovered = recover(bytes, sig, (d) => refuse('InvalidProposerSig', d));
  if (recovered !== expected && !ctx.resolveWarmKey(slot, recovered, expected)) {
    throw refuse('InvalidProposerSig', `expected ${expected}, got ${recovered}`);
  }
}

function checkEscrow(ctx: RuleContext, escrowId: string): void {
  if (escrowId !== ctx.state.escrowId) throw refuse('EscrowIDMismatch', `expected ${ctx.state.escrowId}, got ${escrowId}`);
}

/** Whether any slot of the address holding `slot` is set in the record's bitmap, and which. */
function addressHasValidated(ctx: RuleContext, rec: InferenceRecord, slot: number): number | undefined {
  for (const s of ctx.addressSlots.get(ctx.state.slots[slot]!) ?? []) if (bitmapIsSet(rec.validatedBy, s)) return s;
  return undefined;
}

function applyStart(ctx: RuleContext, msg: MsgStartInference): void {
  const st = ctx.state;
  if (st.phase !== Phase.Active) throw refuse('SessionFinalizing');
  // v5: a reservation below the executor's floor would sit pending until seal; keep it out of state.
  if (ctx.rules === 'v5' && !ctx.replayingPersisted && msg.maxTokens < MIN_TOKENS_FLOOR) {
    throw refuse('MaxTokensBelowFloor', `max_tokens ${msg.maxTokens}, floor ${MIN_TOKENS_FLOOR}`);
  }
  if (st.getLive(msg.inferenceId) || st.isSealed(msg.inferenceId)) throw refuse('DuplicateInferenceID');
  const executorSlot = Number(msg.inferenceId % BigInt(st.slots.length));
  const reservedCost = tokenCost(msg.inputLength, msg.maxTokens, st.config.tokenPrice);
  if (st.balance < reservedCost) throw refuse('InsufficientBalance');
  st.balance -= reservedCost;
  st.putLive({
    id: msg.inferenceId,
    status: InferenceStatus.Pending,
    executorSlot,
    model: msg.model,
    promptHash: keepBytes(msg.promptHash),
    responseHash: NO_BYTES,
    inputLength: msg.inputLength,
    maxTokens: msg.maxTokens,
    inputTokens: 0n,
    outputTokens: 0n,
    reservedCost,
    actualCost: 0n,
    startedAt: msg.startedAt,
    confirmedAt: 0n,
    startedAtHeight: ctx.rules === 'v5' && stampPresent(msg.observedBlockHash) ? msg.observedHeight : 0n,
    confirmedAtHeight: 0n,
    votesValid: 0,
    votesInvalid: 0,
    validatedBy: 0n,
  });
}

function applyConfirm(ctx: RuleContext, msg: MsgConfirmStart): void {
  const rec = liveForTransition(ctx, msg.inferenceId);
  if (rec.status !== InferenceStatus.Pending) throw refuse('InvalidTransition', `expected pending, got ${rec.status}`);
  const receipt = executorReceiptBytes({
    inferenceId: msg.inferenceId,
    promptHash: rec.promptHash,
    model: rec.model,
    inputLength: rec.inputLength,
    maxTokens: rec.maxTokens,
    startedAt: rec.startedAt,
    escrowId: ctx.state.escrowId,
    confirmedAt: msg.confirmedAt,
    // v5: the executor signed its stamp too; v2 hosts never read these fields.
    ...(ctx.rules === 'v5' ? { observedHeight: msg.observedHeight, observedBlockHash: msg.observedBlockHash } : {}),
  });
  const recovered = recover(receipt, msg.executorSig, (d) => refuse('InvalidExecutorSig', d));
  const expected = ctx.state.slots[rec.executorSlot]!;
  if (recovered !== expected && !ctx.resolveWarmKey(rec.executorSlot, recovered, expected)) {
    throw refuse('InvalidExecutorSig', `expected executor ${expected} (slot ${rec.executorSlot}), got ${recovered}`);
  }
  const confirmedAtHeight = ctx.rules === 'v5' && stampPresent(msg.observedBlockHash) ? msg.observedHeight : rec.confirmedAtHeight;
  ctx.state.putLive({ ...rec, status: InferenceStatus.Started, confirmedAt: msg.confirmedAt, confirmedAtHeight });
}

function applyFinish(ctx: RuleContext, msg: MsgFinishInference): void {
  const st = ctx.state;
  const rec = liveForTransition(ctx, msg.inferenceId);
  if (rec.status !== InferenceStatus.Started) throw refuse('InvalidTransition', `expected started, got ${rec.status}`);
  if (msg.executorSlot !== rec.executorSlot) throw refuse('WrongExecutorSlot', `expected ${rec.executorSlot}, got ${msg.executorSlot}`);
  verifyProposer(ctx, finishProposerBytes(msg), msg.proposerSig, st.slots[rec.executorSlot]!, rec.executorSlot);
  checkEscrow(ctx, msg.escrowId);
  let actualCost = tokenCost(msg.inputTokens, msg.outputTokens, st.config.tokenPrice);
  if (actualCost > rec.reservedCost) actualCost = rec.reservedCost;
  st.balance = u64(st.balance + (rec.reservedCost - actualCost));
  st.putLive({ ...rec, status: InferenceStatus.Finished, responseHash: keepBytes(msg.responseHash), inputTokens: msg.inputTokens, outputTokens: msg.outputTokens, actualCost });
  updateStats(ctx, rec.executorSlot, (s) => ({ ...s, cost: u64(s.cost + actualCost) }));
}

function applyValidation(ctx: RuleContext, msg: MsgValidation): void {
  const st = ctx.state;
  const rec = liveForValidation(ctx, msg.inferenceId);
  const validator = slotAddress(ctx, msg.validatorSlot);
  if (validator === undefined) throw refuse('SlotNotInGroup', `slot ${msg.validatorSlot}`);
  if (msg.validatorSlot === rec.executorSlot) throw refuse('SelfValidation');
  // The same address validating again is a no-op, before any signature check (MACHINE.md rule 6).
  if (addressHasValidated(ctx, rec, msg.validatorSlot) !== undefined) return;
  if (rec.status < InferenceStatus.Finished || rec.status > InferenceStatus.Invalidated) {
    throw refuse('InvalidTransition', `expected finished or later, got ${rec.status}`);
  }
  verifyProposer(ctx, validationProposerBytes(msg), msg.proposerSig, validator, msg.validatorSlot);
  checkEscrow(ctx, msg.escrowId);
  const validatedBy = bitmapSet(rec.validatedBy, msg.validatorSlot);
  if (rec.status !== InferenceStatus.Finished) {
    st.putLive({ ...rec, validatedBy });
    return;
  }
  const weight = weightOf(ctx, validator);
  if (msg.valid) st.putLive({ ...rec, validatedBy, votesValid: u32(rec.votesValid + weight) });
  else st.putLive({ ...rec, validatedBy, votesInvalid: u32(rec.votesInvalid + weight), status: InferenceStatus.Challenged });
}

function applyValidationVote(ctx: RuleContext, msg: MsgValidationVote): void {
  const st = ctx.state;
  const rec = liveForValidation(ctx, msg.inferenceId);
  const voter = slotAddress(ctx, msg.voterSlot);
  if (voter === undefined) throw refuse('SlotNotInGroup', `slot ${msg.voterSlot}`);
  // Votes on a resolved challenge are no-ops (safe batching), before any other check.
  if (rec.status === InferenceStatus.Validated || rec.status === InferenceStatus.Invalidated) return;
  if (rec.status !== InferenceStatus.Challenged) throw refuse('InvalidTransition', `expected challenged, got ${rec.status}`);
  const existing = addressHasValidated(ctx, rec, msg.voterSlot);
  if (existing !== undefined) {
    throw refuse('DuplicateVote', `slot ${msg.voterSlot} (address ${voter} already participated via slot ${existing})`);
  }
  verifyProposer(ctx, validationVoteProposerBytes(msg), msg.proposerSig, voter, msg.voterSlot);
  checkEscrow(ctx, msg.escrowId);
  let validatedBy = rec.validatedBy;
  const voterSlots = ctx.addressSlots.get(voter) ?? [];
  for (const s of voterSlots) validatedBy = bitmapSet(validatedBy, s);
  const weight = voterSlots.length;
  let next: InferenceRecord = msg.voteValid ? { ...rec, validatedBy, votesValid: u32(rec.votesValid + weight) } : { ...rec, validatedBy, votesInvalid: u32(rec.votesInvalid + weight) };
  const threshold = st.config.voteThreshold;
  if (next.votesInvalid > threshold) {
    next = { ...next, status: InferenceStatus.Invalidated };
    // The executor loses the cost (its host cost floored at 0) and the balance gets it back.
    updateStats(ctx, rec.executorSlot, (s) => ({ ...s, invalid: u32(s.invalid + 1), cost: s.cost < rec.actualCost ? 0n : s.cost - rec.actualCost }));
    st.balance = u64(st.balance + rec.actualCost);
  } else if (next.votesValid > threshold) {
    next = { ...next, status: InferenceStatus.Validated };
  }
  st.putLive(next);
}

function applyTimeout(ctx: RuleContext, msg: MsgTimeoutInference): void {
  const st = ctx.state;
  const rec = liveForTransition(ctx, msg.inferenceId);
  if (msg.reason === TimeoutReason.REFUSED) {
    if (rec.status !== InferenceStatus.Pending) throw refuse('InvalidTimeoutReason', `reason=refused requires pending, got ${rec.status}`);
  } else if (msg.reason === TimeoutReason.EXECUTION) {
    if (rec.status !== InferenceStatus.Started) throw refuse('InvalidTimeoutReason', `reason=execution requires started, got ${rec.status}`);
  } else {
    throw refuse('InvalidTimeoutReason', `unknown reason ${goEnumName(msg.reason)}`);
  }
  const accept = countVotes(ctx, msg.votes, (a) => timeoutVoteBytes(st.escrowId, msg.inferenceId, msg.reason, a));
  const threshold = st.config.voteThreshold;
  if (accept <= threshold) throw refuse('InsufficientVotes', `need >${threshold} accept votes, got ${accept}`);
  st.putLive({ ...rec, status: InferenceStatus.TimedOut });
  updateStats(ctx, rec.executorSlot, (s) => ({ ...s, missed: u32(s.missed + 1) }));
  st.balance = u64(st.balance + rec.reservedCost);
}

/** Go's `%v` of a TimeoutReason: its enum name, or the number when unknown. */
function goEnumName(reason: number): string {
  return reason === 0 ? 'TIMEOUT_REASON_UNSPECIFIED' : String(reason);
}

/** `applyTx`: one tx by its kind. */
export function applyTx(ctx: RuleContext, tx: DevshardTx): void {
  switch (tx.tx.case) {
    case 'startInference':
      return applyStart(ctx, tx.tx.value);
    case 'confirmStart':
      return applyConfirm(ctx, tx.tx.value);
    case 'finishInference':
      return applyFinish(ctx, tx.tx.value);
    case 'validation':
      return applyValidation(ctx, tx.tx.value);
    case 'validationVote':
      return applyValidationVote(ctx, tx.tx.value);
    case 'timeoutInference':
      return applyTimeout(ctx, tx.tx.value);
    case 'revealSeed':
      return; // deprecated: ignored entirely, in any phase
    case 'finalizeRound':
      if (ctx.state.phase !== Phase.Active) throw refuse('AlreadyFinalizing');
      ctx.state.phase = Phase.Finalizing;
      return;
    default:
      if (ctx.rules === 'v5') return applyV5Tx(ctx, tx);
      // Under v2 these kinds are unknown fields: the tx has no message set.
      throw refuse('EmptyTx');
  }
}

/** The kinds v5 adds. */
function applyV5Tx(ctx: RuleContext, tx: DevshardTx): void {
  switch (tx.tx.case) {
    case 'forceHeightSyncTurn':
      return applyForceHeightSyncTurn(ctx, tx.tx.value);
    case 'heartbeat':
      return applyHeartbeat(ctx);
    case 'heightAck':
      return applyHeightAck(ctx, tx.tx.value);
    case 'errorMiss':
      return applyErrorMiss(ctx, tx.tx.value);
    default:
      throw refuse('EmptyTx');
  }
}
