/**
 * What `explain rotation` answers (rotation-explain.ts) and the short texts both its fold and its
 * formatting (rotation-explain-format.ts) use.
 */
import type { ChainErrorInfo, ChainInputs, EscrowRole } from '../events/catalog.js';

export interface ExplainStep {
  position: number;
  time: string;
  event: string;
  text: string;
}

export interface ExplainFailure {
  step: string;
  role: EscrowRole | null;
  error: ChainErrorInfo;
  suppressed: boolean;
  intentId?: string;
  escrowId?: string;
  /** Settle failures: the attempt that failed, and when a transient one is tried again. */
  attempt?: number;
  retryAtHeight?: number;
  /** Not retried because the escrow's settle window had closed (recorded by the gateway, or the chain's wrong_epoch). */
  windowClosed?: boolean;
  /** An attempt of the drain reactor at a settle deferred while requests were in flight. */
  drained?: boolean;
  /** A configuration error (the key's env variable), not the chain's answer: nothing was sent. */
  configuration?: { variable: string };
  position: number;
}

export interface ExplainCycle {
  model: string;
  /** Epoch of phase 1 (the epoch before the boundary this cycle bridges). */
  epoch: number;
  phase2Epoch: number | null;
  startHeight: number;
  boundaryHeight: number;
  status: 'completed' | 'in_progress';
  /** Phase reached: 1, waiting for PoC to end ('waiting_poc'), or 2. */
  stage: 'phase1' | 'waiting_poc' | 'phase2' | 'done';
  steps: ExplainStep[];
  failures: ExplainFailure[];
  suppressed: { role: EscrowRole; epoch: number; reason: string }[];
  created: { role: EscrowRole; intentId: string; escrowId: string | null; failed: boolean }[];
  promoted: string[];
  settles: {
    escrowId: string;
    role: EscrowRole;
    state: 'decided' | 'deferred' | 'settling' | 'retrying' | 'settled' | 'failed';
    inFlight: number;
    reason?: string;
    /** While retrying: the next attempt's number and the height it waits for. */
    retry?: { attempt: number; atHeight: number };
  }[];
}

export interface ExplainReplacement {
  model: string;
  escrowId: string;
  reason: string;
  epoch: number;
  height: number;
  intentId: string;
  replacementId: string | null;
  failure: ChainErrorInfo | null;
  suppressed: boolean;
  position: number;
  time: string;
  /** The old escrow's settle, once an attempt at it failed: each failure and where it stands. */
  settle?: ReplacedSettle;
}

export interface ReplacedSettle {
  state: 'retrying' | 'settling' | 'settled' | 'failed';
  failures: ExplainFailure[];
  /** While retrying: the next attempt's number and the height it waits for. */
  retry?: { attempt: number; atHeight: number };
  /** Once settled: the height of the settle tx. */
  settledAt?: number;
}

export interface RotationExplanation {
  cycles: ExplainCycle[];
  replacements: ExplainReplacement[];
}

export interface ExplainFilter {
  model?: string;
  epoch?: number;
}

export const short = (id: string) => (id.length > 12 ? `${id.slice(0, 8)}…` : id);
export const reasonOf = (e: ChainErrorInfo) => `${e.kind}: ${e.message}`;
export const at = (c: ChainInputs) => `height ${c.height}, epoch ${c.epoch}`;
export const WINDOW_CLOSED = 'its settle window has closed, so the unused deposit can no longer be settled on chain; not retried';
export const settleName = (f: Pick<ExplainFailure, 'drained'>) => (f.drained ? 'deferred settle' : 'settle');
export const stepName = (f: ExplainFailure) => (f.step === 'settle' ? `${settleName(f)} of escrow ${f.escrowId ?? '?'}${f.attempt !== undefined ? ` attempt ${f.attempt}` : ''}` : f.step);

