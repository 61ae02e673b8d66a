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
import { REPLACING_LIMIT, cycleOf, depletionSettleRetriesAfter, emptyCycle, isCreateStep, settleRetriesAfter, settleRetriesOf, suppressionKey, unblocked, withSuppression, type RotationEvent, type RotationContext } from './rotation-context.js';

export * from './rotation-context.js';

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
