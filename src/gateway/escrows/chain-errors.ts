/**
 * How a chain failure reads to an operator: a status and a code naming the chain's reason.
 * Rule failures (the chain said no) are 422 with the kind as code; an unknown outcome is 502/504.
 */
import { ChainError, type ChainErrorKind } from '../../chain/port.js';
import type { ChainErrorInfo } from '../../events/catalog.js';
import { ApiError } from '../../http/errors.js';

const STATUS: Partial<Record<ChainErrorKind, number>> = {
  unreachable: 502,
  timeout: 504,
  not_found: 404,
};

export function chainErrorInfo(err: unknown): ChainErrorInfo {
  if (err instanceof ChainError) {
    return {
      kind: err.kind,
      message: err.message.slice(0, 500),
      ...(err.detail.code !== undefined ? { code: err.detail.code } : {}),
      ...(err.detail.codespace ? { codespace: err.detail.codespace } : {}),
      ...(err.detail.rawLog ? { rawLog: err.detail.rawLog.slice(0, 1000) } : {}),
      ...(err.detail.txHash ? { txHash: err.detail.txHash } : {}),
    };
  }
  return { kind: 'unreachable', message: (err instanceof Error ? err.message : String(err)).slice(0, 500) };
}

export function chainApiError(err: unknown, what: string): ApiError {
  if (err instanceof ChainError && err.detail.precheck) {
    // Refused by the gateway's pre-check: nothing was signed or sent, no fee spent.
    const status = err.kind === 'not_allowlisted' ? 403 : 400;
    const param = err.kind === 'not_allowlisted' ? 'private_key' : err.kind === 'amount_out_of_range' || err.kind === 'insufficient_funds' ? 'amount' : null;
    return new ApiError(status, `${what} refused before any transaction was sent (no fee spent): ${err.message}`, { code: err.kind, type: 'invalid_request_error', param, cause: err });
  }
  const info = chainErrorInfo(err);
  const status = STATUS[info.kind] ?? 422;
  return new ApiError(status, `${what} failed on chain: ${info.kind}: ${info.message}`, {
    code: info.kind,
    type: status >= 500 ? 'upstream_error' : 'invalid_request_error',
    // Kept so a recorded failure (rotation) carries the chain's code and raw log, not only the kind.
    cause: err,
  });
}

/** True when the outcome of a broadcast is unknown (ask the chain by hash later). */
export const outcomeUnknown = (err: unknown): boolean =>
  err instanceof ChainError && (err.kind === 'unreachable' || err.kind === 'timeout');
