/**
 * OpenAPI 3.1 document assembled from the routes' own fastify schemas (collected by an onRoute
 * hook), so the document cannot drift from what the server validates. Route `schema.summary`,
 * `schema.description`, `schema.tags` and `schema.hide` are honoured; `config.auth`
 * ('admin' | 'client' | 'none') sets the security requirement (admin paths default to 'admin').
 */
import type { FastifySchema, RouteOptions } from 'fastify';
import { isAdminPath } from './disabled-gate.js';

export type RouteAuth = 'admin' | 'client' | 'none';

/** A route schema with the documentation members this collector reads. */
export type FastifySchemaWithDocs = FastifySchema & { summary?: string; description?: string; tags?: string[]; hide?: boolean };

interface CollectedRoute {
  method: string;
  url: string;
  schema: Record<string, unknown>;
  auth: RouteAuth;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Who may call the route; documents it in OpenAPI. The preHandler does the enforcing. */
    auth?: RouteAuth;
  }
}

export class OpenApiCollector {
  private routes: CollectedRoute[] = [];

  constructor(private readonly info: { title: string; version: string; description?: string }) {}

  /** Use as `app.addHook('onRoute', collector.onRoute)`. */
  readonly onRoute = (route: RouteOptions): void => {
    const schema = (route.schema ?? {}) as Record<string, unknown>;
    if (schema.hide === true) return;
    const methods = (Array.isArray(route.method) ? route.method : [route.method]).filter((m) => m !== 'HEAD');
    const auth = (route.config as { auth?: RouteAuth } | undefined)?.auth ?? (isAdminPath(route.url) ? 'admin' : 'none');
    for (const method of methods) this.routes.push({ method: method.toLowerCase(), url: route.url, schema, auth });
  };

  document(): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    for (const r of this.routes) {
      const path = r.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
      const op: Record<string, unknown> = { operationId: `${r.method}${path.replace(/[^A-Za-z0-9]+/g, '_')}` };
      for (const k of ['summary', 'description', 'tags'] as const) if (r.schema[k] !== undefined) op[k] = r.schema[k];
      const parameters: unknown[] = [];
      for (const [part, where] of [['params', 'path'], ['querystring', 'query'], ['headers', 'header']] as const) {
        const s = r.schema[part] as { properties?: Record<string, unknown>; required?: string[] } | undefined;
        for (const [name, schema] of Object.entries(s?.properties ?? {})) {
          parameters.push({ name, in: where, required: where === 'path' || (s?.required ?? []).includes(name), schema });
        }
      }
      if (parameters.length) op.parameters = parameters;
      if (r.schema.body) op.requestBody = { required: true, content: { 'application/json': { schema: r.schema.body } } };
      const responses: Record<string, unknown> = {};
      const declared = (r.schema.response ?? {}) as Record<string, unknown>;
      for (const [status, schema] of Object.entries(declared)) {
        responses[status] = { description: status.startsWith('2') ? 'Success' : 'Error', content: { 'application/json': { schema } } };
      }
      if (!Object.keys(declared).some((s) => s.startsWith('2'))) responses['200'] = { description: 'Success' };
      responses.default = { description: 'OpenAI-style error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
      op.responses = responses;
      if (r.auth === 'admin') op.security = [{ adminKey: [] }];
      else if (r.auth === 'client') op.security = [{ clientKey: [] }, { adminKey: [] }];
      else op.security = [];
      (paths[path] ??= {})[r.method] = op;
    }
    return {
      openapi: '3.1.0',
      info: this.info,
      paths,
      components: {
        securitySchemes: {
          clientKey: { type: 'http', scheme: 'bearer', description: 'A key from DEVSHARD_API_KEYS.' },
          adminKey: { type: 'http', scheme: 'bearer', description: 'DEVSHARD_ADMIN_API_KEY.' },
        },
        schemas: {
          Error: {
            type: 'object',
            required: ['error'],
            properties: {
              error: {
                type: 'object',
                required: ['message', 'type', 'param', 'code'],
                properties: {
                  message: { type: 'string' },
                  type: { type: 'string' },
                  param: { type: ['string', 'null'] },
                  code: { type: ['string', 'null'] },
                },
              },
            },
          },
        },
      },
    };
  }
}

/** A route schema with OpenAPI docs (summary, tags, hide), typed for fastify's route options. */
export const doc = (schema: FastifySchemaWithDocs): FastifySchema => schema;
