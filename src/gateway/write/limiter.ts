/**
 * Admission control for chat: at most GATEWAY_MAX_CONCURRENT_REQUESTS requests and (when
 * GATEWAY_MAX_INPUT_TOKENS_IN_FLIGHT > 0) at most that many estimated prompt tokens in flight.
 * Over a limit the request is refused at once with 429 + Retry-After (no queue: queued requests
 * would hold sockets and client timeouts would make them wasted work).
 *
 * A single request larger than the token limit is admitted when nothing else is in flight,
 * otherwise it could never run.
 */
import { refuse, type GatewayError } from '../errors.js';

export interface LimiterOptions {
  maxConcurrentRequests: number;
  /** 0 = no limit on input tokens in flight. */
  maxInputTokensInFlight: number;
  /** Retry-After seconds sent with a 429 (default 1). */
  retryAfterSeconds?: number;
}

export interface LimiterCounts {
  active_requests: number;
  input_tokens_in_flight: number;
  max_concurrent_requests: number;
  max_input_tokens_in_flight: number;
  rejected_total: number;
}

/** Call once when the request is done (success, error or client disconnect); extra calls are no-ops. */
export type Release = () => void;

export type Admission = { ok: true; release: Release } | { ok: false; error: GatewayError };

export class Limiter {
  private active = 0;
  private tokens = 0;
  private rejected = 0;
  private options: Required<LimiterOptions>;

  constructor(options: LimiterOptions) {
    this.options = { retryAfterSeconds: 1, ...options };
  }

  /** Applies new limits (settings change); requests already admitted keep running. */
  reconfigure(options: Partial<LimiterOptions>): void {
    this.options = { ...this.options, ...options };
  }

  tryAcquire(inputTokens: number): Admission {
    const { maxConcurrentRequests, maxInputTokensInFlight, retryAfterSeconds } = this.options;
    if (this.active >= maxConcurrentRequests) {
      this.rejected++;
      return { ok: false, error: refuse.rateLimited(`Too many concurrent requests (limit ${maxConcurrentRequests}); retry shortly.`, retryAfterSeconds, 'concurrency_limit_exceeded') };
    }
    const tokens = Math.max(0, Math.ceil(inputTokens));
    if (maxInputTokensInFlight > 0 && this.tokens > 0 && this.tokens + tokens > maxInputTokensInFlight) {
      this.rejected++;
      return { ok: false, error: refuse.rateLimited(`Too many input tokens in flight (limit ${maxInputTokensInFlight}); retry shortly.`, retryAfterSeconds, 'input_tokens_limit_exceeded') };
    }
    this.active++;
    this.tokens += tokens;
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        this.active--;
        this.tokens -= tokens;
      },
    };
  }

  /** Like tryAcquire but throws the refusal (a 429 over HTTP) (convenient in async handlers). */
  acquire(inputTokens: number): Release {
    const a = this.tryAcquire(inputTokens);
    if (!a.ok) throw a.error;
    return a.release;
  }

  counts(): LimiterCounts {
    return {
      active_requests: this.active,
      input_tokens_in_flight: this.tokens,
      max_concurrent_requests: this.options.maxConcurrentRequests,
      max_input_tokens_in_flight: this.options.maxInputTokensInFlight,
      rejected_total: this.rejected,
    };
  }
}
