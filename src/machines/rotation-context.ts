/**
 * The rotation statechart's context and the pure helpers its assigns use (rotation.ts): the
 * cycle's record, suppressed creates, and the settle retries that outlive a phase.
 */
import type { CatalogEventOf, ChainErrorInfo, EscrowRole, ReplacementReason, RotationEventData } from '../events/catalog.js';

export type RotationEventType = keyof RotationEventData;
export type RotationEvent = CatalogEventOf<RotationEventType>;

export interface RotationContext {
  model: string | null;
  epoch: number | null;
  height: number | null;
  phase: 0 | 1 | 2;
  target: number;
  existing: number;
  created: number;
  promoted: number;
  settleDecided: number;
  settleFailed: number;
  /** `${role}@${epoch}` pairs whose create failed on chain. */
  suppressed: string[];
  lastError: ChainErrorInfo | null;
  replacements: number;
  /** Epoch in which the current (or last) cycle's phase 1 started: one cycle per epoch. */
  cycleEpoch: number | null;
  /** What the current cycle decided, so a restarted task resumes it from the log. */
  cycle: RotationCycle;
  /** Depletion replacements decided: old escrow id → replacement intent (the last 100). */
  replacing: Record<string, { intentId: string; failedEpoch?: number }>;
  /**
   * Escrows whose last settle attempt failed transiently: escrow id → that attempt and the height
   * from which the next one may run. Absent until the first such failure, so the state folded from
   * a log without one (and checkpoints written before retries existed) is unchanged.
   */
  settleRetries?: Record<string, SettleRetry>;
  /**
   * The same for old escrows of depletion replacements whose settle failed transiently (retried by
   * the depletion check, not the rotation task); absent until the first such failure.
   */
  depletionSettleRetries?: Record<string, DepletionSettleRetry>;
  /**
   * A create the cycle waits on because of a configuration error (RotationFailed with
   * `configuration`): the create is not failed, the plan tries it again once the key is usable.
   * Absent unless one was recorded; cleared by the cycle's next decision.
   */
  blocked?: RotationBlocked;
}

/** What a configuration error holds up: the create step, its role and intent, and the variable. */
export interface RotationBlocked {
  step: string;
  role: EscrowRole | null;
  intentId: string | null;
  variable: string;
  error: ChainErrorInfo;
  height: number;
}

/** A settle to try again: the attempt that failed (1 = the first) and when the next may run. */
export interface SettleRetry {
  attempt: number;
  retryAtHeight: number;
}

/** A depletion replacement's old escrow to settle again, and why it was replaced (for the record). */
export interface DepletionSettleRetry extends SettleRetry {
  reason: ReplacementReason;
}

/** Ids decided in the current cycle (reset when phase 1 starts). */
export interface RotationCycle {
  /** Create intents decided per role (temporary in phase 1, regular in phase 2). */
  temporary: string[];
  regular: string[];
  /** Regular escrows promoted to the temporary role (settled in phase 2). */
  promoted: string[];
  /** Escrows whose finalize + settle was decided. */
  settle: string[];
  /** Create intents whose failure is recorded (RotationFailed with intentId). */
  failedIntents: string[];
  /** Escrows whose settle failure is recorded. */
  settleFailed: string[];
  /** Roles for which a RotationCreateSuppressed is recorded in this cycle. */
  suppressedNoted: EscrowRole[];
}

export const emptyCycle = (): RotationCycle => ({ temporary: [], regular: [], promoted: [], settle: [], failedIntents: [], settleFailed: [], suppressedNoted: [] });

/** The cycle of a context (defaults for snapshots checkpointed before these fields existed). */
export const cycleOf = (context: RotationContext): RotationCycle => ({ ...emptyCycle(), ...(context.cycle ?? {}) });

export const REPLACING_LIMIT = 100;
/** Pending retries kept per model (far above any real number of escrows settling at once). */
export const SETTLE_RETRY_LIMIT = 100;

/** The pending settle retries of a context (none in contexts that predate them). */
export const settleRetriesOf = (context: RotationContext): Record<string, SettleRetry> => context.settleRetries ?? {};

/** The pending settle retries of depletion replacements' old escrows (none in contexts that predate them). */
export const depletionSettleRetriesOf = (context: RotationContext): Record<string, DepletionSettleRetry> => context.depletionSettleRetries ?? {};

/**
 * Pending retries after a settle failure of `escrowId`: `next` (a transient failure) (re)schedules
 * it, undefined (any other failure) ends its retries. Undefined when nothing changes.
 */
export function rescheduled<T>(retries: Record<string, T>, escrowId: string, next: T | undefined): Record<string, T> | undefined {
  if (next !== undefined) {
    const others = Object.entries(retries).filter(([id]) => id !== escrowId);
    const kept = others.slice(Math.max(0, others.length - (SETTLE_RETRY_LIMIT - 1)));
    return Object.fromEntries([...kept, [escrowId, next]]);
  }
  if (!Object.hasOwn(retries, escrowId)) return undefined;
  const { [escrowId]: _ended, ...rest } = retries;
  return rest;
}

/** The retry a settle failure schedules: only a transient one (with `retryAtHeight`) has one. */
export const retryOf = (d: { attempt?: number; retryAtHeight?: number }): SettleRetry | undefined =>
  d.retryAtHeight === undefined ? undefined : { attempt: d.attempt ?? 1, retryAtHeight: d.retryAtHeight };

/** `settleRetries` after a rotation settle failure; no change (an empty object) when there is none. */
export function settleRetriesAfter(context: RotationContext, d: RotationEventData['RotationFailed']): Pick<RotationContext, 'settleRetries'> | Record<string, never> {
  if (d.step !== 'settle' || !d.escrowId) return {};
  const next = rescheduled(settleRetriesOf(context), d.escrowId, retryOf(d));
  return next ? { settleRetries: next } : {};
}

/** `depletionSettleRetries` after the settle of a replaced escrow failed; no change (an empty object) when there is none. */
export function depletionSettleRetriesAfter(context: RotationContext, d: RotationEventData['DepletionReplacementFailed']): Pick<RotationContext, 'depletionSettleRetries'> | Record<string, never> {
  const retry = retryOf(d);
  const next = rescheduled(depletionSettleRetriesOf(context), d.escrowId, retry && { ...retry, reason: d.reason });
  return next ? { depletionSettleRetries: next } : {};
}

/** Suppression key of a model's (role, epoch); the model is implicit (one machine per model). */
export const suppressionKey = (role: EscrowRole, epoch: number): string => `${role}@${epoch}`;

/** Keep suppressions of this and the previous epoch only: older ones can never match again. */
export const withSuppression = (suppressed: string[], role: EscrowRole, epoch: number): string[] => {
  const key = suppressionKey(role, epoch);
  const recent = suppressed.filter((k) => Number(k.split('@')[1]) >= epoch - 1);
  return recent.includes(key) ? recent : [...recent, key];
};

export const isCreateStep = (step: string) => step === 'create_temporary' || step === 'create_target';

/** The cycle moved on: a configuration error it waited on is over (no key while absent). */
export const unblocked = (context: RotationContext): { blocked?: undefined } => (context.blocked ? { blocked: undefined } : {});
