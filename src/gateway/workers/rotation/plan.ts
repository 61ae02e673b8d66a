/**
 * The rotation task's decisions, as a pure function: given one model's rotation statechart
 * snapshot, the chain reading, the model's escrows and where each decided create stands, what is
 * the next step? The task (task.ts) runs the step, which appends an event (and maybe acts on chain),
 * then asks again until the answer is `wait`. Everything the plan reads comes from the log, so a
 * restarted task continues exactly where the log says the cycle is, without repeating a create.
 */
import type { ChainInputs, ChainErrorInfo, EscrowRole, RotationModelSettings } from '../../../events/catalog.js';
import { cycleOf, settleRetriesOf, stateName, suppressionKey, type EscrowState, type RotationContext } from '../../../machines/index.js';
import { dueSettleRetries, SETTLE_PENDING, type DueSettleRetry } from './settle-retry.js';

/** What the plan needs of one escrow of the model. */
export interface PlanEscrow {
  id: string;
  state: EscrowState;
  role: EscrowRole;
  /** Set when the escrow was created from a creation intent. */
  intentId: string | null;
  /** The escrow's epoch on chain (its settle window is this epoch and the next); null when unknown. */
  epoch: number | null;
}

export type PlanIntent = 'absent' | 'pending' | 'failed' | 'created';

export interface PlanInput {
  model: RotationModelSettings;
  prePocBlocks: number;
  chain: ChainInputs;
  /** The model's rotation statechart: dotted state name and context. */
  rotation: { state: string; context: RotationContext };
  escrows: PlanEscrow[];
  /** Where a decided create intent stands. */
  intent(intentId: string): PlanIntent;
  /**
   * Why the model's `private_key_env` gives no usable key right now (unset, malformed); absent
   * when it does. A configuration error: the create waits for it instead of failing (issue 38).
   */
  keyProblem?: string;
}

export type RotationPlan =
  | { kind: 'wait'; reason: string }
  | { kind: 'start_phase'; phase: 1 | 2; target: number; existing: number }
  | { kind: 'decide_creates'; role: EscrowRole; count: number; target: number; existing: number }
  | { kind: 'create'; role: EscrowRole; intentId: string }
  | { kind: 'resolve_pending'; role: EscrowRole; intentId: string }
  | { kind: 'record_create_failure'; role: EscrowRole; intentId: string }
  /** The key's env variable is unusable: record the configuration error once; the create waits. */
  | { kind: 'configuration_error'; role: EscrowRole; intentId: string; variable: string; problem: string }
  | { kind: 'suppressed'; role: EscrowRole; reason: string }
  | { kind: 'promote'; escrowIds: string[] }
  | { kind: 'decide_settles'; role: EscrowRole; escrowIds: string[] }
  | { kind: 'settle'; escrowId: string }
  /**
   * `retry_settle`: another attempt at a settle that failed transiently, once its backoff is over;
   * `settle_window_closed`: a settle awaiting its retry whose window has closed, recorded as
   * failed and never sent.
   */
  | DueSettleRetry
  | { kind: 'complete_phase'; phase: 1 | 2; note?: string };

/** States from which an escrow still needs finalize + settle. */
const UNFINALIZED: readonly EscrowState[] = ['active', 'depleted', 'routingStopped'];

/** Creates decided for a role that are not over: the next one to act on, or done. */
function nextCreate(input: PlanInput, role: EscrowRole, step: 'create_temporary' | 'create_target'): RotationPlan | 'done' {
  const c = input.rotation.context;
  const cycle = cycleOf(c);
  const suppressed = c.suppressed.includes(suppressionKey(role, input.chain.epoch));
  for (const id of cycle[role]) {
    if (cycle.failedIntents.includes(id)) continue;
    const s = input.intent(id);
    if (s === 'created') continue;
    if (s === 'failed') return { kind: 'record_create_failure', role, intentId: id };
    if (s === 'pending') return { kind: 'resolve_pending', role, intentId: id };
    // absent: decided, never signed. Abandoned once the chain refused this role this epoch.
    if (suppressed) continue;
    if (input.keyProblem !== undefined) {
      const variable = input.model.private_key_env;
      const b = c.blocked;
      // Recorded once per intent and variable; then the cycle waits until the key is usable.
      if (b && b.intentId === id && b.variable === variable) return { kind: 'wait', reason: `configuration: the variable ${variable} ${input.keyProblem}; the ${role} create waits for it` };
      return { kind: 'configuration_error', role, intentId: id, variable, problem: input.keyProblem };
    }
    return { kind: 'create', role, intentId: id };
  }
  void step;
  return 'done';
}

const routable = (e: PlanEscrow) => e.state === 'active';

/** Escrows created by this cycle's intents of `role`. */
function createdOf(input: PlanInput, role: EscrowRole): PlanEscrow[] {
  const ids = new Set(cycleOf(input.rotation.context)[role]);
  return input.escrows.filter((e) => e.intentId !== null && ids.has(e.intentId));
}

/** The next settle to run among the decided ones, or done. Escrows awaiting a retry are dueSettleRetries'. */
function nextSettle(input: PlanInput): RotationPlan | 'done' {
  const cycle = cycleOf(input.rotation.context);
  const retries = settleRetriesOf(input.rotation.context);
  for (const id of cycle.settle) {
    if (cycle.settleFailed.includes(id) || Object.hasOwn(retries, id)) continue;
    const e = input.escrows.find((x) => x.id === id);
    if (e && SETTLE_PENDING.includes(e.state)) return { kind: 'settle', escrowId: id };
  }
  return 'done';
}

export function planRotation(input: PlanInput): RotationPlan {
  // Retries come first in every state: the window of a settle does not wait for the cycle.
  const retry = dueSettleRetries(settleRetriesOf(input.rotation.context), input.escrows, input.chain)[0];
  if (retry) return retry;
  const { model, chain } = input;
  const c = input.rotation.context;
  const cycle = cycleOf(c);
  const state = input.rotation.state;
  const regulars = input.escrows.filter((e) => e.role === 'regular');
  const existingRegular = regulars.filter(routable).length;

  switch (state) {
    case 'idle': {
      if (chain.pocActive) return { kind: 'wait', reason: 'PoC window active' };
      if (chain.blocksUntilBoundary > input.prePocBlocks) {
        return { kind: 'wait', reason: `${chain.blocksUntilBoundary - input.prePocBlocks} blocks until phase 1` };
      }
      if (c.cycleEpoch === chain.epoch) return { kind: 'wait', reason: `epoch ${chain.epoch} already rotated` };
      return { kind: 'start_phase', phase: 1, target: model.temp_count, existing: existingRegular };
    }

    case 'phase1.creatingTemporaries': {
      const next = nextCreate(input, 'temporary', 'create_temporary');
      if (next !== 'done') return next;
      if (c.suppressed.includes(suppressionKey('temporary', chain.epoch)) && cycle.temporary.length === 0) {
        return { kind: 'suppressed', role: 'temporary', reason: suppressionReason(c) };
      }
      if (cycle.temporary.length < model.temp_count) {
        return { kind: 'decide_creates', role: 'temporary', count: model.temp_count - cycle.temporary.length, target: model.temp_count, existing: existingRegular };
      }
      return settleRegularsOrPromote(input);
    }

    case 'phase1.promoting':
      return settleRegularsOrPromote(input);

    case 'phase1.settlingRegulars': {
      const next = nextSettle(input);
      return next === 'done' ? { kind: 'complete_phase', phase: 1 } : next;
    }

    case 'waitingPoc': {
      if (c.cycleEpoch !== null && chain.epoch <= c.cycleEpoch) return { kind: 'wait', reason: `boundary at height ${chain.nextBoundaryHeight} not reached` };
      if (chain.pocActive) return { kind: 'wait', reason: 'PoC window of the transition still active' };
      return { kind: 'start_phase', phase: 2, target: model.target_count, existing: existingRegular };
    }

    case 'phase2.creatingTargets': {
      const next = nextCreate(input, 'regular', 'create_target');
      if (next !== 'done') return next;
      const suppressed = c.suppressed.includes(suppressionKey('regular', chain.epoch));
      if (suppressed && cycle.regular.length === 0 && !cycle.suppressedNoted.includes('regular')) {
        return { kind: 'suppressed', role: 'regular', reason: suppressionReason(c) };
      }
      if (!suppressed && cycle.regular.length < model.target_count) {
        return { kind: 'decide_creates', role: 'regular', count: model.target_count - cycle.regular.length, target: model.target_count, existing: existingRegular };
      }
      return settleTemporaries(input);
    }

    case 'phase2.settlingTemporaries': {
      const next = nextSettle(input);
      return next === 'done' ? { kind: 'complete_phase', phase: 2 } : next;
    }

    default:
      return { kind: 'wait', reason: `unexpected rotation state ${state}` };
  }
}

/**
 * Phase 1 after the temporary creates: with at least one routable temporary, the regulars are
 * settled; with none (creation failed or suppressed, or temp_count 0), the routable regulars are
 * promoted to the temporary role instead, so the model never loses its last routable escrow.
 */
function settleRegularsOrPromote(input: PlanInput): RotationPlan {
  const cycle = cycleOf(input.rotation.context);
  const bridges = createdOf(input, 'temporary').filter(routable);
  const temporaries = new Set(createdOf(input, 'temporary').map((e) => e.id));
  const regulars = input.escrows.filter((e) => e.role === 'regular' && !temporaries.has(e.id) && !cycle.promoted.includes(e.id));
  if (bridges.length === 0) {
    return { kind: 'promote', escrowIds: regulars.filter(routable).map((e) => e.id) };
  }
  // Bridges an earlier cycle left serving (its phase 2 had no routable replacement): no later
  // phase settles a temporary of another cycle, so the chain pruned them unsettled (issue 38).
  // Their settle window is their epoch and the next, which this phase 1 is still in: settle them now.
  const leftBridges = input.escrows.filter((e) => e.role === 'temporary' && !temporaries.has(e.id) && UNFINALIZED.includes(e.state));
  return { kind: 'decide_settles', role: 'regular', escrowIds: [...regulars, ...leftBridges].filter((e) => UNFINALIZED.includes(e.state)).map((e) => e.id) };
}

/**
 * Phase 2 after the target creates: the temporaries (and promoted regulars) are settled only when
 * the model has another routable escrow to carry its traffic; otherwise they keep serving.
 */
function settleTemporaries(input: PlanInput): RotationPlan {
  const cycle = cycleOf(input.rotation.context);
  const bridges = new Set([...createdOf(input, 'temporary').map((e) => e.id), ...cycle.promoted]);
  const toSettle = input.escrows.filter((e) => bridges.has(e.id) && SETTLE_PENDING.includes(e.state) && !cycle.settle.includes(e.id));
  if (toSettle.length === 0) return { kind: 'complete_phase', phase: 2 };
  const carriers = input.escrows.filter((e) => routable(e) && !bridges.has(e.id));
  if (carriers.length === 0) {
    return { kind: 'complete_phase', phase: 2, note: `no replacement escrow is routable; ${toSettle.length} bridge escrow(s) keep serving` };
  }
  return { kind: 'decide_settles', role: 'temporary', escrowIds: toSettle.map((e) => e.id) };
}

function suppressionReason(c: RotationContext): string {
  const e: ChainErrorInfo | null = c.lastError;
  return e ? `${e.kind}: ${e.message}` : 'an earlier create failed on chain in this epoch';
}

/** Dotted state of a snapshot (re-exported for the task and tests). */
export const rotationStage = (value: unknown): string => stateName(value);

/**
 * Escrows the chain will prune unsettled at the next boundary (their settle window ends with this
 * epoch) that no phase will settle first: this epoch's phase 1 already ran (the cycle of
 * `chain.epoch`) without deciding their settle, e.g. bridges kept serving because no replacement
 * could be created. Empty while this epoch's phase 1 is still to come (it settles them). The
 * rotation task logs them as `escrow_rotation_bridge_prune_risk`; GET /v1/debug/rotation lists them.
 */
export function pruneRisk(escrows: readonly PlanEscrow[], c: RotationContext, chain: Pick<ChainInputs, 'epoch'>): PlanEscrow[] {
  if (c.cycleEpoch !== chain.epoch) return [];
  const cycle = cycleOf(c);
  return escrows.filter((e) => UNFINALIZED.includes(e.state) && e.epoch !== null && e.epoch + 1 <= chain.epoch && !cycle.settle.includes(e.id));
}
