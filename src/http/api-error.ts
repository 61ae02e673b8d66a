/**
 * The HTTP answer to an error: a status, headers and an OpenAI-style body
 * `{"error":{"message","type","param","code"}}`, so OpenAI SDKs surface our messages unchanged.
 * Use cases never build one: they raise GatewayError, mapped in src/http/gateway-answers.ts.
 */
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

/** The HTTP layer's own refusals (before any use case runs), so each reads the same everywhere. */
export const errors = {
  badRequest: (message: string, param: string | null = null, code = 'invalid_value') =>
    new ApiError(400, message, { param, code }),
  unauthorized: (message = 'Incorrect API key provided. Send it as `Authorization: Bearer <API_KEY>`.') =>
    new ApiError(401, message, { code: 'invalid_api_key', headers: { 'www-authenticate': 'Bearer' } }),
};
