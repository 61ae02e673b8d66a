import type { ChainBindParams, EscrowSessionFields } from '../protocol/session-config.js';
/**
 * What the gateway needs from the chain. One implementation (cosmos-client.ts) talks to any
 * CometBFT/Cosmos node over RPC + REST with @cosmjs/stargate; the embedded devnet is such a node.
 *
 * Transactions are split into prepare (sign offline, hash known) and broadcast, so the gateway can
 * record the intent with its tx hash *before* anything leaves (write-ahead, docs/architecture.md, principle 3),
 * and reconcile after a crash with `findTx(hash)`.
 */

/** devshard_escrow_params (params.proto): what the gateway reads of it. */
export interface EscrowParams {
  minAmount: bigint;
  maxAmount: bigint;
  maxEscrowsPerEpoch: number;
  groupSize: number;
  maxNonce: number;
  /** Empty = anyone may create and settle. */
  allowedCreatorAddresses: string[];
  /** Price of one token in the smallest coin unit. */
  tokenPrice: bigint;
  /**
   * Names of the approved devshard versions; empty = the keeper accepts any settlement version tag.
   * Chain v0.2.16+: the approved-versions store (`GET …/devshard_approved_versions`); an older chain
   * (no such route): `devshard_escrow_params.approved_versions[].name`.
   */
  approvedVersions: string[];
  createDevshardFee: bigint;
  feePerNonce: bigint;
  /** What hosts freeze into a session at bind: timeouts, validation rate, vote threshold factor. */
  bind?: ChainBindParams;
}

/** Read from the public API's /v1/epochs/latest (as devshardctl's PoC gate). */
export interface EpochInfo {
  height: number;
  epochIndex: number;
  /** latest_epoch.poc_start_block_height. */
  pocStartHeight?: number;
  /** The public API's phase (Inference, PoCGenerate, …). */
  phase?: string;
  /**
   * active_confirmation_poc_event.phase (CONFIRMATION_POC_GRACE_PERIOD, …; the enum's number mapped
   * to its name as devshardctl's phase_gate.go does); undefined when no confirmation PoC event is active.
   */
  confirmationPocPhase?: string;
  /** Height of the next set_new_validators boundary (end of the current epoch). */
  nextBoundaryHeight: number;
  blocksUntilBoundary: number;
  /** True while the chain is inside the PoC window that follows a boundary. */
  pocActive: boolean;
  /** Height at which the current (or next) PoC window ends. */
  pocEndHeight: number;
  /** Blocks per epoch (epoch_stages next_poc_start − poc_start), when the stages give it. */
  epochLength?: number;
}

export interface EscrowSlot {
  slotId: number;
  /** Host operator address (bech32): the escrow's `slots[slotId]`. */
  host: string;
  /** The participant's inference_url; '' when it has none (the slot is unavailable). */
  url: string;
}

export interface ChainEscrow {
  id: string;
  creator: string;
  amount: bigint;
  settled: boolean;
  epochIndex: number;
  modelId: string;
  slots: EscrowSlot[];
  /** Price, fees and seal settings frozen on the escrow at creation (DevshardEscrow 8, 10–14; 0 = default). */
  session?: EscrowSessionFields;
  /**
   * Chain params frozen on the escrow at creation (DevshardEscrow 15 validation_rate, 16
   * vote_threshold_factor, 17 refusal_timeout, 18 execution_timeout; chain v0.2.14+ for 15, later
   * for 16–18). Only the members the chain served are set (0 = a legacy row: unset); absent when it
   * served none. The session binds them with `bindParamsAtBind` (protocol/session-config.ts).
   */
  frozen?: ChainBindParams;
}

export interface HostStat {
  slotId: number;
  missed: number;
  invalid: number;
  /** Cost the host served, smallest coin unit. */
  cost: bigint;
  requests: number;
}

export interface SlotSignature {
  slotId: number;
  /** Base64 64-byte r||s secp256k1 signature by the slot's host over sha256(stateRoot bytes). */
  signature: string;
}

/** Everything a settle transaction carries (produced by finalize). */
export interface Settlement {
  escrowId: string;
  /** Last used nonce (0 when no request was served). */
  nonce: number;
  /** Hex sha256 over the settlement's canonical content; hosts sign it. */
  stateRoot: string;
  /** Hex hash of the rest of the off-chain state (request log digest). */
  restHash: string;
  hostStats: HostStat[];
  signatures: SlotSignature[];
  fees: bigint;
  /** Settlement format version. */
  version: number;
  /** The session's state-root tag (`state_root_and_protocol_version`); absent: `v${version}`. */
  stateRootVersion?: string;
}

/**
 * A per-transaction override of the configured fee and gas (devshardctl's admin bodies:
 * `fee_denom`, `fee_amount`, `gas_limit`, gateway.go newGatewayRESTChainTxClient). What is not
 * given stays as configured.
 */
export interface TxFeeOverride {
  denom?: string;
  amount?: bigint;
  gasLimit?: bigint;
}

/** The fee and gas limit a tx is signed with. */
export interface EffectiveTxFee {
  denom: string;
  amount: bigint;
  gasLimit: bigint;
}

export interface PreparedTx {
  /** Upper-case hex sha256 of the signed TxRaw bytes, as CometBFT names it. */
  txHash: string;
  /** Base64 of the signed TxRaw bytes, so an intent event can carry them for a retry by hash. */
  txBytes: string;
  creator: string;
}

export interface TxOutcome {
  txHash: string;
  height: number;
  /** 0 = success; otherwise the chain's ABCI error code. */
  code: number;
  codespace: string;
  rawLog: string;
  events: { type: string; attributes: { key: string; value: string }[] }[];
}

/** The kinds of chain failure, as a list (a recorded failure's kind is one of them). */
export const CHAIN_ERROR_KINDS = [
  'not_allowlisted',
  /** The keeper's `escrow amount X out of range [min, max]`. */
  'amount_out_of_range',
  /** Older logs only (before the real texts were mapped). */
  'below_min_amount',
  'insufficient_funds',
  'epoch_limit',
  'already_settled',
  'wrong_epoch',
  'bad_signatures',
  'wrong_settler',
  'nonce_too_high',
  /** The settlement's version tag is not among the approved devshard versions (a non-empty list). */
  'version_not_approved',
  'overspent',
  'not_found',
  'bad_sequence',
  'unreachable',
  'timeout',
  'rejected',
] as const;

export type ChainErrorKind = (typeof CHAIN_ERROR_KINDS)[number];

/** A typed chain failure the gateway records as an event and maps to an HTTP answer. */
export class ChainError extends Error {
  constructor(
    readonly kind: ChainErrorKind,
    message: string,
    /** precheck: refused by the gateway before any tx was signed (no fee spent). */
    readonly detail: { code?: number; codespace?: string; rawLog?: string; txHash?: string; precheck?: boolean } = {},
  ) {
    super(message);
    this.name = 'ChainError';
  }
}

export interface CreateEscrowResult {
  escrowId: string;
  txHash: string;
  height: number;
  escrow: ChainEscrow;
}

export interface SettleEscrowResult {
  txHash: string;
  height: number;
  /** What went back to the creator, when the chain reports it. */
  refund: bigint;
}

export interface ChainPort {
  chainId(): Promise<string>;
  /** Forgets cached participant URLs (all, or one address): the next escrow read looks them up again. */
  forgetParticipants?(address?: string): void;
  height(): Promise<number>;
  epoch(): Promise<EpochInfo>;
  params(): Promise<EscrowParams>;
  escrow(id: string): Promise<ChainEscrow | null>;
  balance(address: string, denom?: string): Promise<bigint>;
  /** Governance model ids ({node_base}/v1/governance/models). */
  models(): Promise<string[]>;
  /**
   * Whether `cold` granted `warm` its warm-key marker (cosmos authz): the v0.2.15 marker
   * `/inference.inference.MsgClaimRewards`, else the legacy `/inference.inference.MsgStartInference`.
   */
  warmKeyGranted(cold: string, warm: string): Promise<boolean>;
  /** bech32 address of a 64-hex private key (pure; no network). */
  addressOf(privateKeyHex: string): Promise<string>;

  /** `fee` overrides the configured fee and gas for this tx only (signed into its AuthInfo). */
  prepareCreateEscrow(privateKeyHex: string, amount: bigint, modelId: string, fee?: TxFeeOverride): Promise<PreparedTx>;
  prepareSettleEscrow(privateKeyHex: string, settlement: Settlement, fee?: TxFeeOverride): Promise<PreparedTx>;
  /**
   * Broadcasts (idempotent by hash: an already-known tx is not an error) and waits for inclusion.
   * Resolves with the outcome even when the tx failed on chain (code != 0); throws ChainError
   * 'unreachable' / 'timeout' when the outcome is unknown: ask `findTx` later.
   */
  broadcast(tx: PreparedTx): Promise<TxOutcome>;
  findTx(txHash: string): Promise<TxOutcome | null>;
  /** Turns a failed outcome into a typed error (kind from the raw log / code). */
  errorOf(outcome: TxOutcome): ChainError;
  /**
   * The fee a tx pays (the configured one, or with `override` applied), when the implementation
   * knows it: pre-checks add it to the deposit.
   */
  txFee?(override?: TxFeeOverride): EffectiveTxFee;
  /** Reads the escrow id (create) from a successful outcome. */
  createdEscrowId(outcome: TxOutcome): string;
  /** Reads the refund (settle) from a successful outcome. */
  settledRefund(outcome: TxOutcome): bigint;
  /**
   * The money of a settle, from the keeper's `devshard_escrow_settled` event: total_payout (host
   * costs plus fee shares), fees, remainder (to the creator); deposit = total_payout + remainder.
   */
  settledAmounts?(outcome: TxOutcome): { totalPayout: bigint; fees: bigint; remainder: bigint } | undefined;
}
