/**
 * Finalize and settle as pure decisions: (the escrow's decided state, the command) → what to do,
 * with the events to record or the refusal. The use cases (gateway/escrows/settle.ts) run the
 * I/O around them (keys, fees, the chain, the hosts) and carry the decision out; the rules are
 * here, beside the statechart they read, and are tested given/when/then.
 */
import type { CatalogEventOf, EscrowEventData } from '../events/catalog.js';
import { stepEscrowFast } from './escrow-fast.js';
import { stateName } from './fold.js';
import type { SnapshotFrom } from 'xstate';
import type { escrowMachine } from './escrow.js';

type EscrowSnapshot = SnapshotFrom<typeof escrowMachine>;

/** What finalizing decides. */
export type FinalizeDecision = { kind: 'finalize' } | { kind: 'refuse'; code: 'invalid_state'; state: string };

/** The settle command's part that a deferral records (EscrowSettleDeferred without its count). */
export type SettleDeferral = Omit<EscrowEventData['EscrowSettleDeferred'], 'inFlight'>;

/** What a settle command decides, in the order the checks apply. */
export type SettleDecision =
  /** Settled already: answer the settlement again (no key needed). */
  | { kind: 'answer_settled' }
  /** A settle tx is out: answer it (its outcome is resolved by the reconciler). */
  | { kind: 'answer_settling' }
  /** Not finalized, requests in flight: devshardctl refuses rather than finalize under them. */
  | { kind: 'refuse'; code: 'devshard_busy'; inFlight: number }
  /** Not finalized and cannot be (deactivated, removed, …). */
  | { kind: 'refuse'; code: 'not_finalized'; state: string }
  /** Not finalized, idle: finalize first, then settle. */
  | { kind: 'finalize_then_settle' }
  /** Finalized with requests in flight: record the wish; the drain reactor completes it. */
  | { kind: 'defer'; event: CatalogEventOf<'EscrowSettleDeferred'>; inFlight: number }
  /** Deferred already and still draining: nothing new to record. */
  | { kind: 'still_deferred'; inFlight: number }
  /** Finalized and drained: sign and broadcast. */
  | { kind: 'settle' };

const FINALIZE_PROBE = { type: 'EscrowFinalized', data: { settlement: null } } as never;

/** Whether the statechart would take a finalize from `s` (the settlement itself is not judged). */
export const canFinalize = (s: EscrowSnapshot): boolean => stepEscrowFast(s, FINALIZE_PROBE).accepted;

export function decideFinalize(s: EscrowSnapshot): FinalizeDecision {
  return canFinalize(s) ? { kind: 'finalize' } : { kind: 'refuse', code: 'invalid_state', state: stateName(s.value) };
}

export function decideSettle(s: EscrowSnapshot, deferral: SettleDeferral): SettleDecision {
  const c = s.context;
  if (c.settled) return { kind: 'answer_settled' };
  if (s.value === 'settling') return { kind: 'answer_settling' };
  if (s.value !== 'finalized' && s.value !== 'settleDeferred') {
    if (c.inFlight > 0) return { kind: 'refuse', code: 'devshard_busy', inFlight: c.inFlight };
    if (!canFinalize(s)) return { kind: 'refuse', code: 'not_finalized', state: stateName(s.value) };
    return { kind: 'finalize_then_settle' };
  }
  if (c.inFlight > 0) {
    if (s.value === 'settleDeferred') return { kind: 'still_deferred', inFlight: c.inFlight };
    return { kind: 'defer', event: { type: 'EscrowSettleDeferred', data: { inFlight: c.inFlight, ...deferral } }, inFlight: c.inFlight };
  }
  return { kind: 'settle' };
}
