/**
 * A host's URL is its participant's `inference_url` (docs/chain.md), recorded on the escrow's slots
 * when it was registered. Hosts move: when a call to a host fails as unreachable, the chain client's
 * cached participant URL is forgotten (`forgetParticipants`) and the escrow's slots are read again
 * from the chain; a slot whose participant now names another URL is called there from then on
 * (kept in memory for this process; a restart reads the chain again at the first failure).
 */
import { HostError } from '../../network/port.js';
import type { GatewayContext } from '../context.js';

interface Refreshed {
  /** host address → its current inference_url, where it differs from the recorded one. */
  urls: Map<string, string>;
  /** host address → when it was last looked up again (at most once per REFRESH_MS). */
  lastLookup: Map<string, number>;
}

const REFRESH_MS = 2_000;
const state = new WeakMap<GatewayContext, Refreshed>();
const of = (ctx: GatewayContext): Refreshed => {
  let s = state.get(ctx);
  if (!s) state.set(ctx, (s = { urls: new Map(), lastLookup: new Map() }));
  return s;
};

/** The URL to call a slot's host at: the refreshed one when its participant moved, else the recorded one. */
export function hostUrlOf(ctx: GatewayContext, slot: { host: string; url: string }): string {
  return state.get(ctx)?.urls.get(slot.host) ?? slot.url;
}

/**
 * After a failed host call: when the host was unreachable, forget its cached participant URL and
 * read the escrow's slots again, so the next call goes to the participant's current inference_url.
 */
export async function refreshAfterHostFailure(ctx: GatewayContext, escrowId: string, slot: { host: string; url: string }, err: unknown): Promise<void> {
  if (!(err instanceof HostError) || err.kind !== 'unreachable' || !slot.host) return;
  const s = of(ctx);
  const now = Date.now();
  if ((s.lastLookup.get(slot.host) ?? 0) + REFRESH_MS > now) return;
  s.lastLookup.set(slot.host, now);
  ctx.chain.forgetParticipants?.(slot.host);
  try {
    const escrow = await ctx.chain.escrow(escrowId);
    const fresh = escrow?.slots.find((x) => x.host === slot.host)?.url;
    if (fresh === undefined) return;
    const before = hostUrlOf(ctx, slot);
    if (fresh === slot.url) s.urls.delete(slot.host);
    else s.urls.set(slot.host, fresh);
    if (fresh !== before) {
      ctx.logger.warn({ component: 'hosts', escrow_id: escrowId, host: slot.host, from: before, to: fresh }, 'host_url_refreshed: the participant\'s inference_url changed; later calls go there');
    }
  } catch (e) {
    ctx.logger.debug({ escrow_id: escrowId, host: slot.host, err: { message: (e as Error).message } }, 'host_url_refresh_failed');
  }
}
