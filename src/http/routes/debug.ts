/** GET /v1/debug/rotation (admin): devshardctl's rotation debug shape with ours beside it (gateway/devshardctl/rotation-statuses.ts). */
import type { FastifyInstance } from 'fastify';
import type { GatewayPort } from '../../gateway/port.js';
import type { Authenticator } from '../auth.js';
import { doc } from '../openapi.js';

export function registerDebugRoutes(app: FastifyInstance, gateway: GatewayPort, auth: Authenticator): void {
  app.get('/v1/debug/rotation', { onRequest: auth.requireAdmin, config: { auth: 'admin' as const }, schema: doc({ summary: 'Rotation debug', answers: { ok: { 200: { description: "devshardctl's rotation debug shape with ours beside it", body: 'RotationDebug' } } } }) }, async () => gateway.rotationDebug());
}
