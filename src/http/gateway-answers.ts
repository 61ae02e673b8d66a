/**
 * Where a use case's refusal (GatewayError) becomes an HTTP answer: the status and OpenAI error
 * type of each kind, and the headers a kind implies (Retry-After, WWW-Authenticate). The only
 * place a refusal kind meets a status.
 */
import type { GatewayError, RefusalKind } from '../gateway/errors.js';
import { ApiError, type ErrorType } from './api-error.js';

const ANSWER: Record<RefusalKind, { status: number; type?: ErrorType }> = {
  invalid: { status: 400 },
  unauthorized: { status: 401 },
  forbidden: { status: 403, type: 'invalid_request_error' },
  not_found: { status: 404 },
  conflict: { status: 409 },
  // A chain rule said no: the request was understood and cannot be done (WebDAV's "unprocessable").
  chain_refused: { status: 422 },
  rate_limited: { status: 429 },
  // nginx's "client closed request": only logs and metrics ever see it.
  client_closed: { status: 499 },
  upstream: { status: 502 },
  unavailable: { status: 503 },
  upstream_timeout: { status: 504, type: 'upstream_error' },
};

export function answerFor(err: GatewayError): ApiError {
  const { status, type } = ANSWER[err.kind];
  const headers: Record<string, string> = {};
  if (err.retryAfterSeconds !== null) headers['retry-after'] = String(Math.max(1, Math.ceil(err.retryAfterSeconds)));
  if (err.kind === 'unauthorized') headers['www-authenticate'] = 'Bearer';
  // The reference gateway names its own 503s in X-Devshard-Error (devshardctl: height_seed_incomplete).
  if (err.rule === 'height_seed_incomplete') headers['x-devshard-error'] = err.rule;
  return new ApiError(status, err.message, { ...(type ? { type } : {}), code: err.rule, param: err.param, headers, cause: err });
}
