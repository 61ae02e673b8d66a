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
import type { Amount, CatalogEventOf, EscrowEventData, EscrowRole, SettlementData, SlotInfo } from '../events/catalog.js';
import { add, lte, sub } from './amounts.js';
import { AMOUNTS, endAllowed, endUpdate, reserveAllowed, startAllowed } from './escrow-rules.js';
import type { SettleRetry } from './rotation.js';

/** The nonce at which a multi-escrow gateway stops routing new chat to an escrow (spec "Limits"). */
export const ROUTING_STOP_NONCE = 19_800;

export type EscrowEventType = keyof EscrowEventData;
/** Events the escrow machine consumes. */
export type EscrowEvent = CatalogEventOf<EscrowEventType>;

export interface EscrowContext {
  escrowId: string | null;
  intentId: string | null;
  model: string | null;
  role: EscrowRole;
  creator: string | null;
  epoch: number | null;
  deposit: Amount;
  /** Cost of finished and failed requests. */
  spent: Amount;
  /** deposit − spent. */
  balance: Amount;
  /** Worst-case cost of the requests in flight. */
  reserved: Amount;
  /** Last used nonce (0 = none yet). */
  nonce: number;
  /**
   * Highest durably reserved nonce (NoncesReserved); a request may only use a nonce up to it.
   * null for an escrow whose log predates reservations (then only `nonce` orders requests).
   */
  nonceReserved: number | null;
  inFlight: number;
  /** requestId → reserved cost, so each end releases exactly its own reservation once. */
  pending: Record<string, Amount>;
  /** Nonce at which routing stops; input so tests can use a small one. */
  routingStop: number;
  settlement: SettlementData | null;
  /** Host slots (executor of nonce n is slots[n % slots.length]). */
  slots: SlotInfo[];
  settled: boolean;
  lastError: string | null;
  /**
   * A drained settle (sent by the drain reactor once requests ended) whose last attempt failed
   * transiently: that attempt and the height from which the next may run, while `settleDeferred`.
   * Absent until the first such failure, so the state folded from a log without one (and
   * checkpoints written before drained retries existed) is unchanged.
   */
  settleRetry?: SettleRetry;
}

export interface EscrowInput {
  routingStop?: number;
}


type StartData = EscrowEventData['InferenceStarted'];
type EndData = EscrowEventData['InferenceFinished'] | EscrowEventData['InferenceFailed'];

/** Does `pending` hold a reservation for `requestId` (own keys only)? */
export const hasReservation = (pending: Record<string, Amount>, requestId: string): boolean => Object.hasOwn(pending, requestId);

/*
 * The rules of the high-volume transitions, as plain functions: the statechart's guards and assigns
 * below call them, and so does the fast path (escrow-fast.ts), which keeps `pending` in a
 * persistent map instead of copying the record. They take the reservation lookup as an argument
 * (`pending` is the representation, not the rule) and return the counters to merge into context.
 */

/** startAllowed (escrow-rules.ts) on the context's amounts. */
export const canStartRequest = (context: EscrowContext, d: StartData, alreadyPending: boolean): boolean =>
  startAllowed(AMOUNTS, context, d.nonce, d.reservedCost, alreadyPending);

/** endAllowed (escrow-rules.ts) on the context's amounts. */
export const canEndRequest = (context: EscrowContext, d: EndData, reservation: Amount | undefined): boolean =>
  endAllowed(AMOUNTS, context.balance, d.cost, reservation);

/** reserveAllowed (escrow-rules.ts). */
export const canReserveNonces = (context: Pick<EscrowContext, 'nonce' | 'nonceReserved' | 'routingStop'>, upTo: number): boolean => reserveAllowed(context, upTo);

/** Counters after a request starts (the caller adds `requestId → reservedCost` to `pending`). */
export const startRequestUpdate = (context: EscrowContext, d: StartData): Pick<EscrowContext, 'nonce' | 'inFlight' | 'reserved'> => ({
  nonce: d.nonce,
  inFlight: context.inFlight + 1,
  reserved: add(context.reserved, d.reservedCost),
});

/** Counters after a request ends: its own reservation released once, its cost spent (the caller drops it from `pending`). */
export const endRequestUpdate = (
  context: EscrowContext,
  d: EndData,
  reservation: Amount,
): Pick<EscrowContext, 'inFlight' | 'reserved' | 'spent' | 'balance'> => ({ inFlight: context.inFlight - 1, ...endUpdate(AMOUNTS, context, d.cost, reservation) });

/** Edits of the pending reservations (requestId → reserved cost) while InferencesRecorded is folded. */
export interface PendingEdits {
  get(requestId: string): Amount | undefined;
  set(requestId: string, reservedCost: Amount): void;
  delete(requestId: string): void;
}

const ENTRY_TYPES = new Set(['InferenceStarted', 'InferenceFinished', 'InferenceFailed']);

/**
 * InferencesRecorded's rule: each entry in turn must pass its own event's guard (a start only when
 * `startsAllowed`), with the counters each earlier entry left; the counters after all of them, or
 * undefined when one is refused (the caller then applies none: `pending` may hold edits to drop).
 */
export function recordInferences(
  context: EscrowContext,
  entries: unknown,
  startsAllowed: boolean,
  pending: PendingEdits,
): Pick<EscrowContext, 'nonce' | 'inFlight' | 'reserved' | 'spent' | 'balance'> | undefined {
  if (!Array.isArray(entries) || entries.length === 0) return undefined;
  // Only the fields the rules read and write, updated in place.
  const w = {
    nonce: context.nonce,
    nonceReserved: context.nonceReserved,
    routingStop: context.routingStop,
    deposit: context.deposit,
    inFlight: context.inFlight,
    reserved: context.reserved,
    spent: context.spent,
    balance: context.balance,
  } as EscrowContext;
  for (const entry of entries as unknown[]) {
    const { type, data } = (entry ?? {}) as { type?: unknown; data?: unknown };
    if (typeof type !== 'string' || !ENTRY_TYPES.has(type) || typeof data !== 'object' || data === null) return undefined;
    const requestId = (data as { requestId?: unknown }).requestId;
    if (typeof requestId !== 'string') return undefined;
    if (type === 'InferenceStarted') {
      const d = data as StartData;
      if (!startsAllowed || !canStartRequest(w, d, pending.get(requestId) !== undefined)) return undefined;
      Object.assign(w, startRequestUpdate(w, d));
      pending.set(requestId, d.reservedCost);
    } else {
      const d = data as EndData;
      const reservation = pending.get(requestId);
      if (!canEndRequest(w, d, reservation)) return undefined;
      Object.assign(w, endRequestUpdate(w, d, reservation!));
      pending.delete(requestId);
    }
  }
  return { nonce: w.nonce, inFlight: w.inFlight, reserved: w.reserved, spent: w.spent, balance: w.balance };
}

/** PendingEdits over a copy of a plain record (own keys only, `__proto__` included). */
function recordEdits(record: Record<string, Amount>): PendingEdits & { record: Record<string, Amount> } {
  const copy: Record<string, Amount> = { ...record };
  return {
    record: copy,
    get: (id) => (Object.hasOwn(copy, id) ? copy[id] : undefined),
    set: (id, v) => void Object.defineProperty(copy, id, { value: v, enumerable: true, writable: true, configurable: true }),
    delete: (id) => void delete copy[id],
  };
}

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
