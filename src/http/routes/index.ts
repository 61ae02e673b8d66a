import type { FastifyInstance } from 'fastify';
import type { GatewayPort } from '../../gateway/port.js';
import { createAuthenticator, type AuthKeys } from '../auth.js';
import { disabledGate } from '../disabled-gate.js';
import type { GatewayMetrics } from '../metrics.js';
import { registerAdminRoutes } from './admin.js';
import { registerBrokerRoutes } from './broker.js';
import { registerDebugRoutes } from './debug.js';
import { registerRootRoute } from './root.js';
import { registerStatusRoutes } from './status.js';

export interface RoutesOptions {
  keys: AuthKeys;
  metrics: GatewayMetrics;
}

/** Every route of the gateway, behind the kill switch (which admin routes bypass). */
export function registerRoutes(app: FastifyInstance, gateway: GatewayPort, options: RoutesOptions): void {
  const auth = createAuthenticator(options.keys);
  app.addHook('onRequest', disabledGate(() => gateway.disabled()));
  registerBrokerRoutes(app, gateway, options.metrics, auth);
  registerAdminRoutes(app, gateway, auth);
  registerStatusRoutes(app, gateway, options.metrics, auth);
  registerDebugRoutes(app, gateway, auth);
  registerRootRoute(app);
}
