/**
 * Which models this gateway serves: the configured model, every model with an escrow here, and
 * every model named in settings (access modes, rotation). Ids are exact and case-sensitive.
 */
import type { GatewayContext } from './context.js';

export function servedModels(ctx: Pick<GatewayContext, 'config' | 'projections'>): string[] {
  const set = new Set<string>([ctx.config.model]);
  for (const m of ctx.projections.pool.models()) set.add(m);
  const s = ctx.projections.settings.current();
  for (const l of s.model_limits) set.add(l.model_id);
  for (const r of s.escrow_rotation.models) set.add(r.model_id);
  return [...set].filter(Boolean).sort();
}

export function isServedModel(ctx: Pick<GatewayContext, 'config' | 'projections'>, model: string): boolean {
  if (model === ctx.config.model) return true;
  if (ctx.projections.pool.hasRoutable(model)) return true;
  return servedModels(ctx).includes(model);
}
