/**
 * The shared undici Agent: keep-alive pools per origin, reused by every call so the hot path opens
 * no connection and allocates no client. undici's own header/body timeouts are off because the
 * callers run their own (stall timer refreshed per SSE event, whole-answer timeout for non-stream).
 */
import { Agent } from 'undici';

export interface AgentOptions {
  /** Max connections per origin (undefined = unlimited, undici's default). */
  connections?: number;
  /** How long an idle keep-alive socket stays open, ms. */
  keepAliveTimeoutMs?: number;
}

export function createHttpAgent(opts: AgentOptions = {}): Agent {
  return new Agent({
    keepAliveTimeout: opts.keepAliveTimeoutMs ?? 30_000,
    keepAliveMaxTimeout: Math.max(opts.keepAliveTimeoutMs ?? 30_000, 600_000),
    ...(opts.connections !== undefined ? { connections: opts.connections } : {}),
    headersTimeout: 0,
    bodyTimeout: 0,
  });
}

/** Splits a base URL into undici's origin + path prefix (without trailing slash), once per URL. */
export function splitBaseUrl(base: string): { origin: string; prefix: string } {
  const u = new URL(base);
  return { origin: u.origin, prefix: u.pathname.replace(/\/+$/, '') };
}
