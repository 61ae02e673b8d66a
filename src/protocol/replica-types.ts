/** What the replica (replica.ts) is made from and answers: its parameters, a diff, apply options and results. */
import type { DevshardError } from './errors.js';
import type { DevshardTx } from './gen/devshard/v1/diff_pb.js';
import type { HeightSyncFlags } from './height-sync-flags.js';
import type { InferenceRecord } from './inference-record.js';
import type { SessionConfig } from './session-config.js';
import type { RuleSet } from './versions.js';

/** Is `warm` authorised (authz grant for MsgStartInference) to sign for `cold`? (`WarmKeyResolver`) */
export type WarmKeyResolver = (warm: string, cold: string) => boolean;

/** A binding made while applying a diff: record it with the diff so a replay needs no chain. */
export interface WarmKeyBinding {
  slot: number;
  warm: string;
}

/** What the session is bound to: the escrow and the chain params, frozen at bind. */
export interface ReplicaParams {
  escrowId: string;
  /** Slot id → cold address (the escrow's `slots`, in order). */
  slots: readonly string[];
  /** The escrow amount; the create fee is taken from it. */
  amount: bigint;
  /** The escrow creator, who signs every diff. */
  userAddress: string;
  /** Config as given (normalised here, as at bind). */
  config: SessionConfig;
  /** The state-root tag: the rule set's name ("v2", "v5") unless the escrow names another. */
  version?: string;
  /** The state machine's rules (default v2). */
  rules?: RuleSet;
}

/** A diff as the hosts receive it. */
export interface Diff {
  nonce: bigint;
  txs: readonly DevshardTx[];
  userSig: Uint8Array;
  /** Empty: not compared. */
  postStateRoot: Uint8Array;
}

export interface ApplyOptions {
  /** Answers warm-key questions (none: warm keys are refused unless already bound). */
  warmKeys?: WarmKeyResolver;
  /**
   * applyDiff only: check the user's signature (default true). Replaying our own recorded diffs
   * may skip it; the root comparison still runs.
   */
  checkUserSig?: boolean;
  /**
   * Replaying diffs already accepted (`ApplyLocalPersisted`): v5's max_tokens floor, which guards
   * only the creation of new work, is not applied. Default false.
   */
  replayingPersisted?: boolean;
}

/** v5's height-sync state as a host reports it: the hashed flags and two log-derived heights. */
export interface HeightSyncView extends HeightSyncFlags {
  /** h_last: the height the last turn completed at, or the highest executor stamp when higher. */
  lastCompletedHeight: bigint;
  /** The start nonce of the newest heartbeat turn (0: none). */
  latestTurnStart: bigint;
}

export interface ApplyResult {
  root: Uint8Array;
  /** Warm keys this diff bound (record them with the diff). */
  warmKeyBindings: WarmKeyBinding[];
  /** Ids this diff sealed (auto-seal or settlement drain), ascending. */
  sealed: bigint[];
  /** The records as they were sealed (they leave the live set; keep them for observability). */
  sealedRecords: InferenceRecord[];
}

export interface BestEffortResult extends ApplyResult {
  applied: DevshardTx[];
  skipped: Array<{ tx: DevshardTx; error: DevshardError }>;
}
