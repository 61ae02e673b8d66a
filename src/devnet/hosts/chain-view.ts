import type { ChainBindParams, EscrowSessionFields } from '../../protocol/session-config.js';

/**
 * What the simulated hosts may see of the devnet chain (the devnet passes an implementation in).
 * Real hosts read the same facts from their chain node.
 */
export interface DevnetEscrowView {
  id: string;
  creator: string;
  modelId: string;
  settled: boolean;
  epochIndex: number;
  slots: { slotId: number; host: string; url: string }[];
  /** The escrow amount (the host protocol binds its state machine to it; a host refuses a session without it). */
  amount?: bigint;
  /** Values frozen on the escrow at create (price, fees, seal settings); absent: the token price only. */
  session?: EscrowSessionFields;
  /** Chain params frozen on the escrow at create (DevshardEscrow 15-18); absent on a legacy row. */
  frozen?: ChainBindParams;
}

/** A block header as a host's chain oracle reads it (Z5 common/chainoracle/blocks `Header`). */
export interface BlockHeader {
  chainId: string;
  height: bigint;
  /** The block hash (a Tendermint sha256: 32 bytes). */
  hash: Uint8Array;
}

export interface DevnetChainView {
  escrow(id: string): DevnetEscrowView | undefined;
  /**
   * The chain's latest block, as a v5 host's block oracle reports it; absent: the host runs without
   * an oracle (Z5 hosts without DEVSHARD_CHAINORACLE_URL: no stamps, no height_sync, no seed RPC).
   */
  latestBlock?(): BlockHeader | undefined;
  /** The header at `height` (at or below the latest), for a host told to sign an old height. */
  blockAt?(height: bigint): BlockHeader | undefined;
  /** Price of one token in the smallest coin unit. */
  tokenPrice(): bigint;
  /** Chain params a host freezes into a session at bind (vote factor, timeouts, validation rate); absent: defaults. */
  sessionBindParams?(): ChainBindParams;
}

/** One simulated host: its chain identity and where it is mounted on the devnet server. */
export interface HostIdentity {
  index: number;
  /** bech32 `gonka...` address. */
  address: string;
  privateKey: Uint8Array;
  /** Compressed secp256k1 public key. */
  pubKey: Uint8Array;
  /** Path prefix on the devnet server, e.g. `/hosts/0`; the host's base URL is origin + prefix. */
  prefix: string;
}
