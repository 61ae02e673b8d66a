/**
 * The rotation task: every GATEWAY_ROTATION_INTERVAL_MS, while escrow_rotation.enabled, read the
 * chain once and drive each configured model's rotation statechart step by step (plan.ts decides,
 * this file acts and records). Enabling rotation through the settings starts it on a running
 * gateway (`reconfigure()`), disabling stops it after the step under way.
 */
import { randomUUID } from 'node:crypto';
import type { EpochInfo } from '../../../chain/port.js';
import type { ChainInputs, EscrowRole, RotationModelSettings } from '../../../events/catalog.js';
import { stateName, type EscrowState } from '../../../machines/index.js';
import type { GatewayContext } from '../../context.js';
import { createDecided, createdByIntent, intentFailure, intentStatus, resolvePendingCreate } from './create.js';
import { withModelLock } from './lock.js';
import { envKeyProblem } from '../../settings/settings.js';
import { planRotation, pruneRisk, type PlanEscrow, type RotationPlan } from './plan.js';
import { settleWindowClosedError, windowNote } from './settle-retry.js';
import { appendRotation, attemptSettle, chainInputs, errorInfo, isChainRefusal, readEpoch, recordOwnerSettleFailure, ROTATION_META } from './steps.js';

/** Upper bound of steps per model per tick (a plan that never waits would otherwise spin). */
const MAX_STEPS_PER_TICK = 64;
const CHAIN_TIMEOUT_MS = 5_000;

export interface RotationTask {
  /** Re-reads escrow_rotation.enabled: starts or stops the periodic task. */
  reconfigure(): void;
  /** Stops the timer and waits for the tick under way. */
  stop(): Promise<void>;
  /** One pass over every configured model (tests, and the timer). */
  tick(): Promise<void>;
}

export function startRotation(ctx: GatewayContext): RotationTask {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  let chainDown = false;
  const log = ctx.logger.child({ component: 'rotation' });
  /** Stopped, or disabled through the settings: finish the step under way, start no other. */
  const halted = () => stopped || !ctx.projections.settings.effective().escrow_rotation.enabled;

  const tick = (): Promise<void> => {
    if (running) return running;
    running = (async () => {
      try {
        await runTick();
      } catch (err) {
        log.error({ err }, 'escrow_rotation_tick_failed');
      } finally {
        running = undefined;
      }
    })();
    return running;
  };

  async function runTick(): Promise<void> {
    // Instances sharing a log: only the leader rotates (one writer per model's rotation stream).
    if (!ctx.ownership.isLeader()) return;
    const settings = ctx.projections.settings.effective().escrow_rotation;
    if (!settings.enabled || settings.models.length === 0) return;
    let epoch: EpochInfo;
    try {
      epoch = await readEpoch(ctx, CHAIN_TIMEOUT_MS);
      chainDown = false;
    } catch (err) {
      log.warn({ err: errorInfo(err) }, 'escrow_rotation_chain_unreadable');
      if (!chainDown) {
        chainDown = true;
        const chain: ChainInputs = { height: 0, epoch: 0, nextBoundaryHeight: 0, blocksUntilBoundary: 0, pocActive: false };
        for (const m of settings.models) {
          await withModelLock(ctx, m.model_id, () =>
            appendRotation(ctx, m.model_id, 'RotationFailed', { model: m.model_id, step: 'read_chain', chain, error: errorInfo(err), suppress: false }, ROTATION_META),
          ).catch((e) => log.error({ err: e, model: m.model_id }, 'escrow_rotation_record_failed'));
        }
      }
      return;
    }
    for (const m of settings.models) {
      if (halted()) return;
      try {
        await withModelLock(ctx, m.model_id, () => runModel(ctx, m, settings.pre_poc_blocks, epoch, halted));
      } catch (err) {
        log.error({ err, model: m.model_id }, 'escrow_rotation_failed');
      }
    }
  }

  const reconfigure = () => {
    const enabled = ctx.projections.settings.effective().escrow_rotation.enabled;
    if (enabled && !timer && !stopped) {
      log.info({ interval_ms: ctx.config.behaviour.rotationIntervalMs }, 'escrow_rotation_started');
      timer = setInterval(() => void tick(), ctx.config.behaviour.rotationIntervalMs);
      timer.unref();
      setImmediate(() => void tick());
    } else if (!enabled && timer) {
      clearInterval(timer);
      timer = undefined;
      log.info('escrow_rotation_stopped');
    }
  };

  reconfigure();
  return {
    reconfigure,
    tick,
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      timer = undefined;
      await running;
    },
  };
}

/** The model's escrows as the plan sees them (committed state). */
export function planEscrows(ctx: GatewayContext, model: string): PlanEscrow[] {
  const out: PlanEscrow[] = [];
  for (const [id, e] of ctx.projections.pool.contexts()) {
    if (e.context.model !== model) continue;
    out.push({ id, state: e.state as EscrowState, role: e.context.role, intentId: e.context.intentId, epoch: e.context.epoch });
  }
  return out;
}

/** Runs the model's plan until it says wait (or the task stops). */
export async function runModel(ctx: GatewayContext, m: RotationModelSettings, prePocBlocks: number, epoch: EpochInfo, stopped: () => boolean = () => false): Promise<RotationPlan[]> {
  const model = m.model_id;
  const chain = chainInputs(epoch);
  const log = ctx.logger.child({ component: 'rotation', model });
  const done: RotationPlan[] = [];
  for (let i = 0; i < MAX_STEPS_PER_TICK && !stopped(); i++) {
    const snap = ctx.projections.rotation.rotation(model);
    const created = createdByIntent(ctx);
    const plan = planRotation({
      model: m,
      prePocBlocks,
      chain,
      rotation: { state: stateName(snap.value), context: snap.context },
      escrows: planEscrows(ctx, model),
      intent: (id) => intentStatus(ctx, id, created).kind,
      ...keyProblemOf(ctx, m),
    });
    if (plan.kind === 'wait') {
      log.debug({ reason: plan.reason, height: chain.height }, 'escrow_rotation_waiting');
      break;
    }
    done.push(plan);
    const outcome = await execute(ctx, m, chain, plan, log);
    if (outcome === 'wait') break;
  }
  return done;
}

type Log = GatewayContext['logger'];

/**
 * Loudly, once per phase that leaves them: escrows the chain prunes unsettled at the next boundary
 * (their deposit goes to the hosts), with no phase left to settle them before it.
 */
function warnPruneRisk(ctx: GatewayContext, model: string, chain: ChainInputs, log: Log): void {
  const risk = pruneRisk(planEscrows(ctx, model), ctx.projections.rotation.rotation(model).context, chain);
  if (risk.length === 0) return;
  log.error(
    {
      height: chain.height,
      epoch: chain.epoch,
      prune_height: chain.nextBoundaryHeight,
      escrows: risk.map((e) => ({ escrow_id: e.id, role: e.role, escrow_epoch: e.epoch, state: e.state })),
      remedy: 'settle them before the boundary (POST /v1/admin/devshards/{id}/settle) or they are pruned unsettled',
    },
    'escrow_rotation_bridge_prune_risk',
  );
}

/** The plan's `keyProblem`: why the model's key variable is unusable now (never its value). */
function keyProblemOf(ctx: GatewayContext, m: RotationModelSettings): { keyProblem?: string } {
  const problem = envKeyProblem(ctx.config.env, m.private_key_env);
  return problem === undefined ? {} : { keyProblem: problem };
}

/** The recorded text of a configuration error: what is wrong and what to do, never the value. */
export function configurationMessage(variable: string, problem: string, role: EscrowRole): string {
  return (
    `configuration: the variable ${variable} ${problem} in the gateway's environment (escrow_rotation.models[].private_key_env), so the ${role} create was not sent; ` +
    `set it to the creator's 64-hex private key and restart the gateway, or POST /v1/admin/settings naming a variable that holds one: the rotation retries the create at its next tick`
  );
}

/** Records a configuration error of a create (once per intent and variable; the plan then waits). */
async function recordConfigurationError(ctx: GatewayContext, model: string, chain: ChainInputs, role: EscrowRole, intentId: string, variable: string, problem: string, log: Log): Promise<void> {
  const error = { kind: 'rejected' as const, message: configurationMessage(variable, problem, role) };
  await appendRotation(ctx, model, 'RotationFailed', { model, step: createStep(role), role, chain, error, suppress: false, intentId, configuration: { variable } }, ROTATION_META);
  log.error({ height: chain.height, epoch: chain.epoch, role, intent_id: intentId, variable, problem }, 'escrow_rotation_configuration_error');
}

const createStep = (role: EscrowRole) => (role === 'temporary' ? 'create_temporary' : 'create_target');

async function execute(ctx: GatewayContext, m: RotationModelSettings, chain: ChainInputs, plan: Exclude<RotationPlan, { kind: 'wait' }>, log: Log): Promise<'next' | 'wait'> {
  const model = m.model_id;
  const c = ctx.projections.rotation.rotation(model).context;
  const base = { height: chain.height, epoch: chain.epoch };
  switch (plan.kind) {
    case 'start_phase':
      await appendRotation(ctx, model, 'RotationPhaseStarted', { model, phase: plan.phase, chain, target: plan.target, existing: plan.existing }, ROTATION_META);
      log.info({ ...base, phase: plan.phase, target: plan.target, existing: plan.existing, blocks_until_boundary: chain.blocksUntilBoundary }, 'escrow_rotation_phase_started');
      return 'next';

    case 'decide_creates': {
      const intentIds = Array.from({ length: plan.count }, () => randomUUID());
      await appendRotation(ctx, model, 'RotationCreateDecided', { model, role: plan.role, chain, target: plan.target, existing: plan.existing, intentIds }, ROTATION_META);
      log.info({ ...base, role: plan.role, count: plan.count, intent_ids: intentIds }, 'escrow_rotation_create_decided');
      return 'next';
    }

    case 'configuration_error':
      await recordConfigurationError(ctx, model, chain, plan.role, plan.intentId, plan.variable, plan.problem, log);
      return 'wait';

    case 'create': {
      const key = await ctx.keyring.fromEnv(m.private_key_env);
      if (!key) {
        // The plan saw a usable key a moment ago; a configuration error all the same (the create waits).
        await recordConfigurationError(ctx, model, chain, plan.role, plan.intentId, m.private_key_env, envKeyProblem(ctx.config.env, m.private_key_env) ?? 'is unset', log);
        return 'wait';
      }
      const outcome = await createDecided(ctx, {
        intentId: plan.intentId,
        privateKeyHex: key.privateKeyHex,
        keySource: { kind: 'env', name: m.private_key_env },
        amount: BigInt(m.amount),
        model,
        role: plan.role,
        origin: 'rotation',
        epoch: chain.epoch,
        metadata: ROTATION_META,
      });
      if (outcome.ok) {
        log.info({ ...base, role: plan.role, escrow_id: outcome.escrowId, tx_hash: outcome.txHash }, 'escrow_rotation_created');
        return 'next';
      }
      if (outcome.pending) {
        log.warn({ ...base, role: plan.role, intent_id: plan.intentId, tx_hash: outcome.txHash }, 'escrow_rotation_create_outcome_unknown');
        return 'wait';
      }
      const error = errorInfo(outcome.error);
      const suppress = isChainRefusal(outcome.error);
      await appendRotation(ctx, model, 'RotationFailed', { model, step: createStep(plan.role), role: plan.role, chain, error, suppress, intentId: plan.intentId }, ROTATION_META);
      log.error({ ...base, role: plan.role, error, suppressed: suppress }, 'escrow_rotation_create_failed');
      return 'next';
    }

    case 'resolve_pending': {
      const outcome = await resolvePendingCreate(ctx, plan.intentId, ROTATION_META);
      if (!outcome) return 'wait';
      if (outcome.ok) log.info({ ...base, role: plan.role, escrow_id: outcome.escrowId }, 'escrow_rotation_created');
      return 'next';
    }

    case 'record_create_failure': {
      const error = await intentFailure(ctx, plan.intentId);
      const suppress = error.kind !== 'unreachable' && error.kind !== 'timeout';
      await appendRotation(ctx, model, 'RotationFailed', { model, step: createStep(plan.role), role: plan.role, chain, error, suppress, intentId: plan.intentId }, ROTATION_META);
      log.error({ ...base, role: plan.role, error, suppressed: suppress }, 'escrow_rotation_create_failed');
      return 'next';
    }

    case 'suppressed':
      await appendRotation(ctx, model, 'RotationCreateSuppressed', { model, role: plan.role, chain, reason: plan.reason }, ROTATION_META);
      log.warn({ ...base, role: plan.role, reason: plan.reason }, 'escrow_rotation_create_suppressed');
      return 'next';

    case 'promote':
      await appendRotation(ctx, model, 'RotationPromoted', { model, chain, escrowIds: plan.escrowIds }, ROTATION_META);
      log.warn({ ...base, escrow_ids: plan.escrowIds }, 'escrow_rotation_promoted');
      warnPruneRisk(ctx, model, chain, log);
      return 'next';

    case 'decide_settles':
      await appendRotation(ctx, model, 'RotationSettleDecided', { model, role: plan.role, chain, escrowIds: plan.escrowIds }, ROTATION_META);
      log.info({ ...base, role: plan.role, escrow_ids: plan.escrowIds }, 'escrow_rotation_settle_decided');
      return 'next';

    case 'settle':
    case 'retry_settle': {
      const attempt = plan.kind === 'retry_settle' ? plan.attempt : 1;
      const outcome = await attemptSettle(ctx, plan.escrowId, m.private_key_env, 'rotation', ROTATION_META, chain, attempt);
      if (outcome.ok) {
        const answer = outcome.answer;
        const marker = answer.status === 'settled' ? 'escrow_rotation_settled' : answer.status === 'deferred' ? 'escrow_rotation_settle_deferred' : 'escrow_rotation_settle_pending';
        log.info({ ...base, ...answer, attempt }, marker);
        return 'next';
      }
      if (outcome.pending) {
        log.warn({ ...base, escrow_id: plan.escrowId, error: outcome.error, attempt }, 'escrow_rotation_settle_pending');
        return 'next';
      }
      const { error, retryAtHeight } = outcome;
      await recordOwnerSettleFailure(ctx, model, plan.escrowId, { retriedBy: 'rotation', attempt, height: chain.height }, chain, outcome, ROTATION_META);
      if (retryAtHeight !== undefined) {
        log.warn({ ...base, escrow_id: plan.escrowId, error, attempt, retry_at_height: retryAtHeight }, 'escrow_rotation_settle_retry_scheduled');
      } else {
        log.error({ ...base, escrow_id: plan.escrowId, error, attempt, retried: false, ...windowNote(error) }, 'escrow_rotation_settle_failed');
      }
      return 'next';
    }

    case 'settle_window_closed': {
      const role = ctx.engine.escrow(plan.escrowId)?.context.role;
      const error = settleWindowClosedError(plan, chain.epoch);
      await appendRotation(ctx, model, 'RotationFailed', { model, step: 'settle', ...(role ? { role } : {}), chain, error, suppress: false, escrowId: plan.escrowId, windowClosed: true }, ROTATION_META);
      log.error({ ...base, escrow_id: plan.escrowId, escrow_epoch: plan.escrowEpoch, attempts: plan.attempts, error }, 'escrow_rotation_settle_window_closed');
      return 'next';
    }

    case 'complete_phase':
      await appendRotation(
        ctx,
        model,
        'RotationPhaseCompleted',
        { model, phase: plan.phase, chain, created: c.created, promoted: c.promoted, settleDecided: c.settleDecided },
        ROTATION_META,
      );
      if (plan.note) log.warn({ ...base, phase: plan.phase, note: plan.note }, 'escrow_rotation_settle_skipped');
      if (plan.phase === 1) warnPruneRisk(ctx, model, chain, log);
      log.info({ ...base, phase: plan.phase, created: c.created, promoted: c.promoted, settle_decided: c.settleDecided }, 'escrow_rotation_phase_completed');
      return 'next';
  }
}

