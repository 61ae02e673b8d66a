/** Signed requests to a host's session routes and how a host's refusal becomes the call's error. */
import { HostError } from '../../port.js';
import { sessionUrl } from '../request-body.js';
import { routeRefusalOf } from '../host-refusals.js';
import type { DevshardSession } from '../session.js';
import type { TransportContext } from './context.js';

/** The message of a host's error answer (its JSON's, or the text). */
export function messageOf(text: string): string {
  try {
    const p = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    if (typeof p.error === 'string') return p.error;
    if (p.error && typeof p.error.message === 'string') return p.error.message;
    if (typeof p.message === 'string') return p.message;
  } catch {
    /* not JSON */
  }
  return text.trim() || '(empty body)';
}

/** A host's non-200 answer as the error the call fails with; a protocol refusal is kept and reported. */
export function refused(ctx: TransportContext, s: DevshardSession, url: string, status: number, text: string, label: string): HostError {
  const { opts, routeRefusals } = ctx;
  const r = routeRefusalOf({ escrowId: s.escrow.escrowId, host: url, status, text, protocol: s.protocol, firstDiff: s.ackedNonce(url) === 0n, at: ctx.now() });
  opts.onHostRefused?.(s.escrow.escrowId, url, status, messageOf(text), r?.rule);
  if (!r) return new HostError('rejected', `${label} answered ${status}: ${messageOf(text)}`, status);
  const before = routeRefusals.get(r.escrowId);
  routeRefusals.set(r.escrowId, r);
  if (!before || before.rule !== r.rule || before.host !== r.host) opts.onRouteRefused?.(r);
  return new HostError('rejected', r.message, status);
}

/**
 * A signed POST of a session route, answered whole (catch-up syncs, seeds, timeout and error-miss
 * votes); the exchange is reported once answered. Rejects when the host cannot be reached.
 */
export async function postSessionRoute(
  ctx: TransportContext,
  s: DevshardSession,
  url: string,
  route: string,
  bytes: Uint8Array,
  o: { timeoutMs?: number; stream?: boolean } = {},
): Promise<{ status: number; text: string }> {
  const { now } = ctx;
  const body = Buffer.from(bytes);
  const ts = BigInt(Math.floor(now() / 1000));
  const target = new URL(sessionUrl(url, s.escrow.escrowId, route, s.protocol.route));
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(o.stream ? { accept: 'text/event-stream' } : {}), 'x-devshard-signature': s.headerSignature(body, ts), 'x-devshard-timestamp': String(ts) };
  const res = await ctx.agent.request({ origin: target.origin, path: target.pathname, method: 'POST', headers, body, signal: AbortSignal.timeout(o.timeoutMs ?? ctx.stallTimeoutMs) });
  const text = await res.body.text();
  ctx.onExchange?.({ url: target.href, headers, body: body.toString('utf8'), status: res.statusCode, response: text, at: now() });
  return { status: res.statusCode, text };
}
