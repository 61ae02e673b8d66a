/**
 * The escrow statechart's context and events (escrow.ts): what its state holds, apart from the
 * machine, so the request rules (escrow-requests.ts) and the fast path can name them.
 */
import type { Amount, CatalogEventOf, EscrowEventData, EscrowRole, SettlementData, SlotInfo } from '../events/catalog.js';
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
