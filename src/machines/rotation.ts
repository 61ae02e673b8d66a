/**
 * The rotation cycle of one model (spec "Rotation cycle"), fed the `rotation-<model>` stream:
 *
 *   idle → phase 1 (create temporaries → [fallback: promote regulars] → settle regulars)
 *        → waitingPoc → phase 2 (create targets → settle temporaries) → idle
 *
 * After an on-chain create failure the pair (role, epoch) joins `suppressed`: a later create
 * decision for the same model, role and epoch is refused by the `createAllowed` guard, and the
 * rotation task records RotationCreateSuppressed instead.
 *
 * A settle that failed transiently (RotationFailed with `retryAtHeight`) joins `settleRetries`
 * instead of the cycle's `settleFailed`: the plan tries it again from that height while the
 * escrow's settle window is open. Such retries outlive the phase that decided the settle, so their
 * failures are accepted in any state; a failure without `retryAtHeight` (a chain refusal, a closed
 * window, or any settle failure recorded before retries existed) keeps the escrow out for the cycle.
 * A transient failure the reconciler found after the phase (the settle's outcome was unknown) is
 * accepted in any state too: it schedules the retry as if it had been answered at once.
 * The settle of an escrow a depletion replacement replaced is retried the same way, by the
 * depletion check, from `depletionSettleRetries` (DepletionReplacementFailed with step 'settle').
 */
import { assertEvent, assign, setup } from 'xstate';
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

const emptyCycle = (): RotationCycle => ({ temporary: [], regular: [], promoted: [], settle: [], failedIntents: [], settleFailed: [], suppressedNoted: [] });

/** The cycle of a context (defaults for snapshots checkpointed before these fields existed). */
export const cycleOf = (context: RotationContext): RotationCycle => ({ ...emptyCycle(), ...(context.cycle ?? {}) });

const REPLACING_LIMIT = 100;
/** Pending retries kept per model (far above any real number of escrows settling at once). */
const SETTLE_RETRY_LIMIT = 100;

/** The pending settle retries of a context (none in contexts that predate them). */
export const settleRetriesOf = (context: RotationContext): Record<string, SettleRetry> => context.settleRetries ?? {};

/** The pending settle retries of depletion replacements' old escrows (none in contexts that predate them). */
export const depletionSettleRetriesOf = (context: RotationContext): Record<string, DepletionSettleRetry> => context.depletionSettleRetries ?? {};

/**
 * Pending retries after a settle failure of `escrowId`: `next` (a transient failure) (re)schedules
 * it, undefined (any other failure) ends its retries. Undefined when nothing changes.
 */
function rescheduled<T>(retries: Record<string, T>, escrowId: string, next: T | undefined): Record<string, T> | undefined {
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
const retryOf = (d: { attempt?: number; retryAtHeight?: number }): SettleRetry | undefined =>
  d.retryAtHeight === undefined ? undefined : { attempt: d.attempt ?? 1, retryAtHeight: d.retryAtHeight };

/** `settleRetries` after a rotation settle failure; no change (an empty object) when there is none. */
function settleRetriesAfter(context: RotationContext, d: RotationEventData['RotationFailed']): Pick<RotationContext, 'settleRetries'> | Record<string, never> {
  if (d.step !== 'settle' || !d.escrowId) return {};
  const next = rescheduled(settleRetriesOf(context), d.escrowId, retryOf(d));
  return next ? { settleRetries: next } : {};
}

/** `depletionSettleRetries` after the settle of a replaced escrow failed; no change (an empty object) when there is none. */
function depletionSettleRetriesAfter(context: RotationContext, d: RotationEventData['DepletionReplacementFailed']): Pick<RotationContext, 'depletionSettleRetries'> | Record<string, never> {
  const retry = retryOf(d);
  const next = rescheduled(depletionSettleRetriesOf(context), d.escrowId, retry && { ...retry, reason: d.reason });
  return next ? { depletionSettleRetries: next } : {};
}

/** Suppression key of a model's (role, epoch); the model is implicit (one machine per model). */
export const suppressionKey = (role: EscrowRole, epoch: number): string => `${role}@${epoch}`;

/** Keep suppressions of this and the previous epoch only: older ones can never match again. */
const withSuppression = (suppressed: string[], role: EscrowRole, epoch: number): string[] => {
  const key = suppressionKey(role, epoch);
  const recent = suppressed.filter((k) => Number(k.split('@')[1]) >= epoch - 1);
  return recent.includes(key) ? recent : [...recent, key];
};

const isCreateStep = (step: string) => step === 'create_temporary' || step === 'create_target';

/** The cycle moved on: a configuration error it waited on is over (no key while absent). */
const unblocked = (context: RotationContext): { blocked?: undefined } => (context.blocked ? { blocked: undefined } : {});

/**
 * Depletion replacements, chain-read failures and failures of settle retries can happen in any
 * state; they do not move it.
 */
const anytime = {
  DepletionReplacementDecided: { actions: 'replacementDecided' },
  DepletionReplacementFailed: { actions: 'replacementFailed' },
  RotationFailed: [
    { guard: 'configurationFailed', actions: 'configurationFailed' },
    { guard: 'readChainFailed', actions: 'failed' },
    { guard: 'settleRetryFailed', actions: 'failed' },
    { guard: 'settleRetryScheduled', actions: 'failed' },
  ],
} as const;

/** The rotation statechart (one per model). */
export const rotationMachine = setup({
  types: {
    context: {} as RotationContext,
    events: {} as RotationEvent,
    input: {} as { model?: string } | undefined,
  },
  guards: {
    isPhase1: ({ event }) => (event.type === 'RotationPhaseStarted' || event.type === 'RotationPhaseCompleted') && event.data.phase === 1,
    isPhase2: ({ event }) => (event.type === 'RotationPhaseStarted' || event.type === 'RotationPhaseCompleted') && event.data.phase === 2,
    /** A temporary create that is not suppressed for this epoch. */
    temporaryCreateAllowed: ({ context, event }) =>
      event.type === 'RotationCreateDecided' && event.data.role === 'temporary' && !context.suppressed.includes(suppressionKey('temporary', event.data.chain.epoch)),
    /** A regular (target) create that is not suppressed for this epoch. */
    regularCreateAllowed: ({ context, event }) =>
      event.type === 'RotationCreateDecided' && event.data.role === 'regular' && !context.suppressed.includes(suppressionKey('regular', event.data.chain.epoch)),
    settlesRegulars: ({ event }) => event.type === 'RotationSettleDecided' && event.data.role === 'regular',
    settlesTemporaries: ({ event }) => event.type === 'RotationSettleDecided' && event.data.role === 'temporary',
    createFailed: ({ event }) => event.type === 'RotationFailed' && isCreateStep(event.data.step) && !event.data.configuration,
    /** Nothing was sent: the key's env variable is unset or unusable; the cycle waits for it. */
    configurationFailed: ({ event }) => event.type === 'RotationFailed' && !!event.data.configuration,
    settleFailed: ({ event }) => event.type === 'RotationFailed' && event.data.step === 'settle',
    readChainFailed: ({ event }) => event.type === 'RotationFailed' && (event.data.step === 'read_chain' || event.data.step === 'promote'),
    /** Another failure of a settle awaiting its retry (or the retry given up). */
    settleRetryFailed: ({ context, event }) =>
      event.type === 'RotationFailed' && event.data.step === 'settle' && !!event.data.escrowId && Object.hasOwn(settleRetriesOf(context), event.data.escrowId),
    /**
     * A transient failure of a settle the reconciler found once the phase that decided it was over
     * (its tx's outcome was unknown): it schedules a retry as one answered at once would.
     */
    settleRetryScheduled: ({ event }) => event.type === 'RotationFailed' && event.data.step === 'settle' && !!event.data.escrowId && event.data.retryAtHeight !== undefined,
  },
  actions: {
    startPhase: assign(({ context, event }) => {
      assertEvent(event, 'RotationPhaseStarted');
      const d = event.data;
      // Phase 2 belongs to the cycle phase 1 started (it is entered from waitingPoc only).
      const fresh = d.phase === 1;
      return {
        model: d.model,
        phase: d.phase,
        epoch: d.chain.epoch,
        height: d.chain.height,
        target: d.target,
        existing: d.existing,
        ...(fresh ? { created: 0, promoted: 0, settleDecided: 0, settleFailed: 0, lastError: null, cycleEpoch: d.chain.epoch, cycle: emptyCycle() } : {}),
        ...unblocked(context),
      };
    }),
    completePhase: assign(({ context, event }) => {
      assertEvent(event, 'RotationPhaseCompleted');
      return { height: event.data.chain.height, phase: event.data.phase === 2 ? (0 as const) : (1 as const), ...unblocked(context) };
    }),
    createDecided: assign(({ context, event }) => {
      assertEvent(event, 'RotationCreateDecided');
      const d = event.data;
      const cycle = cycleOf(context);
      return {
        created: context.created + d.intentIds.length,
        target: d.target,
        existing: d.existing,
        height: d.chain.height,
        cycle: { ...cycle, [d.role]: [...cycle[d.role], ...d.intentIds] },
        ...unblocked(context),
      };
    }),
    createSuppressed: assign(({ context, event }) => {
      assertEvent(event, 'RotationCreateSuppressed');
      const cycle = cycleOf(context);
      return { height: event.data.chain.height, cycle: { ...cycle, suppressedNoted: [...cycle.suppressedNoted, event.data.role] } };
    }),
    promoted: assign(({ context, event }) => {
      assertEvent(event, 'RotationPromoted');
      const cycle = cycleOf(context);
      return {
        promoted: context.promoted + event.data.escrowIds.length,
        height: event.data.chain.height,
        cycle: { ...cycle, promoted: [...cycle.promoted, ...event.data.escrowIds] },
        ...unblocked(context),
      };
    }),
    settleDecided: assign(({ context, event }) => {
      assertEvent(event, 'RotationSettleDecided');
      const cycle = cycleOf(context);
      return {
        settleDecided: context.settleDecided + event.data.escrowIds.length,
        height: event.data.chain.height,
        cycle: { ...cycle, settle: [...cycle.settle, ...event.data.escrowIds] },
        ...unblocked(context),
      };
    }),
    failed: assign(({ context, event }) => {
      assertEvent(event, 'RotationFailed');
      const d = event.data;
      const cycle = cycleOf(context);
      // A transient settle failure is retried (settleRetries), not kept out of the cycle.
      const settleOver = d.step === 'settle' && d.escrowId && d.retryAtHeight === undefined;
      return {
        lastError: d.error,
        height: d.chain.height,
        cycle: {
          ...cycle,
          failedIntents: d.intentId ? [...cycle.failedIntents, d.intentId] : cycle.failedIntents,
          settleFailed: settleOver ? [...cycle.settleFailed, d.escrowId!] : cycle.settleFailed,
        },
        ...settleRetriesAfter(context, d),
        settleFailed: context.settleFailed + (d.step === 'settle' ? 1 : 0),
        suppressed: d.suppress && d.role ? withSuppression(context.suppressed, d.role, d.chain.epoch) : context.suppressed,
      };
    }),
    configurationFailed: assign(({ event }) => {
      assertEvent(event, 'RotationFailed');
      const d = event.data;
      return {
        lastError: d.error,
        height: d.chain.height,
        blocked: { step: d.step, role: d.role ?? null, intentId: d.intentId ?? null, variable: d.configuration!.variable, error: d.error, height: d.chain.height },
      };
    }),
    replacementDecided: assign(({ context, event }) => {
      assertEvent(event, 'DepletionReplacementDecided');
      const entries = Object.entries(context.replacing ?? {}).filter(([id]) => id !== event.data.escrowId);
      entries.push([event.data.escrowId, { intentId: event.data.intentId }]);
      return { model: event.data.model, replacements: context.replacements + 1, replacing: Object.fromEntries(entries.slice(-REPLACING_LIMIT)) };
    }),
    replacementFailed: assign(({ context, event }) => {
      assertEvent(event, 'DepletionReplacementFailed');
      const d = event.data;
      // The replacement exists: only the old escrow's settle is (re)scheduled or ended.
      if (d.step === 'settle') return { model: d.model, lastError: d.error, ...depletionSettleRetriesAfter(context, d) };
      const replacing = { ...(context.replacing ?? {}) };
      const entry = replacing[d.escrowId];
      if (entry && d.suppress) replacing[d.escrowId] = { ...entry, failedEpoch: d.chain.epoch };
      else delete replacing[d.escrowId];
      return {
        model: d.model,
        replacing,
        lastError: d.error,
        suppressed: d.suppress ? withSuppression(context.suppressed, 'regular', d.chain.epoch) : context.suppressed,
      };
    }),
  },
}).createMachine({
  id: 'rotation',
  initial: 'idle',
  context: ({ input }) => ({
    model: input?.model ?? null,
    epoch: null,
    height: null,
    phase: 0,
    target: 0,
    existing: 0,
    created: 0,
    promoted: 0,
    settleDecided: 0,
    settleFailed: 0,
    suppressed: [],
    lastError: null,
    replacements: 0,
    cycleEpoch: null,
    cycle: emptyCycle(),
    replacing: {},
  }),
  states: {
    idle: {
      on: {
        ...anytime,
        RotationPhaseStarted: { guard: 'isPhase1', target: 'phase1', actions: 'startPhase' },
      },
    },
    /** pre_poc_blocks before the boundary. */
    phase1: {
      initial: 'creatingTemporaries',
      on: { ...anytime },
      states: {
        creatingTemporaries: {
          on: {
            RotationCreateDecided: { guard: 'temporaryCreateAllowed', actions: 'createDecided' },
            RotationCreateSuppressed: { target: 'promoting', actions: 'createSuppressed' },
            RotationFailed: { guard: 'createFailed', target: 'promoting', actions: 'failed' },
            RotationPromoted: { target: 'settlingRegulars', actions: 'promoted' },
            RotationSettleDecided: { guard: 'settlesRegulars', target: 'settlingRegulars', actions: 'settleDecided' },
          },
        },
        /** Fallback: temporary creation failed, regulars take the temporary role. */
        promoting: {
          on: {
            RotationPromoted: { target: 'settlingRegulars', actions: 'promoted' },
            RotationSettleDecided: { guard: 'settlesRegulars', target: 'settlingRegulars', actions: 'settleDecided' },
          },
        },
        settlingRegulars: {
          on: {
            RotationSettleDecided: { guard: 'settlesRegulars', actions: 'settleDecided' },
            RotationFailed: { guard: 'settleFailed', actions: 'failed' },
            RotationPhaseCompleted: { guard: 'isPhase1', target: '#rotation.waitingPoc', actions: 'completePhase' },
          },
        },
      },
    },
    /** Waiting for the chain to leave the PoC window of the transition. */
    waitingPoc: {
      on: {
        ...anytime,
        RotationPhaseStarted: { guard: 'isPhase2', target: 'phase2', actions: 'startPhase' },
      },
    },
    phase2: {
      initial: 'creatingTargets',
      on: { ...anytime },
      states: {
        creatingTargets: {
          on: {
            RotationCreateDecided: { guard: 'regularCreateAllowed', actions: 'createDecided' },
            RotationCreateSuppressed: { actions: 'createSuppressed' },
            RotationFailed: { guard: 'createFailed', actions: 'failed' },
            RotationSettleDecided: { guard: 'settlesTemporaries', target: 'settlingTemporaries', actions: 'settleDecided' },
            RotationPhaseCompleted: { guard: 'isPhase2', target: '#rotation.idle', actions: 'completePhase' },
          },
        },
        settlingTemporaries: {
          on: {
            RotationSettleDecided: { guard: 'settlesTemporaries', actions: 'settleDecided' },
            RotationFailed: { guard: 'settleFailed', actions: 'failed' },
            RotationPhaseCompleted: { guard: 'isPhase2', target: '#rotation.idle', actions: 'completePhase' },
          },
        },
      },
    },
  },
});
