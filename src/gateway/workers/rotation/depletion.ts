/**
 * Depletion: every GATEWAY_BALANCE_CHECK_INTERVAL_MS an active escrow whose usable balance
 * (balance − reserved) is below the threshold becomes `depleted` (EscrowDepleted, actor
 * depletion-check). With rotation enabled for its model, a depleted escrow, one at the nonce
 * routing stop, and one whose balance ran out mid-request (`onRequestEnded`) are replaced: a new
 * regular escrow is created, then the old one is finalized and settled once drained. With rotation
 * off the escrow only stops taking new chat, and that is logged.
 *
 * Replacement is decided before it is signed (DepletionReplacementDecided names the intent id), so
 * a restart completes it instead of creating a second one.
 *
 * Once replaced, the old escrow is finalized and no longer a candidate, so a failed settle of it
 * is recorded (DepletionReplacementFailed, step 'settle') and, when transient, tried again by later
 * checks as the rotation tries its own (settle-retry.ts): from the recorded height, while the
 * settle window is open, else given up and recorded once. The decision reads only the log and the
 * chain reading, so it survives a restart and replays the same.
 */
import { randomUUID } from 'node:crypto';
import { newEvent, type ChainInputs, type RotationModelSettings } from '../../../events/catalog.js';
import type { ReplacementReason } from '../../../events/catalog.js';
import { depletionSettleRetriesOf, suppressionKey } from '../../../machines/index.js';
import type { GatewayContext } from '../../context.js';
import { TransitionRefused } from '../../write/engine.js';
import { createDecided, createdByIntent, intentFailure, intentStatus, resolvePendingCreate } from './create.js';
import { withModelLock } from './lock.js';
import { dueSettleRetries, settleWindowClosedError, windowNote } from './settle-retry.js';
import { appendRotation, attemptSettle, chainInputs, DEPLETION_META, errorInfo, isChainRefusal, readChainOr, readEpoch, recordOwnerSettleFailure } from './steps.js';
import { planEscrows } from './task.js';

const CHAIN_TIMEOUT_MS = 5_000;

export interface DepletionCheck {
  stop(): void;
  /** One pass over every escrow (tests, and the timer). */
  tick(): Promise<void>;
}

interface State {
  /** Escrows with a replacement run under way (onRequestEnded debounce). */
  busy: Set<string>;
  /** Escrows already logged as depleted without replacement (rotation off). */
  logged: Set<string>;
}

const states = new WeakMap<object, State>();
const stateOf = (ctx: GatewayContext): State => {
  let s = states.get(ctx.engine);
  if (!s) states.set(ctx.engine, (s = { busy: new Set(), logged: new Set() }));
  return s;
};

export function startDepletionCheck(ctx: GatewayContext): DepletionCheck {
  let running: Promise<void> | undefined;
  const tick = (): Promise<void> =>
    // Instances sharing a log: the leader checks every escrow's balance.
    !ctx.ownership.isLeader() ? Promise.resolve() : (running ??= checkDepletion(ctx)
      .catch((err) => ctx.logger.error({ err }, 'escrow_depletion_check_failed'))
      .finally(() => (running = undefined)));
  const timer = setInterval(() => void tick(), ctx.config.behaviour.balanceCheckIntervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer), tick };
}

/**
 * Called after every request end (ctx.afterRequest): an escrow whose balance ran out mid-request
 * or that reached the routing stop is handled now rather than at the next periodic check.
 */
export function onRequestEnded(ctx: GatewayContext, escrowId: string): void {
  const s = ctx.engine.escrow(escrowId);
  if (!s) return;
  const c = s.context;
  let reason: ReplacementReason | undefined;
  if (s.value === 'active' && BigInt(c.balance) - BigInt(c.reserved) < ctx.depletionThreshold) reason = 'exhausted';
  else if (s.value === 'routingStopped') reason = 'routing_stop';
  if (!reason) return;
  const st = stateOf(ctx);
  if (st.busy.has(escrowId)) return;
  st.busy.add(escrowId);
  void handleEscrow(ctx, escrowId, reason)
    .catch((err) => ctx.logger.error({ err, escrow_id: escrowId }, 'escrow_depletion_replacement_failed'))
    .finally(() => st.busy.delete(escrowId));
}

/** One periodic pass: due settle retries, then mark depleted escrows and replace (or log) every stopped one. */
export async function checkDepletion(ctx: GatewayContext): Promise<void> {
  // Retries first: a settle window does not wait for the replacements.
  await retrySettles(ctx);
  const candidates: [string, ReplacementReason][] = [];
  for (const [id, e] of ctx.projections.pool.contexts()) {
    const usable = BigInt(e.context.balance) - BigInt(e.context.reserved);
    if (e.state === 'active' && usable < ctx.depletionThreshold) candidates.push([id, 'depleted']);
    else if (e.state === 'depleted') candidates.push([id, 'depleted']);
    else if (e.state === 'routingStopped') candidates.push([id, 'routing_stop']);
  }
  const st = stateOf(ctx);
  for (const [id, reason] of candidates) {
    if (st.busy.has(id)) continue;
    st.busy.add(id);
    try {
      await handleEscrow(ctx, id, reason);
    } catch (err) {
      ctx.logger.error({ err, escrow_id: id }, 'escrow_depletion_replacement_failed');
    } finally {
      st.busy.delete(id);
    }
  }
}

async function handleEscrow(ctx: GatewayContext, escrowId: string, reason: ReplacementReason): Promise<void> {
  const s = ctx.engine.escrow(escrowId);
  if (!s) return;
  const c = s.context;
  const model = c.model ?? '';
  if (s.value === 'active') {
    const balance = BigInt(c.balance) - BigInt(c.reserved);
    if (balance >= ctx.depletionThreshold) return;
    // Instances sharing a log: the leader's check moves a depleted escrow here (it serves no more chat).
    await ctx.ownership.claim(escrowId);
    try {
      await ctx.engine.decideEscrow('escrow', escrowId, [newEvent('EscrowDepleted', { balance: balance.toString(), threshold: ctx.depletionThreshold.toString() }, DEPLETION_META)]);
    } catch (err) {
      if (err instanceof TransitionRefused) return;
      throw err;
    }
    ctx.logger.warn({ escrow_id: escrowId, model, usable_balance: balance.toString(), threshold: ctx.depletionThreshold.toString(), reason }, 'escrow_depleted');
  }
  const rotation = ctx.projections.settings.effective().escrow_rotation;
  const m = rotation.enabled ? rotation.models.find((x) => x.model_id === model) : undefined;
  if (!m) {
    const st = stateOf(ctx);
    if (!st.logged.has(escrowId)) {
      st.logged.add(escrowId);
      ctx.logger.warn({ escrow_id: escrowId, model, reason }, 'escrow_depleted_not_replaced: rotation is off for this model; the escrow takes no new chat');
    }
    return;
  }
  await withModelLock(ctx, model, () => replace(ctx, escrowId, reason, m));
}

/** Replacement of one stopped escrow, resumable from the log at every step. */
export async function replace(ctx: GatewayContext, escrowId: string, reason: ReplacementReason, m: RotationModelSettings): Promise<void> {
  const model = m.model_id;
  const log = ctx.logger.child({ component: 'depletion', model, escrow_id: escrowId });
  const state = ctx.engine.escrow(escrowId)?.value;
  if (state !== 'depleted' && state !== 'routingStopped') return;
  // Its settle awaits a retry (finalize failed too): retrySettles keeps to the backoff.
  if (Object.hasOwn(depletionSettleRetriesOf(ctx.projections.rotation.rotation(model).context), escrowId)) return;
  const epoch = await readEpoch(ctx, CHAIN_TIMEOUT_MS);
  const chain = chainInputs(epoch);
  const rot = ctx.projections.rotation.rotation(model).context;
  let entry = rot.replacing?.[escrowId];
  if (entry?.failedEpoch !== undefined && entry.failedEpoch === chain.epoch) return; // failed this epoch: no repeat
  if (!entry || entry.failedEpoch !== undefined) {
    if (rot.suppressed.includes(suppressionKey('regular', chain.epoch))) {
      log.warn({ epoch: chain.epoch, reason }, 'escrow_depletion_replacement_suppressed');
      return;
    }
    const intentId = randomUUID();
    await appendRotation(ctx, model, 'DepletionReplacementDecided', { model, escrowId, reason, chain, intentId }, DEPLETION_META);
    log.info({ reason, intent_id: intentId, height: chain.height, epoch: chain.epoch }, 'escrow_depletion_replacement_decided');
    entry = { intentId };
  }

  const fail = async (error: unknown, recorded = false) => {
    const info = recorded ? await intentFailure(ctx, entry!.intentId) : errorInfo(error);
    const suppress = recorded ? info.kind !== 'unreachable' && info.kind !== 'timeout' : isChainRefusal(error);
    await appendRotation(ctx, model, 'DepletionReplacementFailed', { model, escrowId, reason, chain, error: info, suppress }, DEPLETION_META);
    log.error({ reason, error: info, suppressed: suppress }, 'escrow_depletion_replacement_failed');
  };

  const status = intentStatus(ctx, entry.intentId, createdByIntent(ctx));
  if (status.kind === 'failed') return fail(undefined, true);
  if (status.kind === 'pending') {
    const outcome = await resolvePendingCreate(ctx, entry.intentId, DEPLETION_META);
    if (!outcome) return;
    if (!outcome.ok) return fail(outcome.error);
  }
  if (status.kind === 'absent') {
    const key = await ctx.keyring.fromEnv(m.private_key_env);
    if (!key) return fail(new Error(`environment variable ${m.private_key_env} is unset or not a 64-hex private key`));
    const outcome = await createDecided(ctx, {
      intentId: entry.intentId,
      privateKeyHex: key.privateKeyHex,
      keySource: { kind: 'env', name: m.private_key_env },
      amount: BigInt(m.amount),
      model,
      role: 'regular',
      origin: 'depletion',
      epoch: chain.epoch,
      metadata: DEPLETION_META,
    });
    if (!outcome.ok) {
      if (outcome.pending) {
        log.warn({ intent_id: entry.intentId }, 'escrow_depletion_replacement_outcome_unknown');
        return;
      }
      return fail(outcome.error);
    }
    log.info({ replacement_id: outcome.escrowId, tx_hash: outcome.txHash }, 'escrow_depletion_replacement_created');
  }
  await settleReplaced(ctx, m, escrowId, reason, chain, 1);
}

/**
 * Attempt `attempt` (1 = the first) at finalize + settle of a replaced escrow. A failure is
 * recorded; a transient one with the height of the next attempt.
 */
async function settleReplaced(ctx: GatewayContext, m: RotationModelSettings, escrowId: string, reason: ReplacementReason, chain: ChainInputs, attempt: number): Promise<void> {
  const model = m.model_id;
  const log = ctx.logger.child({ component: 'depletion', model, escrow_id: escrowId });
  const base = { height: chain.height, epoch: chain.epoch, attempt };
  const outcome = await attemptSettle(ctx, escrowId, m.private_key_env, 'depletion', DEPLETION_META, chain, attempt, reason);
  if (outcome.ok) {
    const status = outcome.answer.status;
    log.info({ ...base, ...outcome.answer }, status === 'settled' ? 'escrow_depletion_settled' : status === 'deferred' ? 'escrow_depletion_settle_deferred' : 'escrow_depletion_settle_pending');
    return;
  }
  if (outcome.pending) {
    log.warn({ ...base, error: outcome.error }, 'escrow_depletion_settle_pending');
    return;
  }
  const { error, retryAtHeight } = outcome;
  await recordOwnerSettleFailure(ctx, model, escrowId, { retriedBy: 'depletion', attempt, height: chain.height, reason }, chain, outcome, DEPLETION_META);
  if (retryAtHeight !== undefined) log.warn({ ...base, error, retry_at_height: retryAtHeight }, 'escrow_depletion_settle_retry_scheduled');
  else log.error({ ...base, error, retried: false, ...windowNote(error) }, 'escrow_depletion_replacement_failed: the old escrow could not be settled');
}

/**
 * The replaced escrows whose settle awaits a retry, per model with rotation on (the key is the
 * model's private_key_env): each due one is tried again, or given up once its window has closed.
 * The chain is read once, and only when a retry is pending; while it cannot be read, nothing is due.
 */
async function retrySettles(ctx: GatewayContext): Promise<void> {
  const rotation = ctx.projections.settings.effective().escrow_rotation;
  if (!rotation.enabled) return;
  const pending = rotation.models.filter((m) => Object.keys(depletionSettleRetriesOf(ctx.projections.rotation.rotation(m.model_id).context)).length > 0);
  if (pending.length === 0) return;
  const chain = await readChainOr(ctx, CHAIN_TIMEOUT_MS, { component: 'depletion' }, 'escrow_depletion_chain_unreadable: settle retries wait');
  if (!chain) return;
  for (const m of pending) await withModelLock(ctx, m.model_id, () => retryModel(ctx, m, chain));
}

async function retryModel(ctx: GatewayContext, m: RotationModelSettings, chain: ChainInputs): Promise<void> {
  const model = m.model_id;
  const retries = depletionSettleRetriesOf(ctx.projections.rotation.rotation(model).context);
  const st = stateOf(ctx);
  for (const due of dueSettleRetries(retries, planEscrows(ctx, model), chain)) {
    const { escrowId } = due;
    const reason = retries[escrowId]!.reason;
    if (st.busy.has(escrowId)) continue;
    st.busy.add(escrowId);
    try {
      if (due.kind === 'retry_settle') {
        await settleReplaced(ctx, m, escrowId, reason, chain, due.attempt);
        continue;
      }
      const error = settleWindowClosedError(due, chain.epoch);
      await appendRotation(ctx, model, 'DepletionReplacementFailed', { model, escrowId, reason, chain, error, suppress: false, step: 'settle', windowClosed: true }, DEPLETION_META);
      ctx.logger.error({ component: 'depletion', model, escrow_id: escrowId, height: chain.height, epoch: chain.epoch, escrow_epoch: due.escrowEpoch, attempts: due.attempts, error }, 'escrow_depletion_settle_window_closed');
    } catch (err) {
      ctx.logger.error({ err, model, escrow_id: escrowId }, 'escrow_depletion_replacement_failed: the settle retry could not be run');
    } finally {
      st.busy.delete(escrowId);
    }
  }
}
