/** GET /v1/debug/rotation (admin): rotation timing, settings and the latest per-model results. */
import { doc } from '../openapi.js';
import type { FastifyInstance } from 'fastify';
import type { GatewayContext } from '../../gateway/context.js';
import type { Authenticator } from '../auth.js';
import { rotationDebugDocument } from '../../gateway/rotation/index.js';

export function registerDebugRoutes(app: FastifyInstance, ctx: GatewayContext, auth: Authenticator): void {
  app.get('/v1/debug/rotation', { onRequest: auth.requireAdmin, config: { auth: 'admin' as const }, schema: doc({ summary: 'Rotation debug' }) }, async () => rotationDebugDocument(ctx));
}
