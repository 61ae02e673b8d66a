/**
 * Side effects shared by the rotation task and the depletion check: reading the chain with a
 * deadline, appending decisions to `rotation-<model>` (checked against the statechart first),
 * finalize + settle of an escrow (one attempt, and when a failed one is tried again), and turning
 * failures into recorded chain errors.
 */
import { CHAIN_ERROR_KINDS, ChainError, type EpochInfo } from '../../../chain/port.js';
import { escrowStream, newEvent, rotationStream, type ChainErrorInfo, type ChainInputs, type EventDataMap, type ReplacementReason } from '../../../events/catalog.js';
import type { EventMetadata, RecordedEvent } from '../../../events/envelope.js';
import { GatewayError } from '../../errors.js';
import { rotationMachine, stateName, step, type RotationEventType } from '../../../machines/index.js';
import type { GatewayContext } from '../../context.js';
import { chainErrorInfo } from '../../escrows/chain-errors.js';
import { finalizeEscrow } from '../../escrows/finalize.js';
import { refuseIfPruned, settleEscrow, type SettleAnswer } from '../../escrows/settle.js';
import { retryAfter, type OwnerAttempt } from './settle-retry.js';

export const ROTATION_META: EventMetadata = { actor: { kind: 'rotation-task' } };
export const DEPLETION_META: EventMetadata = { actor: { kind: 'depletion-check' } };

/** The chain's epoch reading, or an error after `timeoutMs`. */
export async function readEpoch(ctx: GatewayContext, timeoutMs: number): Promise<EpochInfo> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      ctx.chain.epoch(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new ChainError('timeout', `the chain did not answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export const chainInputs = (e: EpochInfo): ChainInputs => ({
  height: e.height,
  epoch: e.epochIndex,
  nextBoundaryHeight: e.nextBoundaryHeight,
  blocksUntilBoundary: e.blocksUntilBoundary,
  pocActive: e.pocActive,
});

/** The chain reading a settle (retry) is decided at; undefined, logged as `marker`, while it cannot be read (the settle waits). */
export async function readChainOr(ctx: GatewayContext, timeoutMs: number, fields: Record<string, unknown>, marker: string): Promise<ChainInputs | undefined> {
  try {
    return chainInputs(await readEpoch(ctx, timeoutMs));
  } catch (err) {
    ctx.logger.warn({ ...fields, err: errorInfo(err) }, marker);
    return undefined;
  }
}

/** Thrown when the statechart refuses a decision (a bug or a concurrent writer): nothing appended. */
export class RotationRefused extends Error {
  constructor(model: string, type: string, state: string) {
    super(`rotation of ${model} is ${state}; ${type} is not allowed there`);
    this.name = 'RotationRefused';
  }
}

/** Appends one rotation decision after the model's statechart accepted it. */
export async function appendRotation<K extends RotationEventType>(
  ctx: GatewayContext,
  model: string,
  type: K,
  data: EventDataMap[K],
  metadata: EventMetadata,
): Promise<RecordedEvent[]> {
  const snapshot = ctx.projections.rotation.rotation(model);
  const event = newEvent(type, data, metadata);
  if (!step(rotationMachine, snapshot, { type, data } as never).accepted) throw new RotationRefused(model, type, stateName(snapshot.value));
  return ctx.engine.append(rotationStream(model), [event]);
}

/** A failure as recorded: chain errors keep their kind; refusals keep their rule when it names one. */
export function errorInfo(err: unknown): ChainErrorInfo {
  if (err instanceof ChainError) return chainErrorInfo(err);
  // A chain error raised as a refusal (settleEscrow): record what the chain said.
  if (err instanceof GatewayError && err.cause instanceof ChainError) return chainErrorInfo(err.cause);
  if (err instanceof GatewayError) {
    // The chain's own list (chain/port.ts), so a kind added there is never recorded as 'rejected'.
    const kind = ((CHAIN_ERROR_KINDS as readonly string[]).includes(err.rule) ? err.rule : 'rejected') as ChainErrorInfo['kind'];
    return { kind, message: err.message.slice(0, 500) };
  }
  return chainErrorInfo(err);
}

/** True when the chain itself refused (the outcome is known): such a create is not repeated. */
export const isChainRefusal = (err: unknown): boolean => err instanceof ChainError && err.kind !== 'unreachable' && err.kind !== 'timeout';

/**
 * Finalizes (when still routable or stopped) and settles an escrow with the key in `keyEnv`.
 * The settle is deferred by the escrow statechart while requests are in flight; the drain reactor
 * broadcasts it once they have ended, so a settle never leaves while requests are in flight.
 */
export async function finalizeAndSettle(
  ctx: GatewayContext,
  escrowId: string,
  keyEnv: string,
  origin: 'rotation' | 'depletion',
  metadata: EventMetadata,
  owner?: OwnerAttempt,
): Promise<SettleAnswer> {
  // Serialized with admin commands and the drain reactor on the same escrow.
  return ctx.engine.serial(escrowStream(escrowId), async () => {
    const s = ctx.engine.escrow(escrowId);
    if (s && (s.value === 'active' || s.value === 'depleted' || s.value === 'routingStopped')) {
      // Pruned by the chain: the hosts dropped the session, finalizing could only fail (and leave it
      // a depletion candidate, tried again every check); refused once, and deactivated.
      await refuseIfPruned(ctx, escrowId, metadata);
      await finalizeEscrow(ctx, escrowId, metadata);
    }
    return settleEscrow(ctx, escrowId, { keySource: { kind: 'env', name: keyEnv }, origin, metadata, ...(owner ? { owner } : {}) });
  });
}

/** One settle attempt as the rotation task and the depletion check record it. */
export type SettleAttempt =
  | { ok: true; answer: SettleAnswer }
  /** The escrow is settling, settled or deferred after all: the reconciler or drain reactor ends it; not a failure. */
  | { ok: false; pending: true; error: ChainErrorInfo }
  /** Failed; `retryAtHeight` is set when the failure is transient (the next attempt's height). */
  | { ok: false; pending: false; error: ChainErrorInfo; retryAtHeight?: number };

/**
 * Attempt number `attempt` (1 = the first) at finalize + settle, read at `chain`; `reason` is the
 * depletion replacement's. A tx it sends records the attempt (OwnerAttempt), so a failure found
 * later by the reconciler is recorded as this attempt records one (recordOwnerSettleFailure).
 */
export async function attemptSettle(
  ctx: GatewayContext,
  escrowId: string,
  keyEnv: string,
  origin: 'rotation' | 'depletion',
  metadata: EventMetadata,
  chain: ChainInputs,
  attempt: number,
  reason?: ReplacementReason,
): Promise<SettleAttempt> {
  const owner: OwnerAttempt = { retriedBy: origin, attempt, height: chain.height, ...(reason !== undefined ? { reason } : {}) };
  try {
    return { ok: true, answer: await finalizeAndSettle(ctx, escrowId, keyEnv, origin, metadata, owner) };
  } catch (err) {
    const error = errorInfo(err);
    const now = ctx.engine.escrow(escrowId)?.value;
    if (now === 'settling' || now === 'settled' || now === 'settleDeferred') return { ok: false, pending: true, error };
    // Heights, not time: the retry decision compares retryAtHeight with the chain reading it is given.
    const { retryAtHeight } = retryAfter(err, attempt, chain.height);
    return { ok: false, pending: false, error, ...(retryAtHeight !== undefined ? { retryAtHeight } : {}) };
  }
}

/**
 * Records in `rotation-<model>` that `owner`'s attempt at the settle of `escrowId` failed, as that
 * owner records it (the rotation task: RotationFailed, the depletion check: DepletionReplacementFailed,
 * both with step 'settle'): the attempt and, for a transient failure, `retryAtHeight`, from which
 * the owner's retries (settle-retry.ts dueSettleRetries) try it again while the window is open.
 * Used by the attempt itself and by the reconciler when the attempt's outcome was unknown.
 */
export async function recordOwnerSettleFailure(
  ctx: GatewayContext,
  model: string,
  escrowId: string,
  owner: OwnerAttempt,
  chain: ChainInputs,
  failure: { error: ChainErrorInfo; retryAtHeight?: number },
  metadata: EventMetadata,
): Promise<void> {
  const { error, retryAtHeight } = failure;
  const fields = { chain, error, suppress: false, step: 'settle' as const, attempt: owner.attempt, ...(retryAtHeight !== undefined ? { retryAtHeight } : {}) };
  if (owner.retriedBy === 'depletion') {
    await appendRotation(ctx, model, 'DepletionReplacementFailed', { model, escrowId, reason: owner.reason ?? 'depleted', ...fields }, metadata);
  } else {
    const role = ctx.engine.escrow(escrowId)?.context.role;
    await appendRotation(ctx, model, 'RotationFailed', { model, ...(role ? { role } : {}), escrowId, ...fields }, metadata);
  }
}
