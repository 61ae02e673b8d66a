/**
 * How a chain failure reads to an operator: a refusal whose rule names the chain's reason. Rule
 * failures (the chain said no) are `chain_refused`; an unknown outcome is `upstream`/`upstream_timeout`.
 */
import { ChainError, type ChainErrorKind } from '../../chain/port.js';
import type { ChainErrorInfo } from '../../events/catalog.js';
import { GatewayError, type RefusalKind } from '../errors.js';

const KIND: Partial<Record<ChainErrorKind, RefusalKind>> = {
  unreachable: 'upstream',
  timeout: 'upstream_timeout',
  not_found: 'not_found',
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

export function chainRefusal(err: unknown, what: string): GatewayError {
  // The gateway's own refusal before anything reached the chain (e.g. a protocol version it does not speak).
  if (err instanceof GatewayError) return err;
  if (err instanceof ChainError && err.detail.precheck) {
    // Refused by the gateway's pre-check: nothing was signed or sent, no fee spent.
    const param =
      err.kind === 'not_allowlisted' ? 'private_key' : err.kind === 'amount_out_of_range' || err.kind === 'insufficient_funds' ? 'amount' : err.kind === 'version_not_approved' && /creat/i.test(what) ? 'protocol_version' : null;
    return new GatewayError(err.kind === 'not_allowlisted' ? 'forbidden' : 'invalid', err.kind, `${what} refused before any transaction was sent (no fee spent): ${err.message}`, { param, cause: err });
  }
  const info = chainErrorInfo(err);
  return new GatewayError(KIND[info.kind] ?? 'chain_refused', info.kind, `${what} failed on chain: ${info.kind}: ${info.message}`, {
    // Kept so a recorded failure (rotation) carries the chain's code and raw log, not only the kind.
    cause: err,
  });
}

/** True when the outcome of a broadcast is unknown (ask the chain by hash later). */
export const outcomeUnknown = (err: unknown): boolean =>
  err instanceof ChainError && (err.kind === 'unreachable' || err.kind === 'timeout');
