/**
 * The devshard protocol session of an escrow (the gateway's only host path), in its own stream
 * `devshard-session-<escrowId>`: every diff the gateway composed and signed, in nonce order, with the
 * warm-key bindings applying it made, so `replay(params, recordedDiffs)` (src/protocol/replay.ts)
 * rebuilds the escrow's replica from the log alone (after a restart, or to audit the roots the hosts
 * signed). The projections do not read this stream.
 */

/** A warm key bound to a slot while a diff was applied (gonka 8a35022 devshard/user/session.go WarmKeyDelta). */
export interface WarmKeyBindingData {
  slot: number;
  warm: string;
}

export interface DevshardEventData {
  /**
   * One diff as sent to the hosts (durable before the request that carries it first leaves).
   * Byte fields are standard base64: `txs` is the wire form proto DiffContent{nonce, txs}.
   */
  DevshardDiffSent: {
    escrowId: string;
    /** uint64 as a decimal string. */
    nonce: string;
    txs: string;
    postStateRoot: string;
    userSig: string;
    /** The warm-key bindings applying the diff made (usually none). */
    warmKeyBindings: WarmKeyBindingData[];
  };
}
