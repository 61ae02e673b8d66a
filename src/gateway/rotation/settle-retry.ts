/**
 * When the rotation tries a failed settle again. A transient failure (the node did not answer, the
 * tx was not included in time, a stale sequence, hosts that did not sign) says nothing about the
 * settlement, so it is retried; anything the chain refused is not. Retries are spaced in blocks
 * (the chain reading every plan already gets), so the plan stays a pure function of the log and
 * that reading: replaying decides the same, and a stalled chain is not asked again and again.
 */
import { ChainError } from '../../chain/port.js';
import { ApiError } from '../../http/errors.js';

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
  if (err instanceof ApiError) return err.code !== null && TRANSIENT.has(err.code);
  return false;
}

/**
 * The chain accepts a settle only while its epoch is the escrow's or the next one (docs/chain.md,
 * error 1107 `wrong_epoch` otherwise). An escrow of unknown epoch is left to the chain to judge.
 */
export function settleWindowOpen(escrowEpoch: number | null, chainEpoch: number): boolean {
  return escrowEpoch === null || chainEpoch <= escrowEpoch + 1;
}
