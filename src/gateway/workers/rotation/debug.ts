/**
 * GET /v1/debug/rotation (admin): whether rotation is on, where the chain is relative to the next
 * rotation, the rotation settings, and `latest`: per model its stage, counts and errors (the spec's
 * "latest (per-model stage, counts and errors)"), with the settles awaiting a retry. `history` is
 * the last 100 entries of the rotation-debug projection, every model's, in log order. The chain is
 * read with a short deadline; when it does not answer the chain members are null and `chain.error`
 * says why, so the document is always served.
 */
import { cycleOf, depletionSettleRetriesOf, settleRetriesOf, type EscrowState, type RotationContext, type SettleRetry } from '../../../machines/index.js';
import type { RotationDebugEntry } from '../../../projections/rotation-debug.js';
import type { GatewayContext } from '../../context.js';
import { drainedSettleRetries, DRAINED_PENDING, SETTLE_PENDING } from './settle-retry.js';
import { errorInfo, readEpoch } from './steps.js';
import { pruneRisk } from './plan.js';
import { planEscrows } from './task.js';

export const DEBUG_CHAIN_TIMEOUT_MS = 1_500;

export interface RotationDebugDocument {
  enabled: boolean;
  chain: {
    block_height: number | null;
    epoch_index: number | null;
    next_boundary_height: number | null;
    /** Blocks until phase 1 of the next rotation starts (0 while it is due or under way). */
    blocks_until_next_rotation: number | null;
    blocks_until_boundary: number | null;
    poc_active: boolean | null;
    poc_end_height: number | null;
    error?: string;
  };
  settings: ReturnType<GatewayContext['projections']['settings']['effective']>['escrow_rotation'];
  /** Per model: the statechart's current stage, counts, last error and recent errors. */
  latest: Record<string, unknown>;
  /** The projection's last entries, every model's, in log order. */
  history: RotationHistoryEntry[];
}

/** Settles that failed transiently and are tried again (escrows settled since are left out). */
function pendingRetries(ctx: GatewayContext, retries: Record<string, SettleRetry>, states: readonly EscrowState[] = SETTLE_PENDING) {
  return Object.entries(retries)
    .filter(([id]) => states.includes(ctx.engine.escrow(id)?.value as EscrowState))
    .map(([id, r]) => ({ escrow_id: id, failed_attempts: r.attempt, retry_at_height: r.retryAtHeight }));
}

export async function rotationDebugDocument(ctx: GatewayContext, timeoutMs = DEBUG_CHAIN_TIMEOUT_MS): Promise<RotationDebugDocument> {
  const settings = ctx.projections.settings.effective().escrow_rotation;
  let chain: RotationDebugDocument['chain'];
  try {
    const e = await readEpoch(ctx, timeoutMs);
    chain = {
      block_height: e.height,
      epoch_index: e.epochIndex,
      next_boundary_height: e.nextBoundaryHeight,
      blocks_until_next_rotation: Math.max(0, e.blocksUntilBoundary - settings.pre_poc_blocks),
      blocks_until_boundary: e.blocksUntilBoundary,
      poc_active: e.pocActive,
      poc_end_height: e.pocEndHeight,
    };
  } catch (err) {
    chain = {
      block_height: null,
      epoch_index: null,
      next_boundary_height: null,
      blocks_until_next_rotation: null,
      blocks_until_boundary: null,
      poc_active: null,
      poc_end_height: null,
      error: `${errorInfo(err).kind}: ${errorInfo(err).message}`,
    };
  }
  const names = new Set([...settings.models.map((m) => m.model_id), ...Object.keys(ctx.projections.rotation.perModel())]);
  const drained = drainedSettleRetries(ctx.projections.pool.contexts()).retries;
  const history = ctx.projections.rotation.entries().map(historyEntry);
  const latest: Record<string, unknown> = {};
  for (const model of [...names].sort()) {
    const e = ctx.projections.rotation.perModel()[model];
    const c = ctx.projections.rotation.rotation(model).context;
    latest[model] = {
      stage: e?.stage ?? 'idle',
      epoch: c.epoch,
      cycle_epoch: c.cycleEpoch ?? null,
      counts: e?.counts ?? { target: 0, existing: 0, created: 0, promoted: 0, settled: 0, settle_failed: 0 },
      suppressed: c.suppressed,
      replacements: c.replacements,
      last_error: c.lastError,
      ...cycleOutcome(c, e?.stage ?? 'idle'),
      // Escrows the chain prunes unsettled at the next boundary with no phase left to settle them.
      prune_risk:
        chain.epoch_index === null
          ? []
          : pruneRisk(planEscrows(ctx, model), c, { epoch: chain.epoch_index }).map((x) => ({ escrow_id: x.id, role: x.role, escrow_epoch: x.epoch, state: x.state, prune_height: chain.next_boundary_height })),
      errors: recentErrors(history, model),
      settle_retries: pendingRetries(ctx, settleRetriesOf(c)),
      // The same for the old escrows of depletion replacements (retried by the depletion check).
      depletion_settle_retries: pendingRetries(ctx, depletionSettleRetriesOf(c)),
      // Settles deferred while requests were in flight whose drained attempt failed (retried by the drain reactor).
      drained_settle_retries: pendingRetries(ctx, Object.fromEntries(Object.entries(drained).filter(([id]) => ctx.engine.escrow(id)?.context.model === model)), DRAINED_PENDING),
      time: e?.time ?? null,
    };
  }
  return { enabled: settings.enabled, chain, settings, latest, history };
}

/** Stages in which no rotation step is under way. */
export const RESTING_STAGES: ReadonlySet<string> = new Set(['idle', 'waitingPoc']);

/**
 * How the model's current cycle stands (issue 38: `completed:true, counts.created:2` was shown
 * when a create had failed; `created` counts the creates decided). `completed` is true only at
 * rest with every decided create done; `failed_creates` counts the creates that failed;
 * `blocked` is a configuration error the cycle waits on (the step, the variable, why), retried at
 * the first tick that finds a usable key; `failure` is the step that failed and why.
 */
export function cycleOutcome(c: RotationContext, stage: string) {
  const cycle = cycleOf(c);
  const failedCreates = cycle.failedIntents.length;
  const blocked = c.blocked ? { step: c.blocked.step, role: c.blocked.role, variable: c.blocked.variable, reason: c.blocked.error.message, since_height: c.blocked.height } : null;
  const failedRole = cycle.failedIntents.some((id) => cycle.regular.includes(id)) ? 'regular' : 'temporary';
  const failure = blocked
    ? { step: blocked.step, role: blocked.role, kind: 'configuration', reason: blocked.reason }
    : failedCreates > 0
      ? { step: failedRole === 'regular' ? 'create_target' : 'create_temporary', role: failedRole, kind: c.lastError?.kind ?? null, reason: c.lastError?.message ?? null }
      : null;
  return { completed: RESTING_STAGES.has(stage) && failure === null, failed_creates: failedCreates, blocked, failure };
}

/** How many of a model's errors `latest` lists. */
export const LATEST_ERRORS = 10;

export type RotationHistoryEntry = ReturnType<typeof historyEntry>;

function historyEntry(e: RotationDebugEntry) {
  return {
    model: e.model,
    position: e.position,
    time: e.time,
    event: e.event,
    stage: e.stage,
    epoch: e.epoch,
    role: e.role,
    target: e.counts.target,
    existing: e.counts.existing,
    created: e.counts.created,
    promoted: e.counts.promoted,
    settled: e.counts.settled,
    settle_failed: e.counts.settle_failed,
    last_error: e.last_error,
    accepted: e.accepted,
  };
}

/**
 * A model's errors among the kept entries, newest last: each entry whose last error differs from
 * the one before it (the statechart keeps its last error across later events).
 */
function recentErrors(history: readonly RotationHistoryEntry[], model: string) {
  const errors: { position: number; time: string; event: string; stage: string; error: NonNullable<RotationHistoryEntry['last_error']> }[] = [];
  let previous = 'null';
  for (const e of history) {
    if (e.model !== model) continue;
    const now = JSON.stringify(e.last_error);
    if (e.last_error && now !== previous) errors.push({ position: e.position, time: e.time, event: e.event, stage: e.stage, error: e.last_error });
    previous = now;
  }
  return errors.slice(-LATEST_ERRORS);
}
