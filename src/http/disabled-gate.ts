/**
 * The kill switch at the edge: while the disabled state is on, every non-admin route answers 308
 * with `Location: new_url` and `{status, message, new_url}`; admin routes keep working so the
 * operator can turn it off again.
 *
 * Exempt (keep working while disabled): /v1/admin/*, /v1/debug/*, /devshard/*, /v1/finalize
 * (the spec's admin routes), plus /metrics, /openapi.json and Swagger UI (/docs): a monitoring scraper following a
 * redirect to another gateway would report the wrong instance, and the API description is not
 * traffic. /v1/status is NOT exempt (the spec lists it as a non-admin route); operators read the
 * admin routes while disabled.
 */
import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';

export interface DisabledState {
  enabled: boolean;
  message?: string | undefined;
  new_url?: string | undefined;
}

const ADMIN_PREFIXES = ['/v1/admin/', '/v1/debug/', '/devshard/'];
const ADMIN_EXACT = ['/v1/admin', '/v1/debug', '/v1/finalize'];
const OPERATOR_EXACT = ['/metrics', '/openapi.json', '/docs', '/console'];
/** Swagger UI's pages and assets (src/http/openapi.ts DOCS_PREFIX). */
const OPERATOR_PREFIXES = ['/docs/', '/console/'];

/** True for the spec's admin routes (path or route pattern, query string ignored). */
export function isAdminPath(url: string): boolean {
  const path = url.split('?')[0] ?? '';
  return ADMIN_EXACT.includes(path) || ADMIN_PREFIXES.some((p) => path.startsWith(p));
}

export function isExemptFromDisabled(url: string): boolean {
  const path = url.split('?')[0] ?? '';
  return isAdminPath(path) || OPERATOR_EXACT.includes(path) || OPERATOR_PREFIXES.some((p) => path.startsWith(p));
}

export const DEFAULT_DISABLED_MESSAGE = 'This gateway is disabled; use the new URL.';

/** onRequest hook; `getDisabled` is read per request (a projection, in memory). */
export function disabledGate(getDisabled: () => DisabledState): onRequestHookHandler {
  // Callback style (no promise per request); answering early means not calling done.
  return function disabledGateHook(request: FastifyRequest, reply: FastifyReply, done: () => void) {
    const state = getDisabled();
    // The raw path decides, not the matched route: an unknown path is not an admin route.
    if (!state.enabled || isExemptFromDisabled(request.url)) return done();
    // Always a string (the spec's type). Empty only in a log of an older version, which let the
    // bootstrap turn the switch on without a URL: then there is no Location to send.
    const newUrl = state.new_url ?? '';
    if (newUrl) reply.header('location', newUrl);
    request.logFields.disabled = true;
    reply
      .code(308)
      .type('application/json; charset=utf-8')
      .send({ status: 'disabled', message: state.message || DEFAULT_DISABLED_MESSAGE, new_url: newUrl });
  };
}
