/**
 * Which models this gateway serves: the configured model, every model with an escrow here, and
 * every model rotation keeps escrows of. Ids are exact and case-sensitive. A model_limits entry
 * alone does not make a model served (issue 38): with no escrow and no rotation its chats could
 * only get 503 + Retry-After, and SDKs retry those forever; they get 404 model_not_found instead.
 * New entries for such models are refused (settings.ts), older ones are removed with
 * `access_mode: null`.
 */
import type { GatewayContext } from '../context.js';

export function servedModels(ctx: Pick<GatewayContext, 'config' | 'projections'>): string[] {
  const set = new Set<string>([ctx.config.model]);
  for (const m of ctx.projections.pool.models()) set.add(m);
  const s = ctx.projections.settings.current();
  for (const r of s.escrow_rotation.models) set.add(r.model_id);
  return [...set].filter(Boolean).sort();
}

export function isServedModel(ctx: Pick<GatewayContext, 'config' | 'projections'>, model: string): boolean {
  if (model === ctx.config.model) return true;
  if (ctx.projections.pool.hasRoutable(model)) return true;
  return servedModels(ctx).includes(model);
}
