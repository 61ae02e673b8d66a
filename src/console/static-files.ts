/**
 * The console's pages and their assets, served by the gateway itself from the package (never a
 * CDN: a gateway may have no internet): its own files from `assets/` and two libraries from
 * node_modules (preact + hooks + htm in one ES module; uPlot and its stylesheet). Every answer
 * carries the console's Content-Security-Policy: scripts, styles and connections from this origin
 * only, no inline script or style, no framing.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { doc } from '../http/openapi.js';

export const CONSOLE_PATH = '/console';

export const CONSOLE_CSP = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

/**
 * The assets folder: beside this module (dist/src/console/assets once the build copies it), else
 * the package's source (src/console/assets: tests and a build without the copy step).
 */
export function assetsDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [join(here, 'assets'), join(here, '..', '..', '..', 'src', 'console', 'assets')];
  const found = candidates.find((d) => existsSync(join(d, 'index.html')));
  if (!found) throw new Error(`the console's assets are not in ${candidates.join(' or ')}`);
  return found;
}

/** The libraries the pages import, from node_modules (resolved as the package resolves them). */
export function vendorFiles(): Record<string, string> {
  const require = createRequire(import.meta.url);
  // htm exports no subpath for the standalone browser module's file: found from its package root.
  const htmRoot = join(dirname(require.resolve('htm')), '..');
  return {
    'preact-htm.js': join(htmRoot, 'preact', 'standalone.module.js'),
    'uplot.js': require.resolve('uplot/dist/uPlot.esm.js'),
    'uplot.css': require.resolve('uplot/dist/uPlot.min.css'),
  };
}

interface Served {
  body: Buffer;
  type: string;
}

function securityHeaders(reply: FastifyReply, type: string): FastifyReply {
  return reply
    .header('content-security-policy', CONSOLE_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-frame-options', 'DENY')
    .header('cache-control', 'no-cache')
    .type(type);
}

/** GET /console (the page), /console/assets/<file>, /console/vendor/<file>: read once, served from memory. */
export function registerConsoleFiles(app: FastifyInstance): void {
  const dir = assetsDir();
  const assets = new Map<string, Served>();
  for (const name of readdirSync(dir)) {
    const type = TYPES[extname(name)];
    if (type && /^[a-z0-9][a-z0-9.-]*$/.test(name)) assets.set(name, { body: readFileSync(join(dir, name)), type });
  }
  const vendor = new Map<string, Served>(Object.entries(vendorFiles()).map(([name, file]) => [name, { body: readFileSync(file), type: TYPES[extname(name)]! }]));
  const page = assets.get('index.html')!;
  const pageRoute = { config: { auth: 'none' as const }, schema: doc({ hide: true, summary: 'The operator console (HTML)' }) };
  const sendPage = (_req: unknown, reply: FastifyReply) => securityHeaders(reply, page.type).send(page.body);
  app.get(CONSOLE_PATH, pageRoute, sendPage);
  app.get(`${CONSOLE_PATH}/`, pageRoute, sendPage);
  const fileRoute = (map: Map<string, Served>) => async (request: { params: unknown }, reply: FastifyReply) => {
    const file = map.get((request.params as { file: string }).file);
    if (!file) return securityHeaders(reply, 'application/json; charset=utf-8').code(404).send({ error: { message: 'No such console file.', type: 'invalid_request_error', param: null, code: 'not_found' } });
    return securityHeaders(reply, file.type).send(file.body);
  };
  app.get(`${CONSOLE_PATH}/assets/:file`, pageRoute, fileRoute(assets));
  app.get(`${CONSOLE_PATH}/vendor/:file`, pageRoute, fileRoute(vendor));
}
