/**
 * The escrow lifecycle (spec "States and transitions", escrow table) as a pure XState statechart.
 * Its events are the recorded catalog events, so the escrow's state is the fold of its streams
 * (creation intent, then `escrow-<id>`) through `transition`. A command asks `snapshot.can(event)`
 * before appending.
 *
 * Money: `balance` = deposit − spent (never negative); `reserved` is the worst-case cost of the
 * requests in flight, so the usable balance is balance − reserved.
 */
import { assertEvent, assign, setup } from 'xstate';
import { add, lte, sub } from './amounts.js';
import { ROUTING_STOP_NONCE, type EscrowContext, type EscrowEvent, type EscrowInput } from './escrow-context.js';
import { canEndRequest, canReserveNonces, canStartRequest, endRequestUpdate, hasReservation, recordEdits, recordInferences, startRequestUpdate } from './escrow-requests.js';

export * from './escrow-context.js';
export * from './escrow-requests.js';

/**
 * Ends of requests are accepted wherever requests may still be in flight (they drain); so are the
 * start-up records of a previous run's reserved nonces and of usage hosts served beyond the log.
 */
const drain = {
  InferenceFinished: { guard: 'canEndRequest', actions: 'endRequest' },
  InferenceFailed: { guard: 'canEndRequest', actions: 'endRequest' },
  NoncesSkipped: { guard: 'canSkipNonces', actions: 'skipNonces' },
  NoncesReleased: { guard: 'canReleaseNonces', actions: 'releaseNonces' },
  UsageRecovered: { guard: 'canRecoverUsage', actions: 'recoverUsage' },
  InferencesRecorded: { guard: 'canRecordInferenceEnds', actions: 'recordInferences' },
} as const;

/** The escrow statechart. */
export const escrowMachine = setup({
  types: {
    context: {} as EscrowContext,
    events: {} as EscrowEvent,
    input: {} as EscrowInput | undefined,
  },
  guards: {
    /** A fresh nonce above the last one, below the routing stop, and the reservation is covered. */
    canStartRequest: ({ context, event }) => {
      assertEvent(event, 'InferenceStarted');
      return canStartRequest(context, event.data, hasReservation(context.pending, event.data.requestId));
    },
    /** The request is in flight here and its cost fits the unspent deposit (balance stays ≥ 0). */
    canEndRequest: ({ context, event }) => {
      assertEvent(event, ['InferenceFinished', 'InferenceFailed']);
      const { requestId } = event.data;
      return canEndRequest(context, event.data, hasReservation(context.pending, requestId) ? context.pending[requestId] : undefined);
    },
    /** Every entry accepted in turn, as its own event would be (recordInferences). */
    canRecordInferences: ({ context, event }) => {
      assertEvent(event, 'InferencesRecorded');
      return recordInferences(context, event.data.entries, true, recordEdits(context.pending)) !== undefined;
    },
    /** The same with ends only: where requests drain but no new chat is taken. */
    canRecordInferenceEnds: ({ context, event }) => {
      assertEvent(event, 'InferencesRecorded');
      return recordInferences(context, event.data.entries, false, recordEdits(context.pending)) !== undefined;
    },
    /** A reservation beyond both the last reservation and the last used nonce, below the routing stop. */
    canReserveNonces: ({ context, event }) => {
      assertEvent(event, 'NoncesReserved');
      return canReserveNonces(context, event.data.upTo);
    },
    /** Skips exactly to a reservation the log holds, above the last used nonce. */
    canSkipNonces: ({ context, event }) => {
      assertEvent(event, 'NoncesSkipped');
      const d = event.data;
      return d.from === context.nonce + 1 && d.upTo >= d.from && context.nonceReserved != null && d.upTo <= context.nonceReserved;
    },
    /** Nothing in flight and a reservation beyond the last used nonce, which it is cut back to. */
    canReleaseNonces: ({ context, event }) => {
      assertEvent(event, 'NoncesReleased');
      return context.inFlight === 0 && event.data.upTo === context.nonce && context.nonceReserved != null && context.nonceReserved > context.nonce;
    },
    /** Recovered usage fits the unspent deposit (balance stays ≥ 0). */
    canRecoverUsage: ({ context, event }) => {
      assertEvent(event, 'UsageRecovered');
      return lte(event.data.cost, context.balance);
    },
    /** No further nonce is usable below the routing stop. */
    atRoutingStop: ({ context }) => context.nonce + 1 >= context.routingStop,
    noInFlight: ({ context }) => context.inFlight === 0,
    hasInFlight: ({ context }) => context.inFlight > 0,
    /** Nothing in flight and the settle failure schedules a retry (a drained settle's transient failure). */
    retryScheduled: ({ context, event }) => context.inFlight === 0 && event.type === 'EscrowSettleFailed' && event.data.retryAtHeight !== undefined,
    isSettled: ({ context }) => context.settled,
    notSettled: ({ context }) => !context.settled,
  },
  actions: {
    requestCreate: assign(({ event }) => {
      assertEvent(event, 'EscrowCreateRequested');
      const d = event.data;
      return { intentId: d.intentId, model: d.model, role: d.role, creator: d.creator, epoch: d.epoch, deposit: d.amount, balance: d.amount };
    }),
    createFailed: assign(({ event }) => {
      assertEvent(event, 'EscrowCreateFailed');
      return { lastError: `${event.data.error.kind}: ${event.data.error.message}` };
    }),
    created: assign(({ context, event }) => {
      assertEvent(event, 'EscrowCreated');
      const d = event.data;
      return {
        escrowId: d.escrowId,
        intentId: d.intentId ?? context.intentId,
        model: d.model,
        role: d.role,
        creator: d.creator,
        epoch: d.epoch,
        deposit: d.amount,
        spent: '0',
        balance: d.amount,
        slots: d.slots,
      };
    }),
    imported: assign(({ event }) => {
      assertEvent(event, 'EscrowImported');
      const d = event.data;
      return {
        escrowId: d.escrowId,
        model: d.model,
        role: d.role,
        creator: d.creator,
        epoch: d.epoch,
        deposit: d.amount,
        spent: d.spent,
        balance: sub(d.amount, d.spent),
        nonce: d.nonce,
        slots: d.slots,
      };
    }),
    startRequest: assign(({ context, event }) => {
      assertEvent(event, 'InferenceStarted');
      const d = event.data;
      return { ...startRequestUpdate(context, d), pending: { ...context.pending, [d.requestId]: d.reservedCost } };
    }),
    recordInferences: assign(({ context, event }) => {
      assertEvent(event, 'InferencesRecorded');
      const edits = recordEdits(context.pending);
      // The guard has accepted every entry (starts only where allowed), so this applies them all.
      const counters = recordInferences(context, event.data.entries, true, edits)!;
      return { ...counters, pending: edits.record };
    }),
    reserveNonces: assign(({ event }) => {
      assertEvent(event, 'NoncesReserved');
      return { nonceReserved: event.data.upTo };
    }),
    skipNonces: assign(({ event }) => {
      assertEvent(event, 'NoncesSkipped');
      return { nonce: event.data.upTo };
    }),
    releaseNonces: assign(({ event }) => {
      assertEvent(event, 'NoncesReleased');
      return { nonceReserved: event.data.upTo };
    }),
    recoverUsage: assign(({ context, event }) => {
      assertEvent(event, 'UsageRecovered');
      const spent = add(context.spent, event.data.cost);
      return { spent, balance: sub(context.deposit, spent) };
    }),
    endRequest: assign(({ context, event }) => {
      assertEvent(event, ['InferenceFinished', 'InferenceFailed']);
      const { [event.data.requestId]: reservation = '0', ...pending } = context.pending;
      return { ...endRequestUpdate(context, event.data, reservation), pending };
    }),
    finalize: assign(({ event }) => {
      assertEvent(event, 'EscrowFinalized');
      return { settlement: event.data.settlement };
    }),
    settleFailed: assign(({ context, event }) => {
      assertEvent(event, 'EscrowSettleFailed');
      const d = event.data;
      const retry = d.retryAtHeight === undefined ? undefined : { attempt: d.attempt ?? 1, retryAtHeight: d.retryAtHeight };
      // Only a drained settle's failures touch settleRetry: other logs fold to the same context as before.
      return { lastError: d.reason, ...(retry || context.settleRetry ? { settleRetry: retry } : {}) };
    }),
    settled: assign({ settled: true, lastError: null }),
  },
}).createMachine({
  id: 'escrow',
  initial: 'none',
  context: ({ input }) => ({
    escrowId: null,
    intentId: null,
    model: null,
    role: 'regular',
    creator: null,
    epoch: null,
    deposit: '0',
    spent: '0',
    balance: '0',
    reserved: '0',
    nonce: 0,
    nonceReserved: null,
    inFlight: 0,
    pending: {},
    routingStop: input?.routingStop ?? ROUTING_STOP_NONCE,
    settlement: null,
    slots: [],
    settled: false,
    lastError: null,
  }),
  states: {
    none: {
      on: {
        EscrowCreateRequested: { target: 'creating', actions: 'requestCreate' },
        EscrowCreated: { target: 'created', actions: 'created' },
        EscrowImported: { target: 'imported', actions: 'imported' },
      },
    },
    /** Intent recorded, tx possibly broadcast; the outcome decides. */
    creating: {
      on: {
        EscrowCreated: { target: 'created', actions: 'created' },
        EscrowCreateFailed: { target: 'createFailed', actions: 'createFailed' },
      },
    },
    createFailed: { type: 'final' },
    /** On chain, not yet registered for routing. */
    created: {
      on: {
        EscrowRegistered: 'active',
        EscrowActivated: 'active',
        EscrowFinalized: { target: 'finalized', actions: 'finalize' },
      },
    },
    /** Imported state, inactive until registered or activated on this gateway. */
    imported: {
      on: {
        EscrowRegistered: 'active',
        EscrowActivated: 'active',
        EscrowFinalized: { target: 'finalized', actions: 'finalize' },
      },
    },
    /** Routable: takes new chat. */
    active: {
      on: {
        NoncesReserved: { guard: 'canReserveNonces', actions: 'reserveNonces' },
        InferenceStarted: { guard: 'canStartRequest', actions: 'startRequest' },
        ...drain,
        InferencesRecorded: { guard: 'canRecordInferences', actions: 'recordInferences' },
        EscrowDepleted: 'depleted',
        EscrowRoutingStopped: { guard: 'atRoutingStop', target: 'routingStopped' },
        EscrowFinalized: { target: 'finalized', actions: 'finalize' },
        EscrowDeactivated: 'deactivated',
      },
    },
    /** Usable balance below the threshold: no new chat; replaced when rotation is on. */
    depleted: {
      on: {
        ...drain,
        EscrowFinalized: { target: 'finalized', actions: 'finalize' },
        EscrowDeactivated: 'deactivated',
      },
    },
    /** Nonce at the routing stop: no new chat (and no reserved nonce left to skip: reservations end below the stop). */
    routingStopped: {
      on: {
        InferenceFinished: drain.InferenceFinished,
        InferenceFailed: drain.InferenceFailed,
        InferencesRecorded: drain.InferencesRecorded,
        UsageRecovered: drain.UsageRecovered,
        EscrowDepleted: 'depleted',
        EscrowFinalized: { target: 'finalized', actions: 'finalize' },
        EscrowDeactivated: 'deactivated',
      },
    },
    /** Settlement data produced (off-chain); requests started before may still drain. */
    finalized: {
      on: {
        ...drain,
        EscrowFinalized: { actions: 'finalize' },
        EscrowSettleRequested: { guard: 'noInFlight', target: 'settling' },
        EscrowSettleDeferred: { guard: 'hasInFlight', target: 'settleDeferred' },
      },
    },
    /**
     * A settle is wanted but requests are in flight; requested once they have drained. If that
     * drained settle fails transiently it stays here until its retry (`settleRetry`); any other
     * failure of it, or a retry given up once the settle window closed, leaves it finalized.
     */
    settleDeferred: {
      on: {
        ...drain,
        EscrowFinalized: { actions: 'finalize' },
        EscrowSettleRequested: { guard: 'noInFlight', target: 'settling' },
        EscrowSettleFailed: [
          { guard: 'retryScheduled', actions: 'settleFailed' },
          { guard: 'noInFlight', target: 'finalized', actions: 'settleFailed' },
        ],
      },
    },
    /** Settle tx recorded (write-ahead), outcome pending. */
    settling: {
      on: {
        EscrowSettled: { target: 'settled', actions: 'settled' },
        // A drained settle's transient failure waits for its retry; every other failure is final here.
        EscrowSettleFailed: [
          { guard: 'retryScheduled', target: 'settleDeferred', actions: 'settleFailed' },
          { target: 'finalized', actions: 'settleFailed' },
        ],
      },
    },
    settled: {
      on: {
        EscrowDeactivated: 'deactivated',
        EscrowRemoved: 'removed',
      },
    },
    /** Not routed; the chain record remains. */
    deactivated: {
      on: {
        ...drain,
        EscrowActivated: { guard: 'notSettled', target: 'active' },
        EscrowFinalized: { guard: 'notSettled', target: 'finalized', actions: 'finalize' },
        EscrowRemoved: { guard: 'isSettled', target: 'removed' },
      },
    },
    removed: { type: 'final' },
  },
});

/** State values of the escrow machine. */
export type EscrowState =
  | 'none' | 'creating' | 'createFailed' | 'created' | 'imported' | 'active' | 'depleted' | 'routingStopped'
  | 'finalized' | 'settleDeferred' | 'settling' | 'settled' | 'deactivated' | 'removed';

/** States in which an escrow takes new chat. */
export const ROUTABLE_ESCROW_STATES: readonly EscrowState[] = ['active'];
