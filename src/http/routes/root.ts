/**
 * GET /: a small JSON index of what this gateway serves, so a browser or `curl` at the bare address
 * finds the API description (/docs, /openapi.json), the console (/console, once it is served) and
 * the main routes instead of a bare 404. No key; only links, nothing about the gateway's state.
 * Not an API operation: hidden from /openapi.json, as /openapi.json itself is.
 */
import type { FastifyInstance } from 'fastify';
import { doc } from '../openapi.js';

/** Where each link points, in the order shown; a link whose route is not served is left out. */
const LINKS: readonly (readonly [name: string, method: 'GET' | 'POST', path: string, what: string])[] = [
  ['docs', 'GET', '/docs', 'Swagger UI of every route'],
  ['openapi', 'GET', '/openapi.json', 'the OpenAPI 3.1 document'],
  ['console', 'GET', '/console', 'the operator console'],
  ['chat_completions', 'POST', '/v1/chat/completions', 'OpenAI-compatible chat (Authorization: Bearer <key>)'],
  ['models', 'GET', '/v1/models', 'the models served (a key)'],
  ['status', 'GET', '/v1/status', 'gateway status, the health check (no key)'],
  ['metrics', 'GET', '/metrics', 'Prometheus metrics (the admin key)'],
];

export function registerRootRoute(app: FastifyInstance): void {
  app.get('/', { config: { auth: 'none' as const }, schema: doc({ summary: 'Index: links to the docs, the console and the main routes', hide: true }) }, async () => ({
    object: 'index',
    name: 'shardgate',
    description: 'OpenAI-compatible inference gateway for the Gonka devshard network',
    // Looked up per request: a route registered later (the console) appears without a change here.
    links: Object.fromEntries(
      LINKS.filter(([, method, path]) => app.findRoute({ method, url: path }) !== null).map(([name, method, path, what]) => [name, { method, path, description: what }]),
    ),
  }));
}
