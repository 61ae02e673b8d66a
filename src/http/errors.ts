/**
 * One place for error answers. Every error the gateway sends (except the spec's bodiless 404 for
 * `/devshard//v1/finalize`) is an OpenAI-style body `{"error":{"message","type","param","code"}}`,
 * so OpenAI SDKs surface our messages unchanged (DESIGN.md principle 7: errors are answers).
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { formatValidationError } from './validation-errors.js';

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'conflict_error'
  | 'server_error'
  | 'upstream_error'
  | 'service_unavailable';

export interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

export interface ApiErrorOptions {
  type?: ErrorType;
  code?: string | null;
  param?: string | null;
  /** Extra response headers, e.g. `{ 'retry-after': '1' }` or `{ 'www-authenticate': 'Bearer' }`. */
  headers?: Record<string, string>;
  cause?: unknown;
}

const DEFAULT_TYPE: Record<number, ErrorType> = {
  400: 'invalid_request_error',
  401: 'invalid_request_error', // OpenAI answers a bad key with this type and code invalid_api_key
  403: 'permission_error',
  404: 'invalid_request_error',
  409: 'conflict_error',
  413: 'invalid_request_error',
  415: 'invalid_request_error',
  429: 'rate_limit_error',
  502: 'upstream_error',
  503: 'service_unavailable',
};

/** An error that is an answer: throw it from a handler (or return it) and the client gets it as is. */
export class ApiError extends Error {
  readonly status: number;
  readonly type: string;
  readonly code: string | null;
  readonly param: string | null;
  readonly headers: Record<string, string>;

  constructor(status: number, message: string, options: ApiErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ApiError';
    this.status = status;
    this.type = options.type ?? DEFAULT_TYPE[status] ?? (status >= 500 ? 'server_error' : 'invalid_request_error');
    this.code = options.code ?? null;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
  }

  toBody(): ErrorBody {
    return errorBody(this.message, this.type, this.code, this.param);
  }
}

export function errorBody(message: string, type: string, code: string | null = null, param: string | null = null): ErrorBody {
  return { error: { message, type, param, code } };
}

/**
 * A client-chosen string quoted in a message or a log line, cut to `max` characters: an unknown
 * model id of half a megabyte was echoed whole in the 404 and in the request's log line.
 */
export function clip(value: string, max = 256): string {
  return value.length > max ? `${value.slice(0, max)}...` : value;
}

/** Common answers, so the same condition reads the same everywhere. */
export const errors = {
  badRequest: (message: string, param: string | null = null, code = 'invalid_value') =>
    new ApiError(400, message, { param, code }),
  unauthorized: (message = 'Incorrect API key provided. Send it as `Authorization: Bearer <API_KEY>`.') =>
    new ApiError(401, message, { code: 'invalid_api_key', headers: { 'www-authenticate': 'Bearer' } }),
  /** The spec's admin_only refusal: the message must contain "requires an admin API key". */
  adminOnlyModel: (model: string) =>
    new ApiError(401, `Model '${model}' requires an admin API key; an operator can allow client keys by setting its access_mode to 'api_key' in POST /v1/admin/settings.`, {
      code: 'invalid_api_key',
      param: 'model',
      headers: { 'www-authenticate': 'Bearer' },
    }),
  modelNotFound: (model: string) =>
    new ApiError(404, `The model '${clip(model)}' does not exist. Model ids are case-sensitive; use one returned by GET /v1/models.`, {
      param: 'model',
      code: 'model_not_found',
    }),
  notFound: (message: string, code = 'not_found') => new ApiError(404, message, { code }),
  conflict: (message: string, code = 'conflict') => new ApiError(409, message, { code }),
  rateLimited: (message: string, retryAfterSeconds: number, code = 'rate_limit_exceeded') =>
    new ApiError(429, message, { code, headers: { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) } }),
  unavailable: (message: string, retryAfterSeconds: number, code = 'no_capacity') =>
    new ApiError(503, message, { code, headers: { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) } }),
  upstream: (message: string, code = 'upstream_error') => new ApiError(502, message, { code }),
};

/** Sends an ApiError on a fastify reply (headers included). */
export function sendApiError(reply: FastifyReply, err: ApiError): FastifyReply {
  return reply.code(err.status).headers(err.headers).type('application/json; charset=utf-8').send(err.toBody());
}

/**
 * The spec's one exception: `POST /devshard//v1/finalize` (empty escrow id) answers 404 with an
 * empty body, so `curl --fail -o out.json` fails instead of writing an empty settlement file.
 */
export function sendEmptyNotFound(reply: FastifyReply): FastifyReply {
  return reply.code(404).removeHeader('content-type').send();
}

/** True when the path is a per-escrow admin path with an empty escrow id (`/devshard//...`). */
export function isEmptyEscrowPath(url: string): boolean {
  return url.startsWith('/devshard//');
}

/** Maps fastify's own body/parse errors to client errors; everything unknown is a 500. */
export function toApiError(err: FastifyError | Error): ApiError | undefined {
  if (err instanceof ApiError) return err;
  const e = err as FastifyError;
  if (e.validation) return formatValidationError(e.validation, e.validationContext);
  switch (e.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError(415, 'Unsupported Content-Type; send the body as JSON with `Content-Type: application/json`.', {
        code: 'unsupported_media_type',
      });
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError(413, 'Request body is too large.', { code: 'request_too_large' });
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError(400, 'We could not parse the JSON body of your request. Send valid JSON.', { code: 'invalid_json' });
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError(400, 'Content-Length does not match the body.', { code: 'invalid_content_length' });
    case 'FST_ERR_BAD_URL':
      return new ApiError(400, 'The request URL is malformed.', { code: 'bad_url' });
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new ApiError(414, 'A path segment of the request URL is too long.', { code: 'url_too_long' });
  }
  // Other fastify 4xx errors (e.g. bad headers): a client mistake, answered as such with fastify's
  // short message. (Body parse failures arrive as FST_ERR_CTP_INVALID_JSON_BODY above; a bare
  // SyntaxError thrown by a handler, e.g. BigInt('abc'), is a bug, not an unparsable body.)
  const status = e.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new ApiError(status, e.message, { code: typeof e.code === 'string' ? e.code.toLowerCase() : null });
  }
  return undefined;
}

/**
 * fastify's `clientErrorHandler`: what Node's HTTP parser refuses before any route runs (headers
 * over the size limit, a malformed request line or header, a request timeout). fastify's default
 * wrote `{"error":"Request Header Fields Too Large","message":...,"statusCode":431}`; same
 * statuses here, as OpenAI-style bodies. The connection is closed afterwards, as Node does.
 * Returns what it answered (for the log line and the metric), undefined when nobody is left to answer.
 */
export function handleClientError(err: Error & { code?: string }, socket: import('node:stream').Duplex): { status: number; code: string } | undefined {
  if (err.code === 'ECONNRESET' || socket.destroyed) return undefined;
  const [status, reason, message, code] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'Request Timeout', 'The request was not received in time.', 'request_timeout']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request Header Fields Too Large', 'The request headers (or the URL) are too large.', 'headers_too_large']
        : [400, 'Bad Request', 'The HTTP request is malformed.', 'bad_request'];
  const body = JSON.stringify(errorBody(message, 'invalid_request_error', code));
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${reason}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy(err);
  return { status, code };
}

/** Installs the error handler and the JSON not-found handler on an app. */
export function installErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const apiError = toApiError(err);
    if (apiError) {
      if (apiError.status >= 500) request.log.error({ err }, 'request failed');
      return sendApiError(reply, apiError);
    }
    // Unexpected: the details go to the log only, the client gets a generic message.
    request.log.error({ err }, 'unexpected error');
    return sendApiError(reply, new ApiError(500, 'The server had an error while processing your request. Retry later.', { type: 'server_error', code: 'internal_error' }));
  });

  app.setNotFoundHandler((request: FastifyRequest, reply: FastifyReply) => {
    if (isEmptyEscrowPath(request.url)) return sendEmptyNotFound(reply);
    const path = request.url.split('?')[0] ?? '';
    return sendApiError(reply, new ApiError(404, `Unknown route: ${request.method} ${path.slice(0, 200)}`, { code: 'unknown_route' }));
  });
}
