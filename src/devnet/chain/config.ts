/** Devnet settings: explicit options win over environment variables, which win over defaults. */
import { DEVNET_MODEL_DEFAULT } from '../../config/variables.js';

export interface DevnetOptions {
  /** 0 = ephemeral. Default DEVNET_PORT or 26657. */
  port?: number;
  chainId?: string;
  blockTimeMs?: number;
  epochBlocks?: number;
  pocBlocks?: number;
  /** 64-hex private keys or `gonka1...` addresses; allowlisted and funded at genesis. */
  creators?: string[];
  creatorFunds?: bigint;
  minAmount?: bigint;
  /** Default 2^64-1: the devnet takes deposits across the whole uint64 range. */
  maxAmount?: bigint;
  maxEscrowsPerEpoch?: number;
  maxNonce?: number;
  tokenPrice?: bigint;
  models?: string[];
  hosts?: number;
  tokenDelayMs?: number;
  /** SQLite file for the state snapshot; unset = memory only. */
  statePath?: string;
  /** Height of the first block (default 1); tests use it to start near an epoch boundary. */
  startHeight?: number;
  /** Whether the block timer runs (default true); tests may drive blocks by hand instead. */
  autoBlocks?: boolean;
  /**
   * Prune unsettled escrows two epochs after theirs, as the real chain does (k/devshard_pruning.go).
   * Default on, as the real chain (DEVNET_PRUNE_UNSETTLED=0 turns it off); the gateway reads a
   * pruned escrow's `not found` as its closed settle window (src/gateway/escrows/pruned.ts).
   */
  pruneUnsettled?: boolean;
  /** fastify request logging (default false). */
  logRequests?: boolean;
  env?: NodeJS.ProcessEnv;
}

export interface DevnetConfig {
  port: number;
  chainId: string;
  blockTimeMs: number;
  epochBlocks: number;
  pocBlocks: number;
  creators: string[];
  creatorFunds: bigint;
  minAmount: bigint;
  maxAmount: bigint;
  maxEscrowsPerEpoch: number;
  maxNonce: number;
  tokenPrice: bigint;
  models: string[];
  hosts: number;
  tokenDelayMs: number;
  statePath: string | undefined;
  startHeight: number;
  autoBlocks: boolean;
  pruneUnsettled: boolean;
  logRequests: boolean;
}

export const DEFAULT_MODEL = DEVNET_MODEL_DEFAULT;

function intFrom(value: string | undefined, name: string): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer`);
  return n;
}

function bigFrom(value: string | undefined, name: string): bigint | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  if (!/^\d+$/.test(value.trim())) throw new Error(`${name} must be a non-negative integer`);
  return BigInt(value.trim());
}

function listFrom(value: string | undefined): string[] | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  return value.split(',').map((s) => s.trim()).filter((s) => s !== '');
}

export function resolveDevnetConfig(options: DevnetOptions = {}): DevnetConfig {
  const env = options.env ?? process.env;
  const positive = (n: number, name: string): number => {
    if (n <= 0) throw new Error(`${name} must be positive`);
    return n;
  };
  return {
    port: options.port ?? intFrom(env.DEVNET_PORT, 'DEVNET_PORT') ?? 26657,
    chainId: options.chainId ?? (env.CHAIN_ID?.trim() || 'shardgate-devnet'),
    blockTimeMs: positive(options.blockTimeMs ?? intFrom(env.DEVNET_BLOCK_TIME_MS, 'DEVNET_BLOCK_TIME_MS') ?? 1000, 'block time'),
    epochBlocks: positive(options.epochBlocks ?? intFrom(env.DEVNET_EPOCH_BLOCKS, 'DEVNET_EPOCH_BLOCKS') ?? 600, 'epoch blocks'),
    pocBlocks: options.pocBlocks ?? intFrom(env.DEVNET_POC_BLOCKS, 'DEVNET_POC_BLOCKS') ?? 60,
    creators: options.creators ?? listFrom(env.DEVNET_CREATORS) ?? [],
    creatorFunds: options.creatorFunds ?? bigFrom(env.DEVNET_CREATOR_FUNDS, 'DEVNET_CREATOR_FUNDS') ?? 10n ** 13n,
    minAmount: options.minAmount ?? bigFrom(env.DEVNET_MIN_AMOUNT, 'DEVNET_MIN_AMOUNT') ?? 1_000_000_000n,
    maxAmount: options.maxAmount ?? bigFrom(env.DEVNET_MAX_AMOUNT, 'DEVNET_MAX_AMOUNT') ?? 2n ** 64n - 1n,
    maxEscrowsPerEpoch:
      options.maxEscrowsPerEpoch ?? intFrom(env.DEVNET_MAX_ESCROWS_PER_EPOCH, 'DEVNET_MAX_ESCROWS_PER_EPOCH') ?? 500_000,
    maxNonce: options.maxNonce ?? intFrom(env.DEVNET_MAX_NONCE, 'DEVNET_MAX_NONCE') ?? 1_000_000,
    // 1000 ngonka per token: the minimum deposit (1e9) buys 1e6 tokens, and the gateway's depletion
    // threshold (1e6 ngonka) is 1000 tokens, about one more request.
    tokenPrice: options.tokenPrice ?? bigFrom(env.DEVNET_TOKEN_PRICE, 'DEVNET_TOKEN_PRICE') ?? 1000n,
    models: options.models ?? listFrom(env.DEVNET_MODELS) ?? [env.DEVSHARD_MODEL?.trim() || DEFAULT_MODEL],
    hosts: positive(options.hosts ?? intFrom(env.DEVNET_HOSTS, 'DEVNET_HOSTS') ?? 3, 'hosts'),
    tokenDelayMs: options.tokenDelayMs ?? intFrom(env.DEVNET_TOKEN_DELAY_MS, 'DEVNET_TOKEN_DELAY_MS') ?? 5,
    statePath: options.statePath ?? (env.DEVNET_STATE?.trim() || undefined),
    startHeight: positive(options.startHeight ?? 1, 'start height'),
    autoBlocks: options.autoBlocks ?? true,
    pruneUnsettled: options.pruneUnsettled ?? !['0', 'false', 'off', 'no'].includes((env.DEVNET_PRUNE_UNSETTLED ?? '').trim().toLowerCase()),
    logRequests: options.logRequests ?? false,
  };
}
