/**
 * A use case's refusal, as the domain states it: what kind of refusal, the rule that refused (the
 * code a client can branch on), and a message that says what to do. No HTTP status here: the HTTP
 * layer maps kinds to statuses and OpenAI-style bodies in one place (src/http/gateway-answers.ts),
 * so the use cases stay callable from the CLI, the reactors and tests (docs/architecture.md,
 * principle "errors are answers").
 */

/** The kinds of refusal a caller can act on differently. */
export type RefusalKind =
  /** The request itself is wrong (a value, a missing key); fix it and send again. */
  | 'invalid'
  /** The caller's key may not do this. */
  | 'unauthorized'
  /** Understood and authenticated, but the rule forbids this actor (a creator not on the chain's allowlist). */
  | 'forbidden'
  | 'not_found'
  /** The state of an escrow or of the gateway does not allow it now. */
  | 'conflict'
  /** The chain refused it by one of its rules (the rule names the chain's reason). */
  | 'chain_refused'
  /** Over an admission limit; retry after `retryAfterSeconds`. */
  | 'rate_limited'
  /** No capacity right now (no escrow can take it); retry after `retryAfterSeconds`. */
  | 'unavailable'
  /** The chain or a host failed or could not be reached. */
  | 'upstream'
  /** The chain or a host did not answer in time. */
  | 'upstream_timeout'
  /** The client went away before the answer. */
  | 'client_closed';

export interface RefusalOptions {
  /** The request member at fault (`messages[0].role`, `amount`), when one is. */
  param?: string | null;
  /** What the caller can do about it, appended to the message. */
  remedy?: string;
  retryAfterSeconds?: number;
  /** The underlying failure (a ChainError): recorded failures keep the chain's code and raw log. */
  cause?: unknown;
}

export class GatewayError extends Error {
  readonly kind: RefusalKind;
  /** The rule that refused, e.g. `model_not_found`, `wrong_epoch`, `no_active_escrow`. */
  readonly rule: string;
  readonly param: string | null;
  readonly remedy: string | null;
  readonly retryAfterSeconds: number | null;

  constructor(kind: RefusalKind, rule: string, what: string, options: RefusalOptions = {}) {
    super(options.remedy ? `${what} ${options.remedy}` : what, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    this.kind = kind;
    this.rule = rule;
    this.param = options.param ?? null;
    this.remedy = options.remedy ?? null;
    this.retryAfterSeconds = options.retryAfterSeconds ?? null;
  }
}

/**
 * A client-chosen string quoted in a message or a log line, cut to `max` characters: an unknown
 * model id of half a megabyte was echoed whole in the 404 and in the request's log line.
 */
export function clip(value: string, max = 256): string {
  return value.length > max ? `${value.slice(0, max)}...` : value;
}

/** Common refusals, so the same condition reads the same everywhere. */
export const refuse = {
  /** The background check found the log altered before the start's anchor: no more chat from it. */
  eventLogTampered: (position: number, reason: string) =>
    new GatewayError('unavailable', 'event_log_tampered', `The event log failed verification at position ${position} (${reason}); this gateway no longer serves chat from it.`, {
      remedy: 'The operator runs `shardgate verify` and restores the log from a backup.',
    }),
  invalid: (message: string, param: string | null = null, rule = 'invalid_value') => new GatewayError('invalid', rule, message, { param }),
  /**
   * The spec's admin_only refusal (401): the message must contain "requires an admin API key". The
   * key is valid, so the code says what refused it: the model is admin-only (not invalid_api_key).
   */
  adminOnlyModel: (model: string) =>
    new GatewayError('unauthorized', 'model_admin_only', `Model '${model}' requires an admin API key;`, {
      param: 'model',
      remedy: "an operator can allow client keys by setting its access_mode to 'api_key' in POST /v1/admin/settings.",
    }),
  modelNotFound: (model: string) =>
    new GatewayError('not_found', 'model_not_found', `The model '${clip(model)}' does not exist.`, {
      param: 'model',
      remedy: 'Model ids are case-sensitive; use one returned by GET /v1/models.',
    }),
  notFound: (message: string, rule = 'not_found') => new GatewayError('not_found', rule, message),
  conflict: (message: string, rule = 'conflict') => new GatewayError('conflict', rule, message),
  rateLimited: (message: string, retryAfterSeconds: number, rule = 'rate_limit_exceeded') => new GatewayError('rate_limited', rule, message, { retryAfterSeconds }),
  unavailable: (message: string, retryAfterSeconds: number, rule = 'no_capacity') => new GatewayError('unavailable', rule, message, { retryAfterSeconds }),
  upstream: (message: string, rule = 'upstream_error') => new GatewayError('upstream', rule, message),
};
