/**
 * The phases of one devshard session as the hosts' state machine moves them (gonka 8a35022
 * devshard/state/machine.go `applyFinalizeRound`, `applyCore` step 6): Active until a diff carries
 * MsgFinalizeRound; Finalizing until the diff at FinalizeNonce + N (N = slots), where the live
 * records are drained into the sealed accumulator; then Settlement, which never changes again
 * (later diffs are accepted and leave the root unchanged). The replica in src/protocol moves the
 * phase itself (no xstate on the request path); this chart documents it and tests check that every
 * phase change the replica makes is a transition allowed here.
 */
import { setup } from 'xstate';

export type DevshardSessionPhaseEvent =
  /** A diff applied MsgFinalizeRound (that diff pays no fee_per_nonce; no start after it). */
  | { type: 'FinalizeRoundApplied' }
  /** The diff at FinalizeNonce + N was applied: live records drained, settlement root signable. */
  | { type: 'FinalizeDeadlineReached' };

/** The replica's phase byte (hashed last into every root) → this chart's state. */
export const DEVSHARD_PHASE_STATES = ['active', 'finalizing', 'settlement'] as const;

export const devshardSessionPhaseMachine = setup({
  types: { events: {} as DevshardSessionPhaseEvent },
}).createMachine({
  id: 'devshardSessionPhase',
  initial: 'active',
  states: {
    /** Phase byte 0x00: starts accepted, fee_per_nonce charged per diff, auto-seal every N nonces. */
    active: { on: { FinalizeRoundApplied: 'finalizing' } },
    /** Phase byte 0x01: host txs still applied, no new inference, no fee, no auto-seal. */
    finalizing: { on: { FinalizeDeadlineReached: 'settlement' } },
    /** Phase byte 0x02: the hosts sign the settlement root; nothing changes any more. */
    settlement: { type: 'final' },
  },
});
