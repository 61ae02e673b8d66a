/**
 * Our inferences a session (session.ts) may have to time out (gonka host/timeout.go): their
 * payloads (a refusal timeout vote needs it) until they finished or timed out, and which already
 * have a MsgTimeoutInference queued.
 */
import type { Replica } from '../../protocol/index.js';
import { InferenceStatus } from '../../protocol/inference-record.js';
import type { InferencePayload } from './request-body.js';

export interface TimeoutCandidate {
  nonce: bigint;
  reason: 'refused' | 'execution';
  executorUrl: string;
  payload: InferencePayload;
}

export class OpenInferences {
  /** Payloads of our inferences not yet finished or timed out (a refusal timeout vote needs it). */
  private readonly open = new Map<bigint, InferencePayload>();
  /** Inference → our latest nonce when its MsgTimeoutInference was queued (not asked again until a diff was composed). */
  private readonly timingOut = new Map<bigint, bigint>();

  add(nonce: bigint, payload: InferencePayload): void {
    this.open.set(nonce, payload);
  }

  /** A MsgTimeoutInference for `nonce` was queued when our latest nonce was `latestNonce`. */
  queued(nonce: bigint, latestNonce: bigint): void {
    this.timingOut.set(nonce, latestNonce);
  }

  /**
   * Those past their deadline: still pending `refusal_timeout` seconds after started_at (the
   * executor never confirmed), or started and not finished `execution_timeout` seconds after
   * confirmed_at. Finished ones are forgotten here.
   */
  candidates(replica: Replica, nowSeconds: bigint, executorUrl: (nonce: bigint) => string): TimeoutCandidate[] {
    const out: TimeoutCandidate[] = [];
    const cfg = replica.config;
    for (const [nonce, payload] of this.open) {
      const rec = replica.inference(nonce);
      if (!rec || (rec.status !== InferenceStatus.Pending && rec.status !== InferenceStatus.Started)) {
        this.open.delete(nonce);
        this.timingOut.delete(nonce);
        continue;
      }
      const queuedAt = this.timingOut.get(nonce);
      if (queuedAt !== undefined && queuedAt >= replica.latestNonce) continue;
      if (rec.status === InferenceStatus.Pending && nowSeconds >= rec.startedAt + cfg.refusalTimeout) out.push({ nonce, reason: 'refused', executorUrl: executorUrl(nonce), payload });
      else if (rec.status === InferenceStatus.Started && nowSeconds >= rec.confirmedAt + cfg.executionTimeout) out.push({ nonce, reason: 'execution', executorUrl: executorUrl(nonce), payload });
    }
    return out;
  }
}
