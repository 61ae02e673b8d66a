import type { FastifyInstance } from 'fastify';
import type { GatewayContext } from '../../gateway/context.js';
import { createAuthenticator } from '../auth.js';
import { disabledGate } from '../disabled-gate.js';
import { registerAdminRoutes } from './admin.js';
import { registerBrokerRoutes } from './broker.js';
import { registerDebugRoutes } from './debug.js';
import { registerStatusRoutes } from './status.js';

/** Every route of the gateway, behind the kill switch (which admin routes bypass). */
export function registerRoutes(app: FastifyInstance, ctx: GatewayContext): void {
  const auth = createAuthenticator({ adminApiKey: ctx.config.keys.adminApiKey, apiKeys: ctx.config.keys.apiKeys });
  app.addHook('onRequest', disabledGate(() => ctx.projections.settings.current().disabled));
  registerBrokerRoutes(app, ctx, auth);
  registerAdminRoutes(app, ctx, auth);
  registerStatusRoutes(app, ctx, auth);
  registerDebugRoutes(app, ctx, auth);
}
