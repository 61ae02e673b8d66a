/**
 * The devnet's whole application state as one plain object, so a block can be applied to a copy
 * and a snapshot is just JSON (bigints tagged, see `toSnapshot`).
 */
import type { EscrowSlot } from '../../chain/port.js';

export interface AccountState {
  address: string;
  accountNumber: number;
  sequence: number;
  /** Base64 compressed secp256k1 key; set by the account's first signed tx. */
  pubKey?: string;
  /** Balance in ngonka (the devnet has one denom). */
  balance: bigint;
}

export interface EscrowState {
  id: number;
  creator: string;
  amount: bigint;
  settled: boolean;
  epochIndex: number;
  modelId: string;
  slots: EscrowSlot[];
  createdHeight: number;
  settledHeight?: number;
  refund?: bigint;
  /** Hex app hash of the block the escrow was created in (DevshardEscrow.app_hash). */
  appHash?: string;
  /** Frozen at creation from the params (DevshardEscrow fields 9–14). */
  tokenPrice?: bigint;
  createDevshardFee?: bigint;
  feePerNonce?: bigint;
  inferenceSealGraceNonces?: number;
  inferenceSealGraceSeconds?: number;
  autoSealEveryNNonces?: number;
  /**
   * Chain params frozen at creation (DevshardEscrow 15–18: validation_rate, vote_threshold_factor,
   * refusal_timeout, execution_timeout); undefined on escrows of a snapshot older than them (served as
   * 0, a legacy row).
   */
  validationRate?: number;
  voteThresholdFactor?: number;
  refusalTimeout?: bigint;
  executionTimeout?: bigint;
}

export interface TxEvent {
  type: string;
  attributes: { key: string; value: string }[];
}

export interface TxResult {
  code: number;
  codespace: string;
  log: string;
  /** Base64 TxMsgData. */
  data: string;
  gasWanted: string;
  gasUsed: string;
  events: TxEvent[];
}

export interface TxRecord {
  hash: string;
  height: number;
  index: number;
  /** Base64 TxRaw bytes. */
  tx: string;
  result: TxResult;
}

export interface BlockRecord {
  time: string;
  /** Hashes of the txs in the block, in order. */
  txs: string[];
}

/** params.proto DevshardApprovedVersion{name 1, binary 2, sha256 3}. */
export interface ApprovedVersion {
  name: string;
  binary: string;
  sha256: string;
}

/** A cosmos authz grant (GenericAuthorization of one message type) from `granter` to `grantee`. */
export interface AuthzGrant {
  granter: string;
  grantee: string;
  msgTypeUrl: string;
  /** RFC 3339; none = never expires. */
  expiration?: string;
}

/**
 * params.proto DevshardEscrowParams (field numbers in rest-routes.ts). approved_versions (7) is kept
 * empty as on chain v0.2.16, whose upgrade moved the list into a store of its own
 * (`ChainState.approvedVersions`).
 */
export interface EscrowParamsState {
  minAmount: bigint;
  maxAmount: bigint;
  maxEscrowsPerEpoch: number;
  groupSize: number;
  /** Empty = anyone may create and settle (k/params.go IsAllowedEscrowCreator). */
  allowedCreatorAddresses: string[];
  tokenPrice: bigint;
  maxNonce: number;
  devshardRequestsEnabled: boolean;
  defaultInferenceSealGraceNonces: number;
  defaultInferenceSealGraceSeconds: number;
  createDevshardFee: bigint;
  feePerNonce: bigint;
  refusalTimeout: bigint;
  executionTimeout: bigint;
  validationRate: number;
  voteThresholdFactor: number;
  defaultAutoSealEveryNNonces: number;
}

export interface ChainState {
  chainId: string;
  genesisTime: string;
  height: number;
  latestBlockTime: string;
  nextAccountNumber: number;
  nextEscrowId: number;
  accounts: Record<string, AccountState>;
  /** Host operator keys (base64 compressed) by address: the chain knows its participants. */
  hostPubKeys: Record<string, string>;
  escrows: Record<string, EscrowState>;
  escrowsPerEpoch: Record<string, number>;
  /**
   * Unordered-tx replay protection (ADR 070): `signer/timeout` → timeout (ms since epoch), kept
   * until a block's time passes the timeout. Absent in snapshots older than unordered support.
   */
  unorderedNonces?: Record<string, number>;
  txs: Record<string, TxRecord>;
  /** Only blocks that carried txs are kept; empty blocks are synthesized on query. */
  blocks: Record<string, BlockRecord>;
  params: EscrowParamsState;
  /**
   * The approved devshard versions' store (chain v0.2.16, keyed by name); empty = the keeper accepts
   * any settlement version (k/devshard_settlement.go). Filled on restore for older snapshots.
   */
  approvedVersions: ApprovedVersion[];
  /** Cosmos authz grants (warm keys: src/chain/warm-keys.ts). Filled on restore for older snapshots. */
  authzGrants: AuthzGrant[];
  models: string[];
  /** Gas fees and protocol settlement fees collected (burnt, for the devnet). */
  feesCollected: bigint;
  /**
   * Origin the devnet last served on. Escrow slot URLs are absolute (they name the hosts mounted on
   * this server), so a restored devnet listens there again, or rewrites them when it cannot.
   */
  baseUrl?: string;
}

export function toSnapshot(state: ChainState): string {
  return JSON.stringify(state, (_k, v: unknown) => (typeof v === 'bigint' ? { $bigint: v.toString() } : v));
}

export function fromSnapshot(json: string): ChainState {
  return JSON.parse(json, (_k, v: unknown) =>
    v !== null && typeof v === 'object' && '$bigint' in v ? BigInt((v as { $bigint: string }).$bigint) : v,
  ) as ChainState;
}

/** Returns the account, creating an empty one (next account number) the first time it is funded. */
export function ensureAccount(state: ChainState, address: string): AccountState {
  let account = state.accounts[address];
  if (!account) {
    account = { address, accountNumber: state.nextAccountNumber++, sequence: 0, balance: 0n };
    state.accounts[address] = account;
  }
  return account;
}
