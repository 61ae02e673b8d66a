/**
 * When the rotation (and the depletion check, for the escrow it replaced, and the drain reactor,
 * for a settle it sent once requests drained) tries a failed settle again. A transient failure (the node did not answer, the
 * tx was not included in time, a stale sequence, hosts that did not sign) says nothing about the
 * settlement, so it is retried; anything the chain refused is not. Retries are spaced in blocks
 * (the chain reading every plan already gets), so the plan stays a pure function of the log and
 * that reading: replaying decides the same, and a stalled chain is not asked again and again.
 */
import { ChainError } from '../../../chain/port.js';
import type { ChainErrorInfo, ChainInputs, ReplacementReason } from '../../../events/catalog.js';
import { GatewayError } from '../../errors.js';
import type { EscrowContext, EscrowState, SettleRetry } from '../../../machines/index.js';

/** Blocks after the first transient failure before the next attempt; doubles per failure. */
export const SETTLE_RETRY_BASE_BLOCKS = 2;
/** The longest wait between two attempts, in blocks. */
export const SETTLE_RETRY_MAX_BLOCKS = 32;

/** Blocks between failed attempt `attempt` (1 = the first settle) and the next: 2, 4, 8, 16, 32, 32, … */
export function settleRetryDelay(attempt: number): number {
  return Math.min(SETTLE_RETRY_MAX_BLOCKS, SETTLE_RETRY_BASE_BLOCKS * 2 ** Math.max(0, attempt - 1));
}

/**
 * Failures whose outcome is unknown or that a later attempt can fix. `host_signatures_missing` is
 * the gateway's own code (too few hosts answered); every attempt asks the hosts again.
 */
const TRANSIENT: ReadonlySet<string> = new Set(['unreachable', 'timeout', 'bad_sequence', 'host_signatures_missing']);

/** True for a settle failure worth another attempt; chain refusals and local errors are not. */
export function isTransientSettleFailure(err: unknown): boolean {
  if (err instanceof ChainError) return TRANSIENT.has(err.kind);
  if (err instanceof GatewayError) return TRANSIENT.has(err.rule);
  return false;
}

/**
 * What failed attempt `attempt` (1 = the first), made at chain height `height`, records for its
 * retry: the attempt, and for a transient failure the height from which the next may run.
 */
export function retryAfter(err: unknown, attempt: number, height: number): { attempt: number; retryAtHeight?: number } {
  return isTransientSettleFailure(err) ? { attempt, retryAtHeight: height + settleRetryDelay(attempt) } : { attempt };
}

/** One attempt of the drain reactor at a drained settle: its number (1 = the first) and the chain height it was made at. */
export interface DrainedAttempt {
  attempt: number;
  height: number;
}

/**
 * What EscrowSettleFailed records of a failed drained attempt, whoever finds the failure (the
 * attempt itself, or the reconciler by the tx's hash): the attempt, its height, and for a
 * transient failure the height of the next attempt.
 */
export function drainedFailureFields(a: DrainedAttempt, err: unknown): { attempt: number; height: number; retryAtHeight?: number } {
  return { ...retryAfter(err, a.attempt, a.height), height: a.height };
}

/** The drained attempt a settle intent records (EscrowSettleRequested), if it was one. */
export function drainedAttemptOf(intent: { attempt?: number; height?: number; retriedBy?: string }): DrainedAttempt | undefined {
  if (intent.retriedBy !== undefined) return undefined;
  return intent.attempt !== undefined && intent.height !== undefined ? { attempt: intent.attempt, height: intent.height } : undefined;
}

/**
 * One attempt of the rotation task or the depletion check at a settle it sends itself (not
 * deferred): who retries it, the attempt and its chain height, and for the depletion check the
 * replacement's reason. Recorded with its tx (EscrowSettleRequested), so a failure found later by
 * hash (the reconciler) is recorded in `rotation-<model>` as the attempt would have recorded it.
 */
export interface OwnerAttempt extends DrainedAttempt {
  retriedBy: 'rotation' | 'depletion';
  reason?: ReplacementReason;
}

/** The rotation's or depletion check's attempt a settle intent records, if it was one. */
export function ownerAttemptOf(intent: { attempt?: number; height?: number; retriedBy?: 'rotation' | 'depletion'; reason?: ReplacementReason }): OwnerAttempt | undefined {
  const { attempt, height, retriedBy, reason } = intent;
  if (retriedBy === undefined || attempt === undefined || height === undefined) return undefined;
  return { retriedBy, attempt, height, ...(reason !== undefined ? { reason } : {}) };
}

/**
 * The chain accepts a settle only while its epoch is the escrow's or the next one (docs/chain.md,
 * the keeper's plain-text `wrong_epoch` otherwise). An escrow of unknown epoch is left to the chain to judge.
 */
export function settleWindowOpen(escrowEpoch: number | null, chainEpoch: number): boolean {
  return escrowEpoch === null || chainEpoch <= escrowEpoch + 1;
}

/** States in which an escrow still needs (part of) finalize + settle: a pending retry is for these only. */
export const SETTLE_PENDING: readonly EscrowState[] = ['active', 'depleted', 'routingStopped', 'finalized'];

/**
 * The state in which a drained settle (the drain reactor's) awaits its retry: still deferred, so the
 * rotation and the depletion check, which leave deferred settles to the reactor, do not send it too.
 */
export const DRAINED_PENDING: readonly EscrowState[] = ['settleDeferred'];

/** What a retry decision needs of an escrow: its state and its epoch on chain (null when unknown). */
export interface RetryEscrow {
  id: string;
  state: EscrowState;
  epoch: number | null;
}

/** A pending retry that is due: try the settle again, or record that its window has closed. */
export type DueSettleRetry =
  | { kind: 'retry_settle'; escrowId: string; attempt: number }
  | { kind: 'settle_window_closed'; escrowId: string; escrowEpoch: number; attempts: number };

/**
 * The pending retries that are due at this chain reading (in the record's key order): a retry
 * once the chain reached its `retryAtHeight`, or, once the escrow's settle window has closed, the
 * record that it is given up. Escrows that left the `pending` states since (with the default:
 * settled, settling, deferred) or are unknown need nothing. Pure: the log's retries, the escrows
 * folded from the log and the chain reading decide, so replay decides the same.
 */
export function dueSettleRetries(
  retries: Readonly<Record<string, SettleRetry>>,
  escrows: readonly RetryEscrow[],
  chain: Pick<ChainInputs, 'height' | 'epoch'>,
  pending: readonly EscrowState[] = SETTLE_PENDING,
): DueSettleRetry[] {
  const due: DueSettleRetry[] = [];
  for (const [id, r] of Object.entries(retries)) {
    const e = escrows.find((x) => x.id === id);
    if (!e || !pending.includes(e.state)) continue;
    if (e.epoch !== null && !settleWindowOpen(e.epoch, chain.epoch)) due.push({ kind: 'settle_window_closed', escrowId: id, escrowEpoch: e.epoch, attempts: r.attempt });
    else if (chain.height >= r.retryAtHeight) due.push({ kind: 'retry_settle', escrowId: id, attempt: r.attempt + 1 });
  }
  return due;
}

/**
 * The drained settles awaiting a retry, from the escrows' folded state (each records its own):
 * what `dueSettleRetries` takes, with DRAINED_PENDING.
 */
export function drainedSettleRetries(escrows: ReadonlyMap<string, { state: EscrowState; context: Pick<EscrowContext, 'settleRetry' | 'epoch'> }>): {
  retries: Record<string, SettleRetry>;
  escrows: RetryEscrow[];
} {
  const retries: Record<string, SettleRetry> = {};
  const waiting: RetryEscrow[] = [];
  for (const [id, e] of escrows) {
    if (!e.context.settleRetry || !DRAINED_PENDING.includes(e.state)) continue;
    retries[id] = e.context.settleRetry;
    waiting.push({ id, state: e.state, epoch: e.context.epoch });
  }
  return { retries, escrows: waiting };
}

/** The error recorded when a pending retry is given up: nothing was sent, the window had closed. */
export function settleWindowClosedError(d: Extract<DueSettleRetry, { kind: 'settle_window_closed' }>, chainEpoch: number): ChainErrorInfo {
  return {
    kind: 'wrong_epoch',
    message:
      `settle window closed: escrow ${d.escrowId} belongs to epoch ${d.escrowEpoch} and the chain is in epoch ${chainEpoch} ` +
      `(a settle is accepted only in epochs ${d.escrowEpoch} and ${d.escrowEpoch + 1}); not retried after ${d.attempts} failed attempt(s)`,
  };
}

/** What the log line of a settle the chain refused with `wrong_epoch` adds: the deposit is stuck. */
export function windowNote(error: ChainErrorInfo): { note?: string } {
  return error.kind === 'wrong_epoch' ? { note: 'the settle window of this escrow has closed; its unused deposit can no longer be settled on chain' } : {};
}
