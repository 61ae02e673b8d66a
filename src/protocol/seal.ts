/**
 * The sealed accumulator: auto-seal every N nonces and the drain at Settlement
 * (gonka 8a35022 devshard/state/seal.go `autoSealLocked`, `stateClockLocked`,
 * `drainLiveIntoSealedAccLocked`, `shouldAutoSealAtNonce`; hash.go `FoldSealedAccumulator`).
 * v5 changes two things (zpoken/gonka@86cff503 state/seal.go, machine.go `settleLiveRecordLocked`):
 * a Finished record's clock gate waits ExecutionTimeout more (`FinishedClockRequiredSeconds`), and
 * the drain pays a record still Pending or Started its reservation before folding it.
 */
import { foldSealedAcc } from './hashes.js';
import { inferenceEntry, InferenceStatus, type InferenceRecord } from './inference-record.js';
import type { SessionState } from './session-state.js';
import type { RuleSet } from './versions.js';

/** `stateClockWindowFactor`: the clock scans the 3·N highest live ids. */
export const STATE_CLOCK_WINDOW_FACTOR = 3;

/** `shouldAutoSealAtNonce` (interval 0 would mean every nonce; normalisation never leaves 0). */
export const shouldAutoSealAtNonce = (interval: number, nonce: bigint): boolean => interval === 0 || nonce % BigInt(interval) === 0n;

/**
 * `stateClockLocked`: the largest `confirmed_at > 0` among the 3·N highest live ids; undefined
 * when there is none (then nothing auto-seals).
 */
export function stateClock(state: SessionState): bigint | undefined {
  if (state.liveCount === 0) return undefined;
  const window = Math.max(state.slots.length * STATE_CLOCK_WINDOW_FACTOR, STATE_CLOCK_WINDOW_FACTOR);
  const records = [...state.liveRecords()]; // ascending id
  let clock: bigint | undefined;
  for (let i = Math.max(0, records.length - window); i < records.length; i++) {
    const c = records[i]!.confirmedAt;
    if (c > 0n && (clock === undefined || c > clock)) clock = c;
  }
  return clock;
}

/** Finished needs both gates; terminal statuses only the nonce gate; others never auto-seal. */
const sealEligible = (s: InferenceStatus): boolean => s === InferenceStatus.Finished || s === InferenceStatus.Validated || s === InferenceStatus.Invalidated || s === InferenceStatus.TimedOut;
const terminal = (s: InferenceStatus): boolean => s === InferenceStatus.Validated || s === InferenceStatus.Invalidated || s === InferenceStatus.TimedOut;

function fold(state: SessionState, records: readonly InferenceRecord[], sealNonce: bigint): InferenceRecord[] {
  let acc = state.sealedAcc;
  for (const rec of records) {
    acc = foldSealedAcc(acc, sealNonce, rec.id, inferenceEntry(rec));
    state.markSealed(rec.id, sealNonce);
  }
  if (records.length > 0) {
    state.sealedAcc = acc;
    state.sealedAny = true;
  }
  return [...records];
}

/**
 * The seconds a Finished record's clock gate needs: v2 the seal grace; v5 the grace plus
 * ExecutionTimeout (both floored at 0), since confirmed_at is the start of the execution window.
 */
export function finishedClockSeconds(state: SessionState, rules: RuleSet): bigint {
  const grace = BigInt(state.config.inferenceSealGraceSeconds);
  if (rules === 'v2') return grace;
  const timeout = state.config.executionTimeout;
  return (grace < 0n ? 0n : grace) + (timeout < 0n ? 0n : timeout);
}

/**
 * `autoSealLocked` at `sealNonce`: folds, in ascending id, every live record that passed
 * `sealNonce >= id + grace_nonces` and, when Finished, `required - (clock - confirmed_at) <= 0`
 * (`finishedClockSeconds`). Returns the sealed records (as they were sealed).
 */
export function autoSeal(state: SessionState, sealNonce: bigint, rules: RuleSet = 'v2'): InferenceRecord[] {
  if (state.liveCount === 0) return [];
  const clock = stateClock(state);
  if (clock === undefined || clock === 0n) return [];
  const graceNonces = BigInt(state.config.inferenceSealGraceNonces);
  const graceSeconds = finishedClockSeconds(state, rules);
  const eligible: InferenceRecord[] = [];
  for (const rec of state.liveRecords()) {
    if (!sealEligible(rec.status)) continue;
    if (sealNonce < rec.id + graceNonces) continue;
    if (terminal(rec.status) || graceSeconds - (clock - rec.confirmedAt) <= 0n) eligible.push(rec);
  }
  return fold(state, eligible, sealNonce);
}

/**
 * `drainLiveIntoSealedAccLocked`: every live record, ascending id, at `sealNonce`. Under v5 a record
 * still Pending or Started is settled first (`settleLiveRecordLocked`): Finished at its full
 * reservation, the executor's cost credited, no miss counted (delivery precedes ConfirmStart, so
 * a pending record is not "no work"; refusals go through MsgTimeoutInference). The balance already
 * paid the reservation at Start, so it does not move. Challenged and terminal records seal as they are.
 */
export function drainLive(state: SessionState, sealNonce: bigint, rules: RuleSet = 'v2'): InferenceRecord[] {
  const live = [...state.liveRecords()];
  if (rules === 'v2') return fold(state, live, sealNonce);
  const settled = live.map((rec) => {
    if (rec.status !== InferenceStatus.Pending && rec.status !== InferenceStatus.Started) return rec;
    const paid: InferenceRecord = { ...rec, status: InferenceStatus.Finished, actualCost: rec.reservedCost };
    state.putLive(paid);
    const stats = state.hostStats[rec.executorSlot]!;
    state.setStats(rec.executorSlot, { ...stats, cost: BigInt.asUintN(64, stats.cost + rec.reservedCost) });
    return paid;
  });
  return fold(state, settled, sealNonce);
}
