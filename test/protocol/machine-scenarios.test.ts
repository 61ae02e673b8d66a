/**
 * Scenarios of gonka's own tests of devshard/state (commit 8a35022: devshard/state/machine_test.go,
 * seal_test.go, hash_test.go, settlement_test.go, vote_threshold_freeze_test.go;
 * devshard/types/config_test.go), ported as given/when/then tests of the replica. Each test names
 * the Go test it follows. Keys are ours (deterministic), so figures are checked, not roots.
 */
import { describe, expect, it } from 'vitest';
import { sha256, toHex } from '../../src/protocol/bytes.js';
import { orderCandidates, composeDiff } from '../../src/protocol/compose.js';
import { Phase, warmKeysHash, hostStatsHash, restHashV2, stateRoot, liveHash } from '../../src/protocol/hashes.js';
import { InferenceStatus, bitmapIsSet } from '../../src/protocol/inference-record.js';
import { Replica } from '../../src/protocol/replica.js';
import { applyChainBindParams, computeVoteThreshold, defaultSealGraceNonces, defaultSessionConfig, normalizeSessionConfig, sessionConfigFromEscrow } from '../../src/protocol/session-config.js';
import { shouldAutoSealAtNonce } from '../../src/protocol/seal.js';
import { Kit, keyOf, TimeoutReason } from './session-kit.js';

const { REFUSED, EXECUTION } = TimeoutReason;

describe('session config (devshard/types/config.go)', () => {
  it('TestDefaultInferenceSealGraceNonces: group × 1 with a floor of 20', () => {
    expect(defaultSealGraceNonces(1)).toBe(20);
    expect(defaultSealGraceNonces(16)).toBe(20);
    expect(defaultSealGraceNonces(20)).toBe(20);
    expect(defaultSealGraceNonces(64)).toBe(64);
  });

  it('TestNormalizeSessionConfig_FillsInferenceSealGraceNoncesOnlyWhenUnset (and seconds, interval)', () => {
    const base = defaultSessionConfig(4);
    expect(base.inferenceSealGraceNonces).toBe(20);
    expect(base.inferenceSealGraceSeconds).toBe(3600);
    expect(base.autoSealEveryNNonces).toBe(150);
    const set = normalizeSessionConfig({ ...base, inferenceSealGraceNonces: 7, inferenceSealGraceSeconds: 5, autoSealEveryNNonces: 10 }, 4);
    expect([set.inferenceSealGraceNonces, set.inferenceSealGraceSeconds, set.autoSealEveryNNonces]).toEqual([7, 5, 10]);
  });

  it('TestComputeVoteThreshold: n × factor / 100, or n / 2 when the factor is 0', () => {
    expect(computeVoteThreshold(16, 50)).toBe(8);
    expect(computeVoteThreshold(16, 67)).toBe(10);
    expect(computeVoteThreshold(5, 0)).toBe(2);
    expect(computeVoteThreshold(3, 50)).toBe(1);
  });

  it('TestNewStateMachine_BindVoteThreshold_GovernanceFactor67: 6 slots × 67 % = 4', () => {
    const cfg = applyChainBindParams(sessionConfigFromEscrow(6, {}), 6, { voteThresholdFactor: 67 });
    expect(cfg.voteThreshold).toBe(4);
    expect(new Kit({ hosts: 6, config: cfg }).replica.config.voteThreshold).toBe(4);
  });

  it('TestSessionConfigFromEscrow_ZeroFallback / _PerFieldOverride; TestApplyChainSessionBindParams_HonorsZeroValidationRate', () => {
    const d = sessionConfigFromEscrow(16, {});
    expect([d.tokenPrice, d.createDevshardFee, d.feePerNonce, d.inferenceSealGraceNonces, d.inferenceSealGraceSeconds, d.autoSealEveryNNonces]).toEqual([1n, 10_000n, 1_000n, 20, 3600, 150]);
    const o = sessionConfigFromEscrow(16, { tokenPrice: 3n, feePerNonce: 7n, inferenceSealGraceNonces: 160 });
    expect([o.tokenPrice, o.createDevshardFee, o.feePerNonce, o.inferenceSealGraceNonces]).toEqual([3n, 10_000n, 7n, 160]);
    const bound = applyChainBindParams(o, 16, { validationRate: 0, voteThresholdFactor: 50, refusalTimeout: 0n, executionTimeout: 900n });
    expect([bound.validationRate, bound.voteThreshold, bound.refusalTimeout, bound.executionTimeout]).toEqual([0, 8, 60n, 900n]);
  });

  it('TestNewStateMachine_NormalizesInferenceSealGraceNonces: a zero grace is normalised at bind', () => {
    const k = new Kit({ config: { inferenceSealGraceNonces: 0 } });
    expect(k.replica.config.inferenceSealGraceNonces).toBe(20);
  });
});

describe('init and fees (machine.go NewStateMachine, applyCore step 5)', () => {
  it('TestNewStateMachine_DeductsCreateDevshardFee', () => {
    const k = new Kit({ amount: 1000n, config: { createDevshardFee: 10n } });
    expect(k.replica.balance).toBe(990n);
    expect(k.replica.fees).toBe(10n);
    expect(k.replica.hostStats()).toHaveLength(3);
    expect(k.replica.phase).toBe(Phase.Active);
  });

  it('TestNewStateMachine_CreateDevshardFeeInsufficientBalance: the exact text', () => {
    expect(() => new Kit({ amount: 5n, config: { createDevshardFee: 10n } })).toThrow('insufficient escrow balance: create devshard fee 10 exceeds escrow amount 5');
  });

  it('TestApplyDiff_FeePerNonce_Deducted: every Active diff pays fee_per_nonce', () => {
    const k = new Kit({ amount: 1000n, config: { createDevshardFee: 10n, feePerNonce: 7n } });
    k.apply([]);
    k.apply([]);
    expect(k.replica.balance).toBe(1000n - 10n - 14n);
    expect(k.replica.fees).toBe(24n);
  });

  it('TestApplyDiff_FeePerNonce_InsufficientBalance_Rollback: the diff is refused whole', () => {
    const k = new Kit({ amount: 110n, config: { createDevshardFee: 0n, feePerNonce: 10n } });
    k.apply([k.start(1n, { inputLength: 50n, maxTokens: 50n })]); // reserves 100, fee 10: balance 0
    k.refused([], 'InsufficientBalance', 'insufficient escrow balance');
  });

  it('TestApplyDiff_FeePerNonce_NotChargedDuringFinalization: the finalize diff is free', () => {
    const k = new Kit({ amount: 1000n, config: { createDevshardFee: 10n, feePerNonce: 7n } });
    k.apply([k.finalize()]);
    expect(k.replica.phase).toBe(Phase.Finalizing);
    expect(k.replica.balance).toBe(990n);
    expect(k.replica.fees).toBe(10n);
  });

  it('TestApplyLocalBestEffort_FeePerNonce_InsufficientBalance_Rollback', () => {
    const k = new Kit({ amount: 5n, config: { feePerNonce: 10n } });
    expect(() => k.replica.applyLocalBestEffort(1n, [])).toThrow('insufficient escrow balance');
    expect(k.replica.latestNonce).toBe(0n);
  });
});

describe('diffs (machine.go ApplyDiff, applyCore)', () => {
  it('TestApplyDiff_UserSigVerification: another signer is refused, with the address in the text', () => {
    const k = new Kit();
    const wrong = keyOf('not-the-user');
    const { signDiff } = require_compose();
    const d = signDiff(k.escrowId, 1n, [], new Uint8Array(0), wrong.priv);
    expect(() => k.replica.applyDiff(d)).toThrow(`invalid user signature: expected ${k.user.address}, got ${wrong.address}`);
    expect(() => k.replica.applyDiff({ ...d, userSig: new Uint8Array(64) })).toThrow('invalid user signature: invalid signature length: 64');
    k.apply([]);
  });

  it('the user signature is checked before the nonce (MACHINE.md rule 8)', () => {
    const k = new Kit();
    const { signDiff } = require_compose();
    const d = signDiff(k.escrowId, 5n, [], new Uint8Array(0), keyOf('x').priv);
    expect(() => k.replica.applyDiff(d)).toThrow(/^invalid user signature/);
  });

  it('TestApplyDiff_NonceSequential: a gap or a repeat is refused with expected/got', () => {
    const k = new Kit();
    k.apply([]);
    const { signDiff } = require_compose();
    expect(() => k.replica.applyDiff(signDiff(k.escrowId, 3n, [], new Uint8Array(0), k.user.priv))).toThrow('invalid nonce: must be sequential: expected 2, got 3');
    expect(() => k.replica.applyDiff(signDiff(k.escrowId, 1n, [], new Uint8Array(0), k.user.priv))).toThrow('invalid nonce: must be sequential: expected 2, got 1');
  });

  it('TestApplyDiff_StartInference: reservation (100 + 50) × 1, executor 1 % 3', () => {
    const k = new Kit();
    k.apply([k.start(1n)]);
    const rec = k.replica.inference(1n)!;
    expect(rec.status).toBe(InferenceStatus.Pending);
    expect(rec.reservedCost).toBe(150n);
    expect(rec.executorSlot).toBe(1);
    expect(k.replica.balance).toBe(10_000n - 150n);
  });

  it('TestApplyDiff_MultipleMsgStartInference / TestApplyDiff_InferenceIDMustMatchNonce', () => {
    const k = new Kit();
    k.refused([k.start(1n), k.start(1n)], 'MultipleStartMsgs', 'at most one MsgStartInference per diff');
    k.refused([k.start(2n)], 'InvalidInferenceID', 'inference_id must equal diff nonce');
  });

  it('TestApplyDiff_DuplicateInferenceID: an id live or sealed cannot start again', () => {
    const k = new Kit({ config: { inferenceSealGraceNonces: 1, autoSealEveryNNonces: 1 } });
    k.apply([k.start(1n)]);
    k.apply([k.confirm(1n)]);
    k.apply([k.timeout(1n, EXECUTION, [0, 2])]); // terminal, clock known: sealed at once
    expect(k.replica.isSealed(1n)).toBe(true);
    // Ids are nonces and nonces never repeat, so the precheck refuses a reused id first.
    k.refused([k.start(1n)], 'InvalidInferenceID', 'inference_id must equal diff nonce');
  });

  it('TestApplyDiff_EscrowBalanceCheck: a reservation above the balance is refused', () => {
    const k = new Kit({ amount: 100n });
    k.refused([k.start(1n)], 'InsufficientBalance', 'insufficient escrow balance');
  });

  it('TestApplyDiff_CostOverflow_StartInference: (input + max) × price beyond uint64', () => {
    const k = new Kit({ config: { tokenPrice: 2n } });
    k.refused([k.start(1n, { maxTokens: (1n << 64n) - 1n })], 'CostOverflow', 'cost calculation overflows uint64');
    k.refused([k.start(1n, { inputLength: 1n << 63n, maxTokens: 0n })], 'CostOverflow');
  });

  it('TestApplyDiff_AtomicRollback: a valid confirm then a bad finish leaves the record pending', () => {
    const k = new Kit();
    k.apply([k.start(1n)]);
    k.refused([k.confirm(1n), k.finish(1n, { slot: 2 })], 'WrongExecutorSlot', 'executor_slot does not match assigned executor: expected 1, got 2');
    expect(k.replica.inference(1n)!.status).toBe(InferenceStatus.Pending);
    expect(k.replica.latestNonce).toBe(1n);
  });

  it('TestApplyDiff_PostStateRoot_Valid / _Mismatch / _Empty_Accepted', () => {
    const k = new Kit();
    const local = Replica.create(k.replica.params);
    const root = local.applyLocal(1n, [k.start(1n)]).root;
    const bad = sha256(new Uint8Array([1]));
    const err = k.refused([k.start(1n)], 'PostStateRootMismatch', undefined, bad);
    expect(err.message).toBe(`post_state_root does not match computed state root: diff ${toHex(bad)}, computed ${toHex(root)}`);
    expect(k.apply([k.start(1n)], root).root).toEqual(root);
    k.apply([]); // empty: not compared
  });

  it('an empty DevshardTx is refused: devshard tx has no message set', () => {
    const k = new Kit();
    const empty = k.finalize();
    empty.tx = { case: undefined };
    k.refused([empty], 'EmptyTx', 'devshard tx has no message set');
  });
});

describe('inference lifecycle (machine.go applyConfirmStart, applyFinishInference)', () => {
  it('TestApplyDiff_ConfirmStart / _InvalidReceipt: the receipt must recover to the executor', () => {
    const k = new Kit();
    k.apply([k.start(1n)]);
    const other = k.slotKeys[2]!;
    k.refused([k.confirm(1n, 1000n, other)], 'InvalidExecutorSig', `invalid executor signature: expected executor ${k.slotKeys[1]!.address} (slot 1), got ${other.address}`);
    k.apply([k.confirm(1n, 1234n)]);
    expect(k.replica.inference(1n)!.status).toBe(InferenceStatus.Started);
    expect(k.replica.inference(1n)!.confirmedAt).toBe(1234n);
    k.refused([k.confirm(1n)], 'InvalidTransition', 'invalid status transition: expected pending, got 1');
  });

  it('TestApplyDiff_FinishInference: cost (80 + 40) × 1, surplus back, host cost', () => {
    const k = new Kit();
    k.startConfirmFinish(1n);
    const rec = k.replica.inference(1n)!;
    expect(rec.status).toBe(InferenceStatus.Finished);
    expect(rec.actualCost).toBe(120n);
    expect(k.replica.balance).toBe(10_000n - 120n);
    expect(k.replica.hostStats()[1]!.cost).toBe(120n);
  });

  it('TestFinishInference_CostCapped: a cost above the reservation is capped, nothing comes back', () => {
    const k = new Kit();
    k.apply([k.start(1n)]);
    k.apply([k.confirm(1n)]);
    k.apply([k.finish(1n, { inputTokens: 200n, outputTokens: 100n })]);
    expect(k.replica.inference(1n)!.actualCost).toBe(150n);
    expect(k.replica.balance).toBe(10_000n - 150n);
  });

  it('TestApplyDiff_FinishInference_InvalidProposerSig / _WrongProposer, then TestReplayAttack_CrossEscrow', () => {
    const k = new Kit();
    k.apply([k.start(1n)]);
    k.apply([k.confirm(1n)]);
    const wrong = k.slotKeys[0]!;
    k.refused([k.finish(1n, { signer: wrong })], 'InvalidProposerSig', `invalid proposer signature: not a group member: expected ${k.slotKeys[1]!.address}, got ${wrong.address}`);
    // Signature before escrow id: a foreign escrow id with the right signer reports the escrow id.
    k.refused([k.finish(1n, { escrowId: 'escrow-2' })], 'EscrowIDMismatch', 'escrow_id does not match session: expected escrow-1, got escrow-2');
    k.refused([k.finish(1n, { escrowId: 'escrow-2', signer: wrong })], 'InvalidProposerSig');
  });

  it('finishing a pending record, or one not found', () => {
    const k = new Kit();
    k.apply([k.start(1n)]);
    k.refused([k.finish(1n)], 'InvalidTransition', 'invalid status transition: expected started, got 0');
    k.refused([k.finish(9n)], 'InferenceNotFound', 'inference not found: inference 9');
  });
});

describe('timeouts (machine.go applyTimeout)', () => {
  it('TestApplyDiff_Timeout_Refused: accept votes above the threshold; reservation back; missed++', () => {
    const k = new Kit({ hosts: 5 }); // threshold 2
    k.apply([k.start(1n)]);
    k.apply([k.timeout(1n, REFUSED, [0, 2, 3])]);
    expect(k.replica.inference(1n)!.status).toBe(InferenceStatus.TimedOut);
    expect(k.replica.hostStats()[1]!.missed).toBe(1);
    expect(k.replica.balance).toBe(10_000n);
  });

  it('TestApplyDiff_Timeout_Execution / _WrongReason / _AfterFinish', () => {
    const k = new Kit({ hosts: 5 });
    k.apply([k.start(1n)]);
    k.refused([k.timeout(1n, EXECUTION, [0, 2, 3])], 'InvalidTimeoutReason', 'timeout reason does not match inference status: reason=execution requires started, got 0');
    k.refused([k.timeout(1n, 0 as TimeoutReason, [0, 2, 3])], 'InvalidTimeoutReason', 'timeout reason does not match inference status: unknown reason TIMEOUT_REASON_UNSPECIFIED');
    k.apply([k.confirm(1n)]);
    k.refused([k.timeout(1n, REFUSED, [0, 2, 3])], 'InvalidTimeoutReason', 'timeout reason does not match inference status: reason=refused requires pending, got 1');
    k.apply([k.timeout(1n, EXECUTION, [0, 2, 3])]);
    expect(k.replica.inference(1n)!.status).toBe(InferenceStatus.TimedOut);
    k.refused([k.timeout(1n, EXECUTION, [0, 2, 3])], 'InvalidTimeoutReason'); // TestApplyDiff_DuplicateTimeout
  });

  it('TestApplyDiff_Timeout_InsufficientVotes: weight must exceed the threshold', () => {
    const k = new Kit({ hosts: 5 });
    k.apply([k.start(1n)]);
    k.refused([k.timeout(1n, REFUSED, [0, 2])], 'InsufficientVotes', 'insufficient votes for timeout: need >2 accept votes, got 2');
    k.refused([k.timeout(1n, REFUSED, [0, 2, 3], false)], 'InsufficientVotes', 'insufficient votes for timeout: need >2 accept votes, got 0');
  });

  it('TestApplyDiff_Timeout_MultiSlotWeight: one vote of an address with 3 slots weighs 3', () => {
    const k = new Kit({ slotsPerHost: [3, 1, 1] });
    k.apply([k.start(1n)]);
    k.refused([k.timeout(1n, REFUSED, [4])], 'InsufficientVotes', 'insufficient votes for timeout: need >2 accept votes, got 1');
    k.apply([k.timeout(1n, REFUSED, [4, 0])]);
    expect(k.replica.inference(1n)!.status).toBe(InferenceStatus.TimedOut);
  });

  it('TestApplyDiff_Timeout_DuplicateVoterSlot: one vote per address; a slot outside the group', () => {
    const k = new Kit({ slotsPerHost: [2, 1, 1, 1] });
    k.apply([k.start(1n)]);
    k.refused([k.timeout(1n, REFUSED, [0, 1, 2])], 'DuplicateVote', 'duplicate vote from slot: slot 1');
    const outside = k.timeout(1n, REFUSED, [0]);
    (outside.tx.value as { votes: Array<{ voterSlot: number }> }).votes.push({ ...k.timeoutVote(1n, 0, REFUSED), voterSlot: 9 });
    k.refused([outside], 'SlotNotInGroup', 'slot not in group: slot 9');
  });
});

describe('validations (machine.go applyValidation, applyValidationVote)', () => {
  it('TestApplyDiff_Validation_Valid / TestAttack_SybilValidationBypass: valid=true keeps Finished, adds weight', () => {
    const k = new Kit({ hosts: 5 });
    k.startConfirmFinish(1n);
    k.apply([k.validation(1n, 0, true)]);
    const rec = k.replica.inference(1n)!;
    expect(rec.status).toBe(InferenceStatus.Finished);
    expect(rec.votesValid).toBe(1);
    expect(bitmapIsSet(rec.validatedBy, 0)).toBe(true);
  });

  it('TestApplyDiff_Validation_SelfValidation and a slot outside the group', () => {
    const k = new Kit({ hosts: 5 });
    k.startConfirmFinish(1n);
    k.refused([k.validation(1n, 1, true)], 'SelfValidation', 'validator cannot be the executor');
    k.refused([k.validation(1n, 7, true, k.slotKeys[0]!)], 'SlotNotInGroup', 'slot not in group: slot 7');
  });

  it('validating a record not finished yet', () => {
    const k = new Kit({ hosts: 5 });
    k.apply([k.start(1n)]);
    k.refused([k.validation(1n, 0, true)], 'InvalidTransition', 'invalid status transition: expected finished or later, got 0');
  });

  it('TestApplyDiff_Validation_Invalid_ChallengeVoting: invalid votes above the threshold invalidate; refund; invalid++', () => {
    const k = new Kit({ hosts: 5 });
    k.startConfirmFinish(1n);
    k.apply([k.validation(1n, 0, false)]);
    expect(k.replica.inference(1n)!.status).toBe(InferenceStatus.Challenged);
    k.apply([k.vote(1n, 2, false), k.vote(1n, 3, false)]);
    const rec = k.replica.inference(1n)!;
    expect(rec.status).toBe(InferenceStatus.Invalidated);
    expect(rec.votesInvalid).toBe(3);
    expect(k.replica.hostStats()[1]).toMatchObject({ invalid: 1, cost: 0n });
    expect(k.replica.balance).toBe(10_000n);
  });

  it('TestLateValidation_TerminalStateCredit: a late validation on a terminal record only sets its bit', () => {
    const k = new Kit({ hosts: 5 });
    k.startConfirmFinish(1n);
    k.apply([k.validation(1n, 0, false)]);
    k.apply([k.vote(1n, 2, true), k.vote(1n, 3, true)]);
    expect(k.replica.inference(1n)!.status).toBe(InferenceStatus.Challenged); // 2 valid, not > 2
    k.apply([k.vote(1n, 4, true)]);
    expect(k.replica.inference(1n)!.status).toBe(InferenceStatus.Validated);
    // TestApplyDiff_ValidationVote_AlreadyResolved: a vote on a resolved record is a no-op, even unsigned junk.
    const junk = k.vote(1n, 1, false);
    (junk.tx.value as { proposerSig: Uint8Array }).proposerSig = new Uint8Array(3);
    const before = k.replica.inference(1n);
    k.apply([junk]);
    expect(k.replica.inference(1n)).toBe(before);
  });

  it('TestApplyDiff_Validation_DuplicateAddress: the same address again is a no-op, before any signature check', () => {
    const k = new Kit({ slotsPerHost: [2, 1, 1] });
    k.startConfirmFinish(1n); // executor slot 1 (host 0)
    k.apply([k.validation(1n, 2, true)]);
    const rec = k.replica.inference(1n)!;
    const junk = k.validation(1n, 2, false, keyOf('anyone'));
    k.apply([junk]);
    expect(k.replica.inference(1n)).toBe(rec);
  });

  it('TestApplyDiff_ValidationVote_MultiSlotWeight / _MultiSlotDedup', () => {
    const k = new Kit({ slotsPerHost: [1, 1, 3], config: { voteThreshold: 4 } }); // slots 2,3,4 = host 2
    k.startConfirmFinish(1n);
    k.apply([k.validation(1n, 0, false)]);
    k.refused([k.vote(1n, 2, false), k.vote(1n, 3, false)], 'DuplicateVote', `duplicate vote from slot: slot 3 (address ${k.hosts[2]!.address} already participated via slot 2)`);
    k.apply([k.vote(1n, 4, false)]);
    let rec = k.replica.inference(1n)!;
    expect(rec.votesInvalid).toBe(4); // 1 + 3: not above 4
    expect(rec.status).toBe(InferenceStatus.Challenged);
    expect([2, 3, 4].every((s) => bitmapIsSet(rec.validatedBy, s))).toBe(true);
    k.apply([k.vote(1n, 1, false)]); // the executor's own vote counts too
    rec = k.replica.inference(1n)!;
    expect(rec.status).toBe(InferenceStatus.Invalidated);
  });

  it('TestApplyDiff_Validation_Invalid_CostUnderflowGuard: host cost floors at 0', () => {
    const k = new Kit({ hosts: 5 });
    k.startConfirmFinish(1n);
    k.startConfirmFinish(4n);
    k.apply([k.validation(1n, 0, false)]);
    k.apply([k.vote(1n, 2, false), k.vote(1n, 3, false)]);
    expect(k.replica.hostStats()[1]!.cost).toBe(0n);
  });

  it('TestApplyDiff_HostStatsValidationCountersRemainZero', () => {
    const k = new Kit({ hosts: 5 });
    k.startConfirmFinish(1n);
    k.apply([k.validation(1n, 0, true)]);
    expect(k.replica.hostStats().every((h) => h.requiredValidations === 0 && h.completedValidations === 0)).toBe(true);
  });
});

describe('phases (machine.go applyFinalizeRound, applyCore step 6)', () => {
  it('TestPhase_ActiveToFinalizing / TestPhase_FinalizingToSettlement_Deadline: Settlement at FinalizeNonce + N', () => {
    const k = new Kit();
    k.apply([k.finalize()]);
    expect(k.replica.phase).toBe(Phase.Finalizing);
    expect(k.replica.finalizeNonce).toBe(1n);
    k.apply([]);
    k.apply([k.revealSeed(0)]);
    expect(k.replica.phase).toBe(Phase.Finalizing);
    k.apply([]);
    expect(k.replica.phase).toBe(Phase.Settlement);
    expect(k.replica.latestNonce).toBe(4n);
  });

  it('finalizing twice: session is already finalizing', () => {
    const k = new Kit();
    k.apply([k.finalize()]);
    k.refused([k.finalize()], 'AlreadyFinalizing', 'session is already finalizing');
  });

  it('TestPhase_StartInference_RejectedInBothFinalizingAndSettlement', () => {
    const k = new Kit();
    k.apply([k.finalize()]);
    k.refused([k.start(k.nextNonce)], 'SessionFinalizing', 'session is finalizing: no new inferences');
    for (let i = 0; i < 3; i++) k.apply([]);
    expect(k.replica.phase).toBe(Phase.Settlement);
    k.refused([k.start(k.nextNonce)], 'SessionFinalizing');
  });

  it('TestApplyDiff_FinalizeRound_HostTxsStillAccepted: confirms and finishes after finalize', () => {
    const k = new Kit();
    k.apply([k.start(1n)]);
    k.apply([k.finalize()]);
    k.apply([k.confirm(1n)]);
    k.apply([k.finish(1n)]);
    expect(k.replica.inference(1n)!.status).toBe(InferenceStatus.Finished);
  });

  it('TestPhase_RevealSeed_AcceptedAsNoOpInSettlement: the root does not move after Settlement', () => {
    const k = new Kit();
    k.apply([k.finalize()]);
    for (let i = 0; i < 3; i++) k.apply([]);
    const root = k.replica.stateRoot();
    k.apply([k.revealSeed(9)]);
    k.apply([]);
    expect(k.replica.stateRoot()).toEqual(root);
  });

  it('TestFinalizeDeadlineDrainsLiveIntoSealedAcc / TestV2_FinalizeDrainDeterministicOrder', () => {
    const k = new Kit();
    k.startConfirmFinish(1n);
    k.apply([k.start(4n)]);
    expect(k.replica.sealedAcc).toBeUndefined();
    k.apply([k.finalize()]);
    for (let i = 0; i < 3; i++) k.apply([]);
    expect(k.replica.phase).toBe(Phase.Settlement);
    expect(k.replica.liveRecords()).toEqual([]);
    expect(k.replica.sealedAcc).toHaveLength(32);
    expect(k.replica.isSealed(1n) && k.replica.isSealed(4n)).toBe(true);
  });

  it('TestPhase_StateRootDiffersPerPhase: the phase byte is hashed', () => {
    const hs = hostStatsHash([{ slotId: 0, missed: 0, invalid: 0, cost: 100n, requiredValidations: 0, completedValidations: 0 }]);
    const rest = restHashV2(500n, new Uint8Array(32), liveHash([]), warmKeysHash(new Map()));
    const roots = [Phase.Active, Phase.Finalizing, Phase.Settlement].map((p) => toHex(stateRoot(hs, 0n, rest, 'v2', p)));
    expect(new Set(roots).size).toBe(3);
    // TestComputeStateRoot_DifferentVersion
    expect(toHex(stateRoot(hs, 0n, rest, 'v1', Phase.Active))).not.toBe(roots[0]);
  });
});

describe('seal (seal.go)', () => {
  it('TestNextAutoSealNonce: the default interval is 150', () => {
    expect(shouldAutoSealAtNonce(150, 149n)).toBe(false);
    expect(shouldAutoSealAtNonce(150, 150n)).toBe(true);
    expect(shouldAutoSealAtNonce(150, 300n)).toBe(true);
    expect(new Kit().replica.config.autoSealEveryNNonces).toBe(150);
  });

  it('auto-seal at 150 with the default grace (20 nonces, 3600 s): terminal records by the nonce gate, finished ones by the clock', () => {
    const k = new Kit({ hosts: 3, amount: 1_000_000n });
    // id 1: timed out (terminal); id 2: finished at t=1000; id 3: finished at t=10_000 (clock source)
    k.apply([k.start(1n)]);
    k.apply([k.timeout(1n, REFUSED, [0, 2])]);
    k.apply([k.start(3n)]);
    k.apply([k.confirm(3n, 1000n)]);
    k.apply([k.finish(3n)]);
    k.apply([k.start(6n)]);
    k.apply([k.confirm(6n, 1000n + 3599n)]);
    k.apply([k.finish(6n)]);
    while (k.nextNonce < 150n) k.apply([]);
    const res = k.apply([]);
    // Clock = 4599: id 3 has 3600 - 3599 = 1 s left; id 1 passes (terminal, 150 >= 1 + 20).
    expect(res.sealed).toEqual([1n]);
    expect(k.replica.sealedAcc).toHaveLength(32);
    // A later confirmation moves the clock: id 3 seals at 300, id 6 stays (its own clock gate).
    k.apply([k.start(151n)]);
    k.apply([k.confirm(151n, 1000n + 3600n)]);
    while (k.nextNonce < 300n) k.apply([]);
    expect(k.apply([]).sealed).toEqual([3n]);
    // TestLateValidation_RejectedAfterSeal / TestLateValidationVote_RejectedAfterSeal
    k.refused([k.validation(3n, 1, true)], 'InferenceSealed', 'inference sealed: late validation not accepted: inference 3');
    k.refused([k.vote(3n, 1, true)], 'InferenceSealed', 'inference sealed: late validation not accepted: inference 3');
    // confirm/finish/timeout on a sealed id (MACHINE.md rule 11)
    k.refused([k.timeout(1n, REFUSED, [0, 2])], 'InvalidTransition', 'invalid status transition: inference 1 is sealed');
  });

  it('grace nonces: a terminal record seals only when nonce >= id + grace', () => {
    const k = new Kit({ config: { autoSealEveryNNonces: 2, inferenceSealGraceNonces: 4 } });
    k.apply([k.start(1n)]);
    k.apply([k.confirm(1n)]); // clock known from now on
    k.apply([k.start(3n)]);
    k.apply([k.timeout(3n, REFUSED, [0, 1])]); // nonce 4: 4 < 3 + 4
    expect(k.replica.isSealed(3n)).toBe(false);
    k.apply([]);
    expect(k.apply([]).sealed).toEqual([]); // 6 < 7
    k.apply([]);
    expect(k.apply([]).sealed).toEqual([3n]); // 8 >= 7
  });

  it('TestAutoSealStateClock_SkipsUnconfirmedInTailWindow: no confirmed record, no seal', () => {
    const k = new Kit({ config: { autoSealEveryNNonces: 2, inferenceSealGraceNonces: 1 } });
    k.apply([k.start(1n)]);
    expect(k.apply([k.timeout(1n, REFUSED, [0, 2])]).sealed).toEqual([]); // terminal, but the clock is unknown
    expect(k.replica.isSealed(1n)).toBe(false);
  });

  it('an interval nonce carrying the finalize tx does not seal (MACHINE.md rule 1)', () => {
    const k = new Kit({ config: { autoSealEveryNNonces: 3, inferenceSealGraceNonces: 1 } });
    k.apply([k.start(1n)]);
    k.apply([k.confirm(1n), k.timeout(1n, EXECUTION, [0, 2])]);
    expect(k.apply([k.finalize()]).sealed).toEqual([]);
  });
});

describe('hashes (hash.go)', () => {
  it('the warm-keys hash of no keys is sha256 of nothing', () => {
    expect(toHex(warmKeysHash(new Map()))).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });

  it('TestWarmKey_StateRootChangesWithWarmKeys / TestWarmKey_ConfirmStartWithWarmKey: a binding is hashed', () => {
    const warm = keyOf('warm-1');
    const k = new Kit({ warmKeys: (w, c) => w === warm.address && c === keyOf('host-1').address });
    k.apply([k.start(1n)]);
    const plain = Replica.create(k.replica.params);
    const res = k.apply([k.confirm(1n, 1000n, warm)]);
    expect(res.warmKeyBindings).toEqual([{ slot: 1, warm: warm.address }]);
    expect(k.replica.warmKeys.get(1)).toBe(warm.address);
    expect(plain.stateRoot()).not.toEqual(k.replica.stateRoot());
    // TestWarmKey_BindingCached: a second warm key for the same slot is refused once one is bound.
    k.warmKeys = () => true;
    k.apply([]);
    k.apply([k.start(4n)]);
    k.refused([k.confirm(4n, 1000n, keyOf('warm-2'))], 'InvalidExecutorSig');
  });

  it('TestWarmKey_FinishInferenceWithWarmKey / _ValidationWithWarmKey / _TimeoutVoteWithWarmKey', () => {
    const warm1 = keyOf('warm-1');
    const warm2 = keyOf('warm-2');
    const k = new Kit({ hosts: 5, warmKeys: (w, c) => (w === warm1.address && c === keyOf('host-1').address) || (w === warm2.address && c === keyOf('host-2').address) });
    k.apply([k.start(1n)]);
    k.apply([k.confirm(1n)]);
    expect(k.apply([k.finish(1n, { signer: warm1 })]).warmKeyBindings).toEqual([{ slot: 1, warm: warm1.address }]);
    expect(k.apply([k.validation(1n, 2, true, warm2)]).warmKeyBindings).toEqual([{ slot: 2, warm: warm2.address }]);
    k.apply([k.start(5n)]);
    const t = k.timeout(5n, TimeoutReason.REFUSED, [0, 3]);
    (t.tx.value as { votes: unknown[] }).votes.push(k.timeoutVote(5n, 2, TimeoutReason.REFUSED, true, warm2));
    k.apply([t]);
    expect(k.replica.inference(5n)!.status).toBe(InferenceStatus.TimedOut);
    expect([...k.replica.warmKeys]).toEqual([
      [1, warm1.address],
      [2, warm2.address],
    ]);
  });

  it('TestApplyDiff_RevealSeed_NoNewWarmKeyBinding: a reveal seed binds nothing', () => {
    const k = new Kit({ warmKeys: () => true });
    k.apply([k.finalize()]);
    expect(k.apply([k.revealSeed(0)]).warmKeyBindings).toEqual([]);
    expect(k.replica.warmKeys.size).toBe(0);
  });

  it('best effort keeps a warm key bound by a tx it then skips (MACHINE.md rule 10); a strict apply rolls it back', () => {
    const warm = keyOf('warm-1');
    const k = new Kit({ warmKeys: (w) => w === warm.address });
    k.apply([k.start(1n)]);
    k.apply([k.confirm(1n)]);
    const bad = k.finish(1n, { signer: warm, escrowId: 'other' }); // signature fine (binds), escrow id refused
    k.refused([bad], 'EscrowIDMismatch');
    expect(k.replica.warmKeys.size).toBe(0);
    const c = composeDiff(k.replica, { pending: [bad], extra: [], warmKeys: k.warmKeys });
    expect(c.applied).toEqual([]);
    expect(c.warmKeyBindings).toEqual([{ slot: 1, warm: warm.address }]);
  });

  it('TestWarmKey_ConfirmStartRejectsUnauthorizedKey / _NoResolver', () => {
    const k = new Kit();
    k.apply([k.start(1n)]);
    k.refused([k.confirm(1n, 1000n, keyOf('warm-1'))], 'InvalidExecutorSig');
    k.warmKeys = () => false;
    k.refused([k.confirm(1n, 1000n, keyOf('warm-1'))], 'InvalidExecutorSig');
  });
});

describe('user-side composition (user/session.go composeDiffLocked, machine.go ApplyLocalBestEffort)', () => {
  it('pending txs ordered confirm < finish < validation < vote < rest, the start last; failing txs skipped', () => {
    const k = new Kit({ hosts: 5 });
    k.startConfirmFinish(1n);
    k.apply([k.start(4n)]);
    const stale = k.finish(9n);
    const pending = [k.validation(1n, 0, true), k.revealSeed(2), stale, k.confirm(4n)];
    const order = orderCandidates(pending, [k.start(5n)]).map((t) => t.tx.case);
    expect(order).toEqual(['confirmStart', 'finishInference', 'validation', 'revealSeed', 'startInference']);
    const c = composeDiff(k.replica, { pending, extra: [k.start(5n)] });
    expect(c.nonce).toBe(5n);
    expect(c.applied.map((t) => t.tx.case)).toEqual(['confirmStart', 'validation', 'revealSeed', 'startInference']);
    expect(c.skipped.map((s) => s.error.message)).toEqual(['inference not found: inference 9']);
    expect(c.root).toEqual(k.replica.stateRoot());
  });

  it('a refused start aborts the nonce: mandatory start inference', () => {
    const k = new Kit({ amount: 100n });
    expect(() => composeDiff(k.replica, { pending: [], extra: [k.start(1n)] })).toThrow('mandatory start inference: insufficient escrow balance');
    expect(k.replica.latestNonce).toBe(0n);
  });
});

import * as compose from '../../src/protocol/compose.js';
function require_compose() {
  return compose;
}
