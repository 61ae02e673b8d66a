/**
 * Rotation decisions, one stream per model (`rotation-<model>`). Each event carries the inputs the
 * decision was made from (height, epoch, counts, the chain's error) so `explain` needs only the log.
 * The creates and settles themselves are escrow events linked by intent / escrow ids.
 */
import type { ChainErrorInfo, EscrowRole } from './common.js';

/** Chain reading a decision was based on. */
export interface ChainInputs {
  height: number;
  epoch: number;
  nextBoundaryHeight: number;
  blocksUntilBoundary: number;
  pocActive: boolean;
}

export type RotationStep = 'create_temporary' | 'create_target' | 'promote' | 'settle' | 'read_chain';
export type ReplacementReason = 'depleted' | 'routing_stop' | 'exhausted';

export interface RotationEventData {
  RotationPhaseStarted: { model: string; phase: 1 | 2; chain: ChainInputs; target: number; existing: number };
  RotationPhaseCompleted: {
    model: string;
    phase: 1 | 2;
    chain: ChainInputs;
    created: number;
    promoted: number;
    settleDecided: number;
  };
  /** `intentIds` name the `escrow-create-<id>` streams the creates were written to. */
  RotationCreateDecided: {
    model: string;
    role: EscrowRole;
    chain: ChainInputs;
    target: number;
    existing: number;
    intentIds: string[];
  };
  /** A create was skipped because this model, role and epoch already failed on chain. */
  RotationCreateSuppressed: { model: string; role: EscrowRole; chain: ChainInputs; reason: string };
  /** Fallback: regular escrows take the temporary role because temporary creation failed. */
  RotationPromoted: { model: string; chain: ChainInputs; escrowIds: string[] };
  /** Finalize + settle decided for these escrows (settles of busy ones are deferred). */
  RotationSettleDecided: { model: string; role: EscrowRole; chain: ChainInputs; escrowIds: string[] };
  /**
   * `suppress` true: the chain refused a create; no repeat for this model, role and epoch.
   * `configuration` set: no create was sent (see the member).
   * `intentId` names the failed create (create steps), `escrowId` the escrow whose settle failed.
   * Settle step only (all optional, so events recorded before settle retries replay unchanged, as
   * failures that are not retried): `attempt` is the rotation's attempt at this settle that failed
   * (1 = the first); `retryAtHeight`, set for a transient failure, is the height from which the
   * rotation tries again while the settle window is open; `windowClosed` records that a pending
   * retry was given up because the window had closed (nothing was sent to the chain).
   */
  RotationFailed: {
    model: string;
    step: RotationStep;
    role?: EscrowRole;
    chain: ChainInputs;
    error: ChainErrorInfo;
    suppress: boolean;
    intentId?: string;
    escrowId?: string;
    attempt?: number;
    retryAtHeight?: number;
    windowClosed?: boolean;
    /**
     * A configuration error, not the chain's answer (issue 38): the env variable `variable` that
     * `escrow_rotation.models[].private_key_env` names is unset or holds no usable key, so nothing
     * was sent. The create (its `intentId`) is not failed: the cycle waits and the rotation tries
     * it again at the first tick that finds a usable key (the variable set, or another one named).
     */
    configuration?: { variable: string };
  };
  DepletionReplacementDecided: {
    model: string;
    escrowId: string;
    reason: ReplacementReason;
    chain: ChainInputs;
    intentId: string;
  };
  /**
   * Without `step` (as every event recorded before depletion settle retries): the replacement's
   * create failed; `suppress` true when the chain refused it (no repeat this epoch).
   * `step: 'settle'`: the replacement exists and the settle of the old escrow `escrowId` failed
   * (`suppress` false), with the fields of RotationFailed's settle step: `attempt` (1 = the first),
   * `retryAtHeight` for a transient failure (the depletion check tries again from that height while
   * the settle window is open), `windowClosed` when a pending retry was given up (nothing sent).
   */
  DepletionReplacementFailed: {
    model: string;
    escrowId: string;
    reason: ReplacementReason;
    chain: ChainInputs;
    error: ChainErrorInfo;
    suppress: boolean;
    step?: 'create' | 'settle';
    attempt?: number;
    retryAtHeight?: number;
    windowClosed?: boolean;
  };
}
