/**
 * The fastify instance every route lives on: OpenAI-style errors for everything, request ids, one
 * JSON log line per request with the fields handlers attach (`request.logFields`), a tolerant JSON
 * body parser, and the OpenAPI document at GET /openapi.json. Routes are added by the caller
 * (src/http/routes, written over the gateway use cases).
 *
 * Validation uses fastify's ajv with coercion and additional-property removal turned OFF: a
 * string "1" for temperature is an error (as at OpenAI), and unknown settings members are refused,
 * not silently dropped. So path/query schemas must declare strings (e.g. `{type:'string',
 * pattern:'^[0-9]+$'}`), see escrowIdParamsSchema.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import type { Logger } from 'pino';
import { MAX_BODY_BYTES_DEFAULT } from '../config/index.js';
import { ApiError } from './api-error.js';
import { jsonBodyReader } from './json-body.js';
import { handleClientError, installErrorHandlers, isEmptyEscrowPath, sendApiError, sendEmptyNotFound, toApiError } from './errors.js';
import { lazyChildLoggerFactory } from './lazy-child-logger.js';
import { createLogger } from './logger.js';
import type { GatewayMetrics } from './metrics.js';
import { installOpenApi } from './openapi.js';

/** Fields a handler attaches for the request's log line (and nothing secret). */
export interface RequestLogFields {
  model?: string;
  escrow_id?: string;
  nonce?: number;
  prompt_tokens?: number;
  completion_tokens?: number;
  stream?: boolean;
  key_id?: string;
  /** The `code` and `param` of an error answer (set by sendApiError), so a 4xx line says what was refused. */
  error_code?: string;
  error_param?: string;
  /** A 5xx answer's message (an expected one is logged by this line only, without a stack). */
  error_message?: string;
  [key: string]: unknown;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Merged into the one log line written when the response finishes or the client leaves. */
    logFields: RequestLogFields;
    /**
     * Set by a handler that must stop work when the client leaves before the response finished
     * (the request's one 'close' listener calls it); one listener per request instead of two.
     */
    onClientGone: (() => void) | null;
  }
  interface FastifyInstance {
    /** The slow-client rules routes apply to what they write (HttpAppOptions.server). */
    clientLimits: { slowClientTimeoutMs: number };
  }
}

/**
 * The HTTP server's own limits (issue 39): every one explicit, so an operator knows what bounds a
 * client's connections and what a client that never reads can hold.
 */
export interface HttpServerLimits {
  /** Open connections the server accepts; more are closed at once (GATEWAY_MAX_CONNECTIONS). */
  maxConnections?: number;
  /** Time to receive a request's headers (GATEWAY_HEADERS_TIMEOUT_MS). */
  headersTimeoutMs?: number;
  /** Time to receive a whole request, headers and body (GATEWAY_REQUEST_RECEIVE_TIMEOUT_MS). */
  requestReceiveTimeoutMs?: number;
  /**
   * Unsent bytes a response holds for its client before a stream waits for it (the responses'
   * high-water mark; GATEWAY_SLOW_CLIENT_MAX_UNSENT_BYTES).
   */
  maxUnsentBytes?: number;
  /** How long a stream waits on a client that does not take its bytes (GATEWAY_SLOW_CLIENT_TIMEOUT_MS). */
  slowClientTimeoutMs?: number;
  /**
   * Bytes of a refused body (over its limit) read and discarded so the client, still sending, can
   * read the 413; beyond them the connection is cut. Not a variable: the default is the largest
   * body any route accepts (the devshard import's 64 MiB).
   */
  discardBodyBytes?: number;
}

/** The defaults of HttpServerLimits (those of the variables in src/config/variables.ts). */
export const SERVER_LIMIT_DEFAULTS: Required<HttpServerLimits> = {
  maxConnections: 4096,
  headersTimeoutMs: 30_000,
  requestReceiveTimeoutMs: 60_000,
  maxUnsentBytes: 65_536,
  slowClientTimeoutMs: 30_000,
  discardBodyBytes: 64 * 1024 * 1024,
};

export interface HttpAppOptions {
  /** A pino logger (use createLogger for redaction); default: createLogger({ level: logLevel }). */
  logger?: Logger;
  logLevel?: string;
  /** Max request body in bytes (GATEWAY_MAX_BODY_BYTES, default MAX_BODY_BYTES_DEFAULT: 8 MiB); larger bodies get 413. */
  bodyLimit?: number;
  /** Counts every request by route pattern and status when given. */
  metrics?: GatewayMetrics;
  /** Behind a reverse proxy: trust X-Forwarded-* (fastify's trustProxy). Default false. */
  trustProxy?: FastifyServerOptions['trustProxy'];
  /** OpenAPI info block. */
  openapi?: { title?: string; version?: string; description?: string };
  /** The server's connection limits; each unset one takes its SERVER_LIMIT_DEFAULTS value. */
  server?: HttpServerLimits;
  /** Other fastify options (e.g. forceCloseConnections for shutdown). */
  fastify?: Partial<FastifyServerOptions>;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

function isValidJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Keeps a sane caller-supplied X-Request-Id (so a proxy's id links logs), else a fresh one. */
export function genReqId(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  if (typeof given === 'string' && REQUEST_ID.test(given)) return given;
  return `req-${randomUUID()}`;
}

export function createHttpApp(options: HttpAppOptions = {}): FastifyInstance {
  const logger = options.logger ?? createLogger({ level: options.logLevel ?? 'info' });
  const bodyLimit = options.bodyLimit ?? MAX_BODY_BYTES_DEFAULT;
  /** A refusal before any route ran: the request's log line and metric (the URL is not echoed). */
  const refusedBeforeRouting = (r: { reqId?: string; method: string; route: string; status: number; code: string }): void => {
    options.metrics?.httpRequests.inc({ method: r.method, route: r.route, status: r.status });
    if (logger.isLevelEnabled('info')) logger.info({ ...(r.reqId ? { reqId: r.reqId } : {}), method: r.method, route: r.route, status: r.status, error_code: r.code }, 'request');
  };
  const limits = { ...SERVER_LIMIT_DEFAULTS, ...options.server };
  const app = Fastify({
    ...options.fastify,
    requestTimeout: limits.requestReceiveTimeoutMs,
    // Node checks the two request timeouts on this period (its default, 30 s, would let a short
    // headers timeout run up to 30 s late).
    http: { headersTimeout: limits.headersTimeoutMs, highWaterMark: limits.maxUnsentBytes, connectionsCheckingInterval: Math.max(250, Math.min(30_000, limits.headersTimeoutMs)) },
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit,
    genReqId,
    childLoggerFactory: lazyChildLoggerFactory,
    // Our own single line per request replaces fastify's incoming/completed pair.
    logController: new LogController({ disableRequestLogging: true }),
    trustProxy: options.trustProxy ?? false,
    // The router's own refusals (a malformed percent-escape in the path, an overlong path
    // parameter) bypass the error handler and answered fastify's body
    // ({"error":"Bad Request","code":"FST_ERR_BAD_URL",...}, echoing the path): OpenAI style instead.
    // Neither kind reaches the onRequest hook below, so each logs and counts its own refusal.
    clientErrorHandler: (err, socket) => {
      const refused = handleClientError(err, socket);
      if (refused) refusedBeforeRouting({ method: '(unparsed)', route: '(unparsed)', ...refused });
    },
    frameworkErrors: (err, request, reply) => {
      const apiError = toApiError(err) ?? new ApiError(400, 'The request URL is malformed.', { code: 'bad_url' });
      refusedBeforeRouting({ reqId: request.id, method: request.method, route: '(unmatched)', status: apiError.status, code: apiError.code ?? 'bad_url' });
      void sendApiError(reply, apiError);
    },
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allowUnionTypes: true, useDefaults: false } },
  });

  installErrorHandlers(app);
  app.server.maxConnections = limits.maxConnections;
  app.decorate('clientLimits', { slowClientTimeoutMs: limits.slowClientTimeoutMs });


  // JSON with any charset; an empty body is "no body" (curl -X POST -H 'Content-Type: application/json'
  // on finalize/deactivate), which then fails only if the route requires one.
  app.removeContentTypeParser('application/json');
  // Every body is JSON: fastify's built-in text/plain parser would hand a string to the route and
  // answer a confusing 400 ("expected an object") instead of the documented 415.
  app.removeContentTypeParser('text/plain');
  const parseJson = app.getDefaultJsonParser('error', 'error');
  // Routes declared with their own bodyLimit (the devshard import): their 413 names no variable.
  const ownLimitRoutes = new Set<string>();
  app.addHook('onRoute', (route) => {
    if (route.bodyLimit === undefined) return;
    for (const method of [route.method].flat()) ownLimitRoutes.add(`${method} ${route.url}`);
  });
  const parse = (request: FastifyRequest, text: string, done: (err: Error | null, body?: unknown) => void): void => {
    void parseJson(request, text, (err, parsed) => {
      // secure-json-parse refuses a key `__proto__` (or `constructor.prototype`) in valid JSON, which
      // fastify reported as unparsable: say which rule refused it. Refused rather than stripped: a
      // tool's JSON schema would reach the host silently changed.
      if (err && (err as { code?: string }).code === 'FST_ERR_CTP_INVALID_JSON_BODY' && isValidJson(text)) {
        return done(
          new ApiError(400, "The JSON body has a key named '__proto__' (or 'constructor' holding 'prototype'); such keys are refused (prototype poisoning protection). Rename or remove them.", {
            code: 'forbidden_json_key',
          }),
          undefined,
        );
      }
      done(err, parsed);
    });
  };
  // Read by our own reader (json-body.ts) rather than fastify's `parseAs`, so a body over the limit
  // gets a 413 the client can read, naming GATEWAY_MAX_BODY_BYTES.
  app.addContentTypeParser('application/json', jsonBodyReader({ serverLimit: bodyLimit, ownLimitRoutes, discardBytes: limits.discardBodyBytes, parse }));

  app.decorateRequest('logFields', null as unknown as RequestLogFields);
  app.decorateRequest('onClientGone', null);
  // Callback style: an async hook would cost a promise and a microtask per request.
  app.addHook('onRequest', (request, reply, done) => {
    request.logFields = {};
    reply.header('x-request-id', request.id);
    const started = process.hrtime.bigint();
    const logLine = () => {
      const res = reply.raw;
      const status = res.statusCode;
      const aborted = !res.writableFinished;
      if (aborted) request.onClientGone?.();
      const route = request.routeOptions.url ?? '(unmatched)';
      options.metrics?.httpRequests.inc({ method: request.method, route, status });
      // The line is only built when its level is on (LOG_LEVEL=warn skips it per request). A 503 is
      // an expected answer (no escrow can take the request now, retry later): warn, not error.
      const level = status >= 500 ? (status === 503 ? 'warn' : 'error') : 'info';
      if (!logger.isLevelEnabled(level)) return;
      const line = {
        reqId: request.id,
        method: request.method,
        url: (request.url.split('?')[0] ?? '').slice(0, 512),
        route,
        status,
        latency_ms: Number((process.hrtime.bigint() - started) / 1000n) / 1000,
        ...(aborted ? { client_aborted: true } : {}),
        ...request.logFields,
      };
      logger[level](line, 'request');
    };
    // The raw 'close', not onResponse: it also fires for hijacked (SSE) replies and client aborts,
    // and after 'finish' when the response completed (writableFinished tells which).
    reply.raw.on('close', logLine); // 'close' comes once: no once() wrapper needed
    // The spec's bodiless 404 for an empty escrow id, whatever route pattern would match it.
    if (isEmptyEscrowPath(request.url)) sendEmptyNotFound(reply);
    else done();
  });

  // The OpenAPI document (GET /openapi.json) and Swagger UI (/docs) of every route declared from here on.
  installOpenApi(app, {
    title: options.openapi?.title ?? 'shardgate',
    version: options.openapi?.version ?? '1.0.0',
    ...(options.openapi?.description ? { description: options.openapi.description } : {}),
  });

  return app;
}
