/**
 * The escrow's request transitions as plain functions over its context: the statechart's guards and
 * assigns (escrow.ts) call them, and so does the fast path (escrow-fast.ts). The rules themselves
 * are written once in escrow-rules.ts.
 */
import type { Amount, EscrowEventData } from '../events/catalog.js';
import { add } from './amounts.js';
import type { EscrowContext } from './escrow-context.js';
import { AMOUNTS, endAllowed, endUpdate, reserveAllowed, startAllowed } from './escrow-rules.js';

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
export function recordEdits(record: Record<string, Amount>): PendingEdits & { record: Record<string, Amount> } {
  const copy: Record<string, Amount> = { ...record };
  return {
    record: copy,
    get: (id) => (Object.hasOwn(copy, id) ? copy[id] : undefined),
    set: (id, v) => void Object.defineProperty(copy, id, { value: v, enumerable: true, writable: true, configurable: true }),
    delete: (id) => void delete copy[id],
  };
}
