/**
 * v5: the transport's error-miss claims (error-miss.ts): one made when a streamed answer that ended
 * in an error was read to its end, the other hosts asked `verify-error-miss` in rounds
 * (ProtocolTransport.sweepErrorMisses), one round at a time.
 */
import type { DevshardSession } from '../session.js';
import { claimOf, ErrorMissClaims, type AnswerLines } from '../error-miss.js';
import type { TransportContext } from './context.js';
import { postSessionRoute } from './host-requests.js';

export class ErrorMissSweep {
  private readonly claims: ErrorMissClaims;
  private missing: Promise<number> | undefined;
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(private readonly ctx: TransportContext) {
    const { opts, now } = ctx;
    this.claims = new ErrorMissClaims({
      post: (s, url, route, bytes) => postSessionRoute(ctx, s, url, route, bytes),
      now,
      waitMs: opts.errorMissWaitMs ?? 120_000,
      ...(opts.onErrorMiss ? { report: opts.onErrorMiss } : {}),
    });
    const missMs = opts.errorMissSweepMs ?? 5_000;
    this.timer = missMs > 0 ? setInterval(() => void this.sweep().catch(() => undefined), missMs) : undefined;
    this.timer?.unref();
  }

  /** One vote round over the open claims (a round already under way is the answer). */
  readonly sweep = (): Promise<number> => (this.missing ??= this.claims.sweep((id) => this.ctx.sessions.get(id)).finally(() => (this.missing = undefined)));

  /** The escrow's inferences with a claim still open. */
  open(escrowId: string): bigint[] {
    return this.claims.open(escrowId);
  }

  /**
   * A v5 stream that ended in an error, read to its end: its Finish (held since the error) and the
   * answer's lines make a claim, asked at once off the request path; or none, and the Finish goes.
   */
  answerEnded(s: DevshardSession, hostUrl: string, nonce: bigint, answer: AnswerLines): void {
    const made = claimOf(answer, s.pendingFinish(nonce), { inferenceId: nonce, executorUrl: hostUrl, now: this.ctx.now() });
    if ('reason' in made) {
      this.claims.dropped(s.escrow.escrowId, s, nonce, made.reason);
      return;
    }
    this.claims.add(s.escrow.escrowId, made.claim);
    void this.sweep().catch(() => undefined);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }
}
