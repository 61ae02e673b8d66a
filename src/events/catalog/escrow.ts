/**
 * Escrow lifecycle events. Creation intents live in `escrow-create-<uuid>` until the chain names the
 * escrow; from EscrowCreated / EscrowImported on, everything about one escrow is in `escrow-<id>`.
 */
import type { Amount, ChainErrorInfo, EscrowRole, KeySource, ProtocolData, SettlementData, SlotInfo, SlotTally, TokenUsage } from './common.js';
import type { ReplacementReason } from './rotation.js';

/** Why a create was asked for; lets `explain` tell admin creates from rotation ones. */
export type CreateOrigin = 'admin' | 'rotation' | 'depletion';

/** The export an EscrowImported came from: the source gateway's name and time, and its last event. */
export interface ImportProvenance {
  /** DEVSHARD_INSTANCE_NAME of the source (the export's `source`). */
  source?: string;
  /** The export's `exported_at`. */
  exportedAt?: string;
  /** Global position and hash of the last exported event in the source's log. */
  lastPosition: number;
  lastHash: string;
}

/**
 * What an import from devshardctl's escrow state store adopted: where the store was, the diffs
 * replayed through the protocol replica (src/protocol/replay.ts), and the state they gave.
 */
export interface AdoptedFromDevshardctl {
  from: 'devshardctl';
  storagePath: string;
  /** The diffs replayed, nonces 1..lastNonce; the next request uses lastNonce + 1. */
  diffs: number;
  lastNonce: number;
  /** The replica's state root after the last diff (hex), equal to the diff's recorded post_state_root. */
  stateRoot: string;
  /** The replica's balance (deposit less costs, reservations of live inferences and protocol fees). */
  balance: Amount;
  fees: Amount;
  /** The state-root tag (the body's protocol_version, default "v2"). */
  protocolVersion: string;
  /** devshardctl's session status ("active", "settled", ...). */
  sessionStatus: string;
  /** Inferences started but not finished in any diff (their reservation stays in the balance). */
  openInferences: number;
}

export interface EscrowEventData {
  /** Write-ahead intent: signed, hash known, not yet broadcast (stream `escrow-create-<intentId>`). */
  EscrowCreateRequested: {
    intentId: string;
    model: string;
    amount: Amount;
    creator: string;
    keySource: KeySource;
    role: EscrowRole;
    epoch: number;
    /** Register for routing once created (admin `register: true`; always true for rotation). */
    register: boolean;
    origin: CreateOrigin;
    txHash: string;
    /** Base64 signed tx, so a restart can re-broadcast by hash instead of signing anew. */
    txBytes?: string;
    /** The protocol the escrow will speak (copied to its EscrowCreated). */
    protocol?: ProtocolData;
  };
  /** First event of `escrow-<escrowId>`. */
  EscrowCreated: {
    escrowId: string;
    intentId?: string;
    txHash: string;
    height: number;
    epoch: number;
    creator: string;
    amount: Amount;
    model: string;
    role: EscrowRole;
    slots: SlotInfo[];
    /** The protocol its session speaks; absent: v2 on the legacy route (a log older than versions). */
    protocol?: ProtocolData;
  };
  /** Last event of a failed intent stream. */
  EscrowCreateFailed: {
    intentId: string;
    model: string;
    role: EscrowRole;
    epoch: number;
    error: ChainErrorInfo;
    txHash?: string;
  };
  EscrowRegistered: { escrowId: string; model: string };
  /** First event of `escrow-<escrowId>` for an escrow whose off-chain state came from elsewhere. */
  EscrowImported: {
    escrowId: string;
    model: string;
    creator: string;
    amount: Amount;
    epoch: number;
    role: EscrowRole;
    /** Last used nonce at the source. */
    nonce: number;
    spent: Amount;
    slots: SlotInfo[];
    /** Always false at import (spec); EscrowActivated / EscrowRegistered makes it routable. */
    active: false;
    /** What each slot served at the source, so a settlement made here pays the hosts for it too. */
    hostStats?: SlotTally[];
    /** Where the state came from, for audit: the export's origin and its last event. */
    provenance?: ImportProvenance;
    /** An escrow adopted from devshardctl's state store (POST /v1/admin/devshards/import with storage_path). */
    adopted?: AdoptedFromDevshardctl;
    /** The protocol its session speaks; absent: v2 on the legacy route (a log older than versions). */
    protocol?: ProtocolData;
  };
  EscrowActivated: { escrowId: string };
  /**
   * Nonces up to `upTo` may be used by requests (docs/architecture.md, principle 6): a request leaves only once a
   * reservation covering its nonce is durable, so a crash can never lead to a nonce being used twice.
   * Taken in blocks ahead of use, so a chat request does not wait for an fsync of its own.
   */
  NoncesReserved: { upTo: number };
  /**
   * Recorded at start-up: the previous run reserved nonces up to `upTo` and may have used any of them
   * without its InferenceStarted reaching the log; the next request uses `upTo + 1`.
   */
  NoncesSkipped: { from: number; upTo: number; reason: string };
  /**
   * A clean stop with nothing in flight: every started request is recorded, so the reservation ends
   * at the last used nonce (`upTo`) and the next run continues right after it.
   */
  NoncesReleased: { upTo: number };
  /**
   * Usage a host reports it served on this escrow beyond what the log bills (requests whose start or
   * end a crash kept out of the log), billed after a restart to the host's slot. `cost` never
   * exceeds the unspent deposit (the reconciler clamps).
   */
  UsageRecovered: {
    slotId: number;
    cost: Amount;
    reason: string;
    /** The inference (its nonce) it is charged for, when one (the devshard protocol's Finish). */
    inferenceId?: number;
  };
  /** A request's start: its nonce is within a durable reservation (NoncesReserved) before it leaves. */
  InferenceStarted: {
    requestId: string;
    nonce: number;
    /** Client key id; null when the admin key was used. */
    clientKeyId: string | null;
    /** Worst-case cost reserved against the balance until the request ends. */
    reservedCost: Amount;
    inputTokens: number;
    maxTokens: number;
  };
  /** `cost` must not exceed the escrow's unspent deposit (the gateway clamps). */
  InferenceFinished: { requestId: string; nonce: number; usage: TokenUsage; cost: Amount };
  InferenceFailed: { requestId: string; nonce: number; reason: string; usage: TokenUsage; cost: Amount };
  /**
   * The starts and ends of chat requests on this escrow decided between two group commits, in the
   * order they were decided (what the gateway records; the three events above are what older logs
   * hold and what the statechart steps). Folding it is folding each entry as its own event, all or
   * none: it is accepted when every entry is accepted in turn, and then leaves the state where they
   * leave it. Starts only where the escrow takes new chat; ends wherever requests drain.
   * One event per escrow and commit instead of two per request: the log's cost is then paid per
   * escrow and batch (docs/lab/benchmarks-notebook.md, session 9), while every request's start and end keep their fields.
   */
  InferencesRecorded: { entries: InferenceEntry[] };
  /** Usable balance fell below the threshold (1,000,000 in the reference). */
  EscrowDepleted: { balance: Amount; threshold: Amount };
  /** The nonce reached the routing stop (about 19,800): no new chat. */
  EscrowRoutingStopped: { nonce: number; routingStop: number };
  EscrowFinalized: { settlement: SettlementData };
  /**
   * Write-ahead settle intent. A settle the drain reactor sends records which of its attempts this
   * is (`attempt`, 1 = the first) and the chain height it was made at (`height`), so a failure
   * found later by hash (the reconciler) is recorded, and retried, as one answered at once would be.
   * A settle the rotation task or the depletion check sends itself (not deferred) records the same
   * two fields and `retriedBy` (who retries it: its failure found later is recorded in
   * `rotation-<model>` as that owner records it, RotationFailed or DepletionReplacementFailed with
   * step 'settle') and, for the depletion check, the replacement's `reason`. Without `retriedBy`,
   * `attempt` and `height` name a drained attempt.
   */
  EscrowSettleRequested: {
    txHash: string;
    keySource: KeySource;
    txBytes?: string;
    origin: CreateOrigin;
    attempt?: number;
    height?: number;
    retriedBy?: 'rotation' | 'depletion';
    reason?: ReplacementReason;
  };
  /** Settle wanted but requests are still in flight; completed when they drain. */
  /** `txFee`: the settle's fee and gas override (admin body), for the drained settle to sign with. */
  EscrowSettleDeferred: { inFlight: number; origin: CreateOrigin; keySource?: KeySource; txFee?: { denom?: string; amount?: Amount; gasLimit?: Amount } };
  /**
   * Settled on chain. `refund` is the keeper's remainder (to the creator); `totalPayout` (host costs
   * plus fee shares) and `fees` from its event when read (deposit = totalPayout + refund).
   */
  EscrowSettled: { txHash: string; height: number; refund: Amount; totalPayout?: Amount; fees?: Amount };
  /**
   * A settle failed: its tx was refused (`txHash`, answered at once or found by the reconciler), or,
   * for a settle the drain reactor sent after requests drained, it failed before a tx was sent.
   * Drained settles only (all optional, so events recorded before drained retries replay unchanged,
   * as failures that are not retried): `attempt` is the drain reactor's attempt that failed (1 = the
   * first), `height` the chain height it was made at; `retryAtHeight`, set for a transient failure, is the height from which
   * it is tried again while the settle window is open (the escrow stays `settleDeferred`);
   * `windowClosed` records that a pending retry was given up because the window had closed
   * (nothing was sent to the chain).
   */
  EscrowSettleFailed: {
    reason: string;
    error?: ChainErrorInfo;
    txHash?: string;
    attempt?: number;
    height?: number;
    retryAtHeight?: number;
    windowClosed?: boolean;
  };
  EscrowDeactivated: { reason?: string };
  EscrowRemoved: Record<string, never>;
}

/** One request's start or end inside InferencesRecorded (keys in canonical order: data, type). */
export type InferenceEntry =
  | { data: EscrowEventData['InferenceStarted']; type: 'InferenceStarted' }
  | { data: EscrowEventData['InferenceFinished']; type: 'InferenceFinished' }
  | { data: EscrowEventData['InferenceFailed']; type: 'InferenceFailed' };

/** Events of an `escrow-<id>` stream (the creation-intent events live in their own streams). */
export type EscrowStreamEventType = Exclude<keyof EscrowEventData, 'EscrowCreateRequested' | 'EscrowCreateFailed'>;
