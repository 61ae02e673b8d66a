/**
 * The OpenAPI 3.1 document, made by @fastify/swagger from the routes' own fastify schemas (so it
 * cannot drift from what the server validates), served at GET /openapi.json, with Swagger UI
 * (@fastify/swagger-ui) at /docs as devshardctl serves it. Route `schema.summary`,
 * `schema.description`, `schema.tags` and `schema.hide` are honoured; `config.auth`
 * ('admin' | 'client' | 'none') sets the security requirement (admin paths default to 'admin');
 * every operation documents the OpenAI-style error body as its default response.
 */
import { fastifySwagger } from '@fastify/swagger';
import { fastifySwaggerUi } from '@fastify/swagger-ui';
import type { FastifyInstance, FastifySchema, RouteOptions } from 'fastify';
import { isAdminPath } from './disabled-gate.js';

export type RouteAuth = 'admin' | 'client' | 'none';

/** A route schema with the documentation members @fastify/swagger reads. */
export type FastifySchemaWithDocs = FastifySchema & { summary?: string; description?: string; tags?: string[]; hide?: boolean };

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Who may call the route; documents it in OpenAPI. The preHandler does the enforcing. */
    auth?: RouteAuth;
  }
}

/** Where Swagger UI is served (its own assets and /docs/json beneath). */
export const DOCS_PREFIX = '/docs';

const ERROR_SCHEMA = {
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
};

const SECURITY: Record<RouteAuth, { [scheme: string]: string[] }[]> = {
  admin: [{ adminKey: [] }],
  client: [{ clientKey: [] }, { adminKey: [] }],
  none: [],
};

/** The route's schema as documented: its security, an operationId, the error default response. */
function transform({ schema, url, route }: { schema: FastifySchema; url: string; route: RouteOptions }): { schema: FastifySchema; url: string } {
  const auth = (route.config as { auth?: RouteAuth } | undefined)?.auth ?? (isAdminPath(url) ? 'admin' : 'none');
  const method = (Array.isArray(route.method) ? route.method[0]! : route.method).toLowerCase();
  const path = url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
  const response = { ...((schema?.response as Record<string, unknown> | undefined) ?? {}) };
  response.default ??= { description: 'OpenAI-style error', ...ERROR_SCHEMA };
  return {
    url,
    schema: {
      ...schema,
      operationId: schema?.operationId ?? `${method}${path.replace(/[^A-Za-z0-9]+/g, '_')}`,
      security: SECURITY[auth],
      response,
    } as FastifySchema,
  };
}

/**
 * Installs the document's route collection on `app`, synchronously: callers declare their routes
 * right after createHttpApp returns, and fastify runs onRoute hooks as a route is declared, so the
 * collector must be in place before (a registered plugin would load only at ready). The dynamic
 * mode of @fastify/swagger sets up synchronously, so it is applied here directly.
 */
export function installOpenApi(app: FastifyInstance, info: { title: string; version: string; description?: string }): void {
  fastifySwagger(
    app,
    {
      openapi: {
        openapi: '3.1.0',
        info,
        components: {
          securitySchemes: {
            clientKey: { type: 'http', scheme: 'bearer', description: 'A key from DEVSHARD_API_KEYS.' },
            adminKey: { type: 'http', scheme: 'bearer', description: 'DEVSHARD_ADMIN_API_KEY.' },
          },
        },
      },
      transform,
    },
    (err) => {
      if (err) throw err;
    },
  );
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  // Called from a plain (encapsulated) plugin of ours: @fastify/swagger was applied directly above,
  // so the packaged plugin's dependency check would not find it registered by name.
  const swaggerUi = fastifySwaggerUi as unknown as (scope: FastifyInstance, opts: { routePrefix: string }) => Promise<void>;
  void app.register(async (scope) => swaggerUi(scope, { routePrefix: DOCS_PREFIX }));
}

/** A route schema with OpenAPI docs (summary, tags, hide), typed for fastify's route options. */
export const doc = (schema: FastifySchemaWithDocs): FastifySchema => schema;
