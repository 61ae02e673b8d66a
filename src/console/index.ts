/**
 * The operator console (issue 43): the page at /console and its assets (static-files.ts), and the
 * admin data routes it reads (routes.ts). Registered by the composition root (src/main/start.ts).
 */
import type { FastifyInstance } from 'fastify';
import type { GatewayPort } from '../gateway/port.js';
import type { Authenticator } from '../http/auth.js';
import type { ConsoleLog } from './log-source.js';
import { registerConsoleRoutes } from './routes.js';
import { CONSOLE_PATH, registerConsoleFiles } from './static-files.js';

export { CONSOLE_PATH } from './static-files.js';
export type { ConsoleLog } from './log-source.js';

/** Registers the console over the gateway's event store (`log`: its reads and its subscription). */
export function registerConsole(app: FastifyInstance, gateway: GatewayPort, auth: Authenticator, log: ConsoleLog): void {
  registerConsoleFiles(app);
  registerConsoleRoutes(app, gateway, auth, () => log);
}

/** Where the console is served, for a start-up line. */
export const consoleUrl = (base: string): string => `${base}${CONSOLE_PATH}`;
