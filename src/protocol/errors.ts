/**
 * The refusals of the devshard state machine, with the exact texts hosts answer.
 * Source: gonka 8a35022 devshard/types/errors.go (the sentinels), devshard/state/machine.go (the
 * `fmt.Errorf("%w: …")` details); v5's additions from zpoken/gonka@86cff503 ("Z5"):
 * types/errors.go, heightsync/logplane.go (the log plane's `INVALID(…)` sentinels),
 * heightsync/anchor.go (`ErrInvalidConfig`). A refusal's `message` is Go's `err.Error()`; `code`
 * names the sentinel it wraps (`errors.Is`), without the `Err` prefix.
 */

/** Sentinel texts by code (devshard/types/errors.go). */
export const DEVSHARD_ERRORS = {
  InvalidNonce: 'invalid nonce: must be sequential',
  InvalidUserSig: 'invalid user signature',
  InvalidProposerSig: 'invalid proposer signature: not a group member',
  InvalidExecutorSig: 'invalid executor signature',
  InsufficientBalance: 'insufficient escrow balance',
  MultipleStartMsgs: 'at most one MsgStartInference per diff',
  SessionFinalizing: 'session is finalizing: no new inferences',
  InferenceNotFound: 'inference not found',
  InferenceSealed: 'inference sealed: late validation not accepted',
  InvalidTransition: 'invalid status transition',
  SelfValidation: 'validator cannot be the executor',
  WrongExecutorSlot: 'executor_slot does not match assigned executor',
  InsufficientVotes: 'insufficient votes for timeout',
  InvalidTimeoutReason: 'timeout reason does not match inference status',
  DuplicateVote: 'duplicate vote from slot',
  AlreadyFinalizing: 'session is already finalizing',
  EmptyTx: 'devshard tx has no message set',
  DuplicateInferenceID: 'duplicate inference ID',
  InvalidVoteSig: 'invalid vote signature',
  InvalidInferenceID: 'inference_id must equal diff nonce',
  CostOverflow: 'cost calculation overflows uint64',
  SlotNotInGroup: 'slot not in group',
  PostStateRootMismatch: 'post_state_root does not match computed state root',
  EscrowIDMismatch: 'escrow_id does not match session',
  // v5 (Z5 types/errors.go)
  MultipleForceHeightSyncTurnMsgs: 'at most one MsgForceHeightSyncTurn per diff',
  MaxTokensBelowFloor: 'max_tokens below min_tokens floor',
  FloorNotRestored: 'height-sync floor not restored',
  // v5 log plane (Z5 heightsync/logplane.go): each refuses the whole diff.
  HeightRegression: 'INVALID(height_regression)',
  BadFraming: 'INVALID(bad_framing)',
  AckSigInvalid: 'INVALID(ack_sig_invalid)',
  AckCausality: 'INVALID(ack_causality)',
  // v5 (Z5 heightsync/anchor.go): a forced turn whose anchor_k is below its slots_num.
  InvalidSchedulerConfig: 'heightsync: invalid scheduler config (K < SlotsNum)',
  // Z5 refuses a malformed MsgForceHeightSyncTurn with a bare fmt.Errorf (no sentinel); the text is the detail alone.
  InvalidForceHeightSyncTurn: 'MsgForceHeightSyncTurn',
} as const;

export type DevshardErrorCode = keyof typeof DEVSHARD_ERRORS;

/** A refusal by the state machine: the diff (or tx) is not applied, the state is unchanged. */
export class DevshardError extends Error {
  override readonly name = 'DevshardError';
  /**
   * @param code the sentinel (`errors.Is` target)
   * @param detail the text Go appends after `": "`, if any
   * @param prefix a wrapping context Go puts in front (`"mandatory start inference"`), if any
   */
  constructor(
    readonly code: DevshardErrorCode,
    detail?: string,
    prefix?: string,
  ) {
    const base = detail === undefined ? DEVSHARD_ERRORS[code] : `${DEVSHARD_ERRORS[code]}: ${detail}`;
    super(prefix === undefined ? base : `${prefix}: ${base}`);
  }

  /** The same refusal wrapped in a context, as Go's `fmt.Errorf("ctx: %w", err)`. */
  wrap(prefix: string): DevshardError {
    const out = new DevshardError(this.code);
    out.message = `${prefix}: ${this.message}`;
    return out;
  }
}

export const refuse = (code: DevshardErrorCode, detail?: string): DevshardError => new DevshardError(code, detail);

/** A refusal Go makes without a sentinel: `message` is the whole text (`fmt.Errorf` with no `%w`). */
export function refuseBare(code: DevshardErrorCode, message: string): DevshardError {
  const out = new DevshardError(code);
  out.message = message;
  return out;
}
