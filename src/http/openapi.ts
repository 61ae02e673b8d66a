/**
 * The OpenAPI 3.1 document, made by @fastify/swagger from the routes' own fastify schemas (so it
 * cannot drift from what the server validates), served at GET /openapi.json, with Swagger UI
 * (@fastify/swagger-ui) at /docs as devshardctl serves it. Route `schema.summary`,
 * `schema.description`, `schema.tags` and `schema.hide` are honoured; `config.auth`
 * ('admin' | 'client' | 'none') sets the security requirement (admin paths default to 'admin');
 * every operation documents the OpenAI-style error body (component `Error`) as its default response.
 *
 * Answers are documented from `schema.answers` (see RouteAnswers), never from fastify's
 * `schema.response`: a response schema makes fastify serialize with fast-json-stringify, which drops
 * members the schema does not list and coerces types, and our answers are supersets of devshardctl's
 * shapes. `answers` is read by the swagger transform only, so what is served cannot change. The
 * transform adds the error statuses every route of a kind can answer: 401 when a key is required,
 * 400/413/415 on a method with a body, 400/404 with a path parameter, 308 behind the kill switch, 500.
 */
import { fastifySwagger } from '@fastify/swagger';
import { fastifySwaggerUi } from '@fastify/swagger-ui';
import type { FastifyInstance, FastifySchema, RouteOptions } from 'fastify';
import { isAdminPath, isExemptFromDisabled } from './disabled-gate.js';
import { ANSWER_SCHEMAS, ref, type AnswerSchemaName } from './schemas/answers.js';

export type RouteAuth = 'admin' | 'client' | 'none';

/** One documented success answer: its body (a component of schemas/answers.ts, per media type) and headers. */
export interface DocAnswer {
  description: string;
  /** A component name (served as application/json), or a body per media type. */
  body: AnswerSchemaName | Record<string, AnswerSchemaName | Record<string, unknown>>;
  headers?: Record<string, string>;
}

/**
 * What a route answers, for /openapi.json only (never given to fastify as `response`, so it cannot
 * change serialization). `errors`: the route's own error statuses beyond the derived ones (or a
 * better description of one), each answered with the `Error` body.
 */
export interface RouteAnswers {
  ok: Record<number, DocAnswer>;
  errors?: Record<number, string>;
}

/** A route schema with the documentation members @fastify/swagger reads, and our `answers`. */
export type FastifySchemaWithDocs = FastifySchema & { summary?: string; description?: string; tags?: string[]; hide?: boolean; answers?: RouteAnswers };

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Who may call the route; documents it in OpenAPI. The preHandler does the enforcing. */
    auth?: RouteAuth;
  }
}

/** Where Swagger UI is served (its own assets and /docs/json beneath). */
export const DOCS_PREFIX = '/docs';

/** What each error status means when the route does not say more. */
const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request: a schema violation naming the param (`invalid_type`, `missing_required_parameter`, `unknown_parameter`, ...), invalid JSON (`invalid_json`), or a rule of the operation.',
  401: 'No key, or a key not accepted here (`invalid_api_key`; `WWW-Authenticate: Bearer`).',
  403: 'Refused by a rule of the chain checked before anything is signed.',
  404: 'Not found.',
  409: 'Conflict with the current state.',
  413: 'Request body over the route\'s limit (`request_too_large`).',
  415: 'Body not JSON (`unsupported_media_type`) or compressed (`unsupported_content_encoding`).',
  422: 'The chain refused the transaction (`chain_refused`); retrying does not help.',
  429: 'Over the admission limit (`Retry-After: 1`).',
  500: 'Unexpected server error (`internal_error`); details only in the log.',
  502: 'An upstream (host or chain) failed.',
  503: 'Unavailable right now.',
  504: 'An upstream (host) did not answer in time.',
};

const ERROR_HEADERS: Record<number, Record<string, string>> = {
  401: { 'www-authenticate': '`Bearer`' },
  429: { 'retry-after': 'Seconds to wait before retrying.' },
  503: { 'retry-after': 'Seconds to wait before retrying, when known.' },
};

const headersDoc = (headers: Record<string, string> | undefined) =>
  headers ? { headers: Object.fromEntries(Object.entries(headers).map(([name, description]) => [name, { type: 'string', description }])) } : {};

const mediaSchema = (body: AnswerSchemaName | Record<string, unknown>) => (typeof body === 'string' ? ref(body) : body);

/** A documented answer as @fastify/swagger's response entry (content per media type). */
function answerDoc(a: DocAnswer): Record<string, unknown> {
  const content = typeof a.body === 'string' ? { 'application/json': { schema: ref(a.body) } } : Object.fromEntries(Object.entries(a.body).map(([type, body]) => [type, { schema: mediaSchema(body) }]));
  return { description: a.description, content, ...headersDoc(a.headers) };
}

const errorDoc = (status: number, description: string) => ({ description, content: { 'application/json': { schema: ref('Error') } }, ...headersDoc(ERROR_HEADERS[status]) });

/** The error statuses any route of this kind can answer (auth, body, path parameters). */
function derivedErrors(auth: RouteAuth, method: string, url: string): Record<number, string> {
  const errors: Record<number, string> = {};
  if (url.includes(':')) {
    errors[400] = 'Invalid request: a path parameter does not match its pattern, or a rule of the operation.';
    errors[404] = 'No devshard with this id is registered on this gateway (`devshard_not_found`).';
  }
  if (['post', 'put', 'patch'].includes(method)) {
    errors[400] = ERROR_DESCRIPTIONS[400]!;
    errors[413] = ERROR_DESCRIPTIONS[413]!;
    errors[415] = ERROR_DESCRIPTIONS[415]!;
  }
  if (auth === 'admin') errors[401] = 'No key, or a key that is not the admin key (`invalid_api_key`; `WWW-Authenticate: Bearer`).';
  if (auth === 'client') errors[401] = 'No key, or a key that is neither a client key nor the admin key (`invalid_api_key`; `WWW-Authenticate: Bearer`).';
  errors[500] = ERROR_DESCRIPTIONS[500]!;
  return errors;
}

/** The documented responses of a route: its answers, its errors, the 308 of the kill switch, the error default. */
function responsesOf(answers: RouteAnswers | undefined, auth: RouteAuth, method: string, url: string, declared: Record<string, unknown>): Record<string, unknown> {
  const response: Record<string, unknown> = { ...declared };
  if (answers) {
    for (const [status, a] of Object.entries(answers.ok)) response[status] ??= answerDoc(a);
    const errors = { ...derivedErrors(auth, method, url), ...answers.errors };
    for (const [status, description] of Object.entries(errors)) response[status] ??= errorDoc(Number(status), description || ERROR_DESCRIPTIONS[Number(status)] || 'Error.');
    if (!isExemptFromDisabled(url)) {
      response['308'] ??= { description: 'The gateway is disabled (kill switch): `Location` is the new URL.', content: { 'application/json': { schema: ref('Disabled') } }, ...headersDoc({ location: 'The new URL (omitted when none is set).' }) };
    }
  }
  response.default ??= { description: 'OpenAI-style error', content: { 'application/json': { schema: ref('Error') } } };
  return response;
}

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
  const { answers, ...documented } = (schema ?? {}) as FastifySchemaWithDocs;
  const response = responsesOf(answers, auth, method, url, (schema?.response as Record<string, unknown> | undefined) ?? {});
  return {
    url,
    schema: {
      ...documented,
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
          // Documentation only (schemas/answers.ts): never a fastify response schema.
          schemas: ANSWER_SCHEMAS as unknown as Record<string, object>,
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
