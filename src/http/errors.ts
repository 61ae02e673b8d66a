/**
 * One place for error answers. Every error the gateway sends (except the spec's bodiless 404 for
 * `/devshard//v1/finalize`) is an OpenAI-style body `{"error":{"message","type","param","code"}}`,
 * so OpenAI SDKs surface our messages unchanged (docs/architecture.md, principle "errors are
 * answers"). A use case's GatewayError is mapped here too (gateway-answers.ts).
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { clip, GatewayError } from '../gateway/errors.js';
import { ApiError, errorBody } from './api-error.js';
import { answerFor } from './gateway-answers.js';
import { formatValidationError } from './validation-errors.js';

/** Sends an error answer on a fastify reply (headers included); a GatewayError is mapped first. */
export function sendApiError(reply: FastifyReply, error: ApiError | GatewayError): FastifyReply {
  const err = error instanceof GatewayError ? answerFor(error) : error;
  // The request's one log line says what was refused (a handler may have named the code already).
  // Null only for a refusal before the onRequest hook ran (a malformed URL): that one logs its own line.
  const fields = reply.request.logFields as typeof reply.request.logFields | null;
  if (fields) {
    if (err.code !== null) fields.error_code ??= err.code;
    if (err.param !== null) fields.error_param ??= err.param;
  }
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

/** `1048576` -> `1 MiB (1048576 bytes)`: a body limit as an operator or a client reads it. */
export function formatByteLimit(bytes: number): string {
  const unit = bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : bytes >= 1024 && bytes % 1024 === 0 ? `${bytes / 1024} KiB` : undefined;
  return unit ? `${unit} (${bytes} bytes)` : `${bytes} bytes`;
}

/** The schema a validation context names on the request's route (to describe an anyOf's forms). */
function routeSchema(request: FastifyRequest | undefined, context: string | undefined): unknown {
  const schema = request?.routeOptions.schema as Record<string, unknown> | undefined;
  return context && schema ? schema[context] : undefined;
}

/**
 * Maps fastify's own body/parse errors to client errors; everything unknown is a 500. With the
 * request, answers name its route's body limit (413) and the forms an anyOf field accepts.
 */
export function toApiError(err: FastifyError | Error, request?: FastifyRequest): ApiError | undefined {
  if (err instanceof ApiError) return err;
  if (err instanceof GatewayError) return answerFor(err);
  const e = err as FastifyError;
  if (e.validation) return formatValidationError(e.validation, e.validationContext, routeSchema(request, e.validationContext));
  switch (e.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError(415, 'Unsupported Content-Type; send the body as JSON with `Content-Type: application/json`.', {
        code: 'unsupported_media_type',
      });
    case 'FST_ERR_CTP_BODY_TOO_LARGE': {
      const limit = request?.routeOptions.bodyLimit;
      const what = typeof limit === 'number' ? `: ${request?.routeOptions.url ?? 'this route'} accepts at most ${formatByteLimit(limit)}` : '';
      return new ApiError(413, `Request body is too large${what}.`, { code: 'request_too_large' });
    }
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
    const apiError = toApiError(err, request);
    if (apiError) {
      // An answer we meant to give (a 503 with no routable escrow, a host's 502): logged once, by the
      // request's line (its level follows the status), with the message instead of a stack trace.
      if (apiError.status >= 500 && request.logFields) request.logFields.error_message = clip(apiError.message, 512);
      return sendApiError(reply, apiError);
    }
    // Unexpected: the details go to the log only, the client gets a generic message.
    request.log.error({ err }, 'unexpected error');
    return sendApiError(reply, new ApiError(500, 'The server had an error while processing your request. Retry later.', { type: 'server_error', code: 'internal_error' }));
  });

  app.setNotFoundHandler((request: FastifyRequest, reply: FastifyReply) => {
    if (isEmptyEscrowPath(request.url)) return sendEmptyNotFound(reply);
    const path = request.url.split('?')[0] ?? '';
    // A route that exists under other methods (GET /v1/chat/completions): 405 with Allow, as HTTP says.
    const allowed = allowedMethods(app, path);
    if (allowed.length > 0) {
      return sendApiError(
        reply,
        new ApiError(405, `Method ${request.method} is not allowed on ${path.slice(0, 200)}; it accepts ${allowed.join(', ')}.`, {
          code: 'method_not_allowed',
          headers: { allow: allowed.join(', ') },
        }),
      );
    }
    return sendApiError(reply, new ApiError(404, `Unknown route: ${request.method} ${path.slice(0, 200)}`, { code: 'unknown_route' }));
  });
}

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/** The methods some route of `app` serves at this concrete path (none: the path is unknown). */
export function allowedMethods(app: FastifyInstance, path: string): string[] {
  return METHODS.filter((method) => app.findRoute({ method, url: path }) !== null);
}
