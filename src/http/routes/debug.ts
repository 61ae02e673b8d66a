/** GET /v1/debug/rotation (admin): rotation timing, settings and the latest per-model results. */
import { doc } from '../openapi.js';
import type { FastifyInstance } from 'fastify';
import type { GatewayContext } from '../../gateway/context.js';
import type { Authenticator } from '../auth.js';

export function registerDebugRoutes(app: FastifyInstance, ctx: GatewayContext, auth: Authenticator): void {
  app.get('/v1/debug/rotation', { onRequest: auth.requireAdmin, config: { auth: 'admin' as const }, schema: doc({ summary: 'Rotation debug' }) }, async () => {
    const settings = ctx.projections.settings.effective().escrow_rotation;
    const epoch = await ctx.chain.epoch().catch(() => undefined);
    return {
      enabled: settings.enabled,
      chain: {
        block_height: epoch?.height ?? null,
        epoch_index: epoch?.epochIndex ?? null,
        next_boundary_height: epoch?.nextBoundaryHeight ?? null,
        blocks_until_next_rotation: epoch ? Math.max(0, epoch.blocksUntilBoundary - settings.pre_poc_blocks) : null,
        poc_active: epoch?.pocActive ?? null,
      },
      settings,
      latest: ctx.projections.rotation.entries(),
    };
  });
}
