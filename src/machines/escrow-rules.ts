/**
 * The rules of the escrow's high-volume transitions, each written once. The statechart's guards
 * (escrow.ts) run them on decimal-string amounts; the projections' fast fold (escrow-run.ts) runs
 * the same functions on plain numbers. The arithmetic is passed in, so the two fold paths cannot
 * drift: a rule changed here changes both.
 */
import type { Amount } from '../events/catalog.js';
import { add, lte, sub } from './amounts.js';

/** The arithmetic a rule runs on: decimal strings (the machine) or safe integers (the fast fold). */
export interface Arithmetic<N> {
  add(a: N, b: N): N;
  sub(a: N, b: N): N;
  lte(a: N, b: N): boolean;
}

export const AMOUNTS: Arithmetic<Amount> = { add, sub, lte };

/** For counters known to be safe integers (the caller checks sums stay safe). */
export const NUMBERS: Arithmetic<number> = { add: (a, b) => a + b, sub: (a, b) => a - b, lte: (a, b) => a <= b };

/** What a start is checked against. */
export interface StartCounters<N> {
  nonce: number;
  nonceReserved: number | null | undefined;
  routingStop: number;
  reserved: N;
  balance: N;
}

/** A fresh nonce above the last one, reserved, below the routing stop, not already pending, and the reservation is covered. */
export const startAllowed = <N>(ar: Arithmetic<N>, c: StartCounters<N>, nonce: number, reservedCost: N, alreadyPending: boolean): boolean =>
  nonce > c.nonce &&
  (c.nonceReserved == null || nonce <= c.nonceReserved) &&
  nonce < c.routingStop &&
  !alreadyPending &&
  ar.lte(ar.add(c.reserved, reservedCost), c.balance);

/** The request is in flight here (has a reservation) and its cost fits the unspent deposit (balance stays ≥ 0). */
export const endAllowed = <N>(ar: Arithmetic<N>, balance: N, cost: N, reservation: N | undefined): boolean => reservation !== undefined && ar.lte(cost, balance);

/** A reservation beyond both the last reservation and the last used nonce, below the routing stop. */
export const reserveAllowed = (c: { nonce: number; nonceReserved: number | null | undefined; routingStop: number }, upTo: number): boolean =>
  upTo > Math.max(c.nonce, c.nonceReserved ?? 0) && upTo < c.routingStop;

/** Counters after a request ends: its reservation released once, its cost spent. */
export const endUpdate = <N>(ar: Arithmetic<N>, c: { reserved: N; spent: N; deposit: N }, cost: N, reservation: N): { reserved: N; spent: N; balance: N } => {
  const spent = ar.add(c.spent, cost);
  return { reserved: ar.sub(c.reserved, reservation), spent, balance: ar.sub(c.deposit, spent) };
};
