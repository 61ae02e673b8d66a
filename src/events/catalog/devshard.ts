/**
 * The devshard protocol session of an escrow (the gateway's only host path), in its own stream
 * `devshard-session-<escrowId>`: every diff the gateway composed and signed, in nonce order, with the
 * warm-key bindings applying it made, so `replay(params, recordedDiffs)` (src/protocol/replay.ts)
 * rebuilds the escrow's replica from the log alone (after a restart, or to audit the roots the hosts
 * signed). The projections do not read this stream.
 *
 * Before the first diff of each run, DevshardSessionOpened records the chain facts the session was
 * bound to (creator, amount, slots, the escrow's frozen session fields, the chain's bind params), so
 * `shardgate verify` / `replay` / `explain` rebuild the replica from the log with no chain at hand.
 */
import type { Amount, ProtocolData } from './common.js';

/** A warm key bound to a slot while a diff was applied (gonka 8a35022 devshard/user/session.go WarmKeyDelta). */
export interface WarmKeyBindingData {
  slot: number;
  warm: string;
}

/** Values frozen on the escrow at create (gonka EscrowSessionFields); absent or 0 = the compiled default. */
export interface DevshardSessionFieldsData {
  tokenPrice?: Amount;
  createDevshardFee?: Amount;
  feePerNonce?: Amount;
  inferenceSealGraceNonces?: number;
  inferenceSealGraceSeconds?: number;
  autoSealEveryNNonces?: number;
}

/** The chain's session params read at bind (gonka LiveSessionBindParams); int64 seconds as decimal strings. */
export interface DevshardBindParamsData {
  refusalTimeout?: string;
  executionTimeout?: string;
  validationRate?: number;
  voteThresholdFactor?: number;
}

export interface DevshardEventData {
  /**
   * The facts a session was bound to, recorded when the gateway opens it (the first call of a run),
   * before any diff of that run; not recorded again while they stay the same. Logs written before
   * this event have diffs without it: verify then checks nonces and signatures only.
   */
  DevshardSessionOpened: {
    escrowId: string;
    creator: string;
    amount: Amount;
    /** Slot id → host address and inference URL, in slot order. */
    slots: { host: string; url: string }[];
    session: DevshardSessionFieldsData;
    /** Absent: the protocol defaults (as the devnet uses). */
    bind?: DevshardBindParamsData;
    /** The version, route and state-root tag of the session; absent: v2 on `/v1/devshard`, tag "v2". */
    protocol?: ProtocolData;
  };
  /**
   * Host txs the gateway took from a host's answer (`devshard_meta.mempool`: the executor's
   * ConfirmStart and Finish, validations, votes) and had not seen before, for later diffs. Recorded
   * when taken, without waiting: after a restart the session's pending set is these minus the txs
   * the recorded diffs carried, so a Finish taken just before a crash still reaches a diff even
   * when its host has gone too. `txs`: standard base64 of each DevshardTx's proto bytes.
   */
  DevshardHostTxsReceived: {
    escrowId: string;
    /** The host's inference URL. */
    host: string;
    txs: string[];
  };
  /**
   * How far a host has applied the escrow's diffs: the nonce and state_hash of its latest receipt
   * (equal to our root at that nonce, or the answer was refused). Recorded as the host's
   * acknowledged nonce moves, at most once a second per host, and at the end of a run, so
   * `verify` and `/v1/status` tell the diffs we composed from the diffs the hosts applied.
   */
  DevshardHostAcknowledged: {
    escrowId: string;
    /** The host's inference URL. */
    host: string;
    nonce: number;
    /** Hex. */
    stateHash: string;
  };
  /**
   * A host refused a session request (a non-200 answer): its status and text, and the rule when it
   * refuses the escrow's protocol (route retired or unsupported, state-root tag). Recorded when it
   * differs from the host's previous refusal, so a host that refuses every request is one event.
   */
  DevshardHostRefused: {
    escrowId: string;
    host: string;
    status: number;
    message: string;
    rule?: string;
  };
  /**
   * v5: the session's height seed reached its quorum (`ok`) or was missed (the chat gate refuses
   * then): `POST …/height-sync` to each host, the latest verdict per host. Recorded as it moves.
   */
  DevshardHeightSeeded: {
    escrowId: string;
    state: 'ok' | 'missed' | 'pending';
    seeded: number;
    slots: number;
    outcomes: { host: string; verdict: string; reason: string }[];
  };
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
