/** Devnet settings: explicit options win over environment variables, which win over defaults. */
import { fromBech32 } from '@cosmjs/encoding';
import { isPrivateKeyHex } from '../../config/private-key.js';
import { DEVNET_MODEL_DEFAULT } from '../../config/variables.js';
import { SUPPORTED_VERSION_NAMES } from '../../protocol/versions.js';
import type { AuthzGrant } from './state.js';

/**
 * A host the devnet does not run (DEVNET_EXTERNAL_HOSTS): any implementation of the host side. The
 * devnet lists it as a participant (`inference_url` = `url`) and gives it an escrow slot; the keeper
 * checks its settlement signatures against `address` like any slot's.
 */
export interface ExternalHost {
  /** bech32 `gonka1…` account address (the slot's address). */
  address: string;
  /** The host's inference_url: its base URL, no trailing slash. */
  url: string;
}

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
  /** Simulated hosts (slots 0..hosts-1). 0 is allowed when there are external hosts. */
  hosts?: number;
  /**
   * Hosts the devnet does not run, given slots after the simulated ones (DEVNET_EXTERNAL_HOSTS,
   * `addr@url,…`). Either the parsed list or the variable's text.
   */
  externalHosts?: ExternalHost[] | string;
  /**
   * Private keys of the simulated hosts (DEVNET_HOST_KEYS): host i uses entry i, an empty or missing
   * entry a generated key. 64 hex characters each. Never printed.
   */
  hostKeys?: (string | undefined)[] | string;
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
  /**
   * Names in the approved devshard versions' store (DEVNET_APPROVED_VERSIONS, comma-separated).
   * Default: every version the gateway speaks (SUPPORTED_VERSION_NAMES); an empty list (the variable
   * set to an empty string) lets the keeper accept any settlement version, as on the chain.
   */
  approvedVersions?: string[] | string;
  /** Cosmos authz grants at genesis (warm keys; default none). */
  warmKeyGrants?: AuthzGrant[];
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
  /** Simulated hosts: slots 0..hosts-1. */
  hosts: number;
  /** External hosts: slots hosts..hosts+externalHosts.length-1, in the order given. */
  externalHosts: ExternalHost[];
  /** Given keys of the simulated hosts (lowercase 64-hex, index = host), undefined = generated. */
  hostKeys: (string | undefined)[];
  tokenDelayMs: number;
  statePath: string | undefined;
  startHeight: number;
  autoBlocks: boolean;
  pruneUnsettled: boolean;
  /** The approved devshard versions' names at genesis; empty = any version. */
  approvedVersions: string[];
  warmKeyGrants: AuthzGrant[];
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

const BECH32_PREFIX = 'gonka';

/**
 * DEVNET_EXTERNAL_HOSTS: `addr@url` entries, comma-separated (spaces trimmed, empty entries ignored).
 * The address is a bech32 `gonka1…` account address (20 bytes), the URL an http(s) base URL without
 * query or fragment (a trailing slash is dropped). An address or URL given twice is refused.
 */
export function parseExternalHosts(value: string | undefined, name = 'DEVNET_EXTERNAL_HOSTS'): ExternalHost[] {
  const entries = listFrom(value) ?? [];
  const out: ExternalHost[] = [];
  entries.forEach((entry, i) => {
    const at = entry.indexOf('@');
    const where = `${name} entry ${i + 1}`;
    if (at <= 0 || at === entry.length - 1) throw new Error(`${where}: expected <gonka1 address>@<inference_url>`);
    const address = entry.slice(0, at).trim();
    const rawUrl = entry.slice(at + 1).trim();
    out.push({ address: checkAddress(address, where), url: checkUrl(rawUrl, where) });
  });
  return checkExternalHosts(out, name);
}

function checkAddress(address: string, where: string): string {
  let decoded: { prefix: string; data: Uint8Array };
  try {
    decoded = fromBech32(address, 128);
  } catch (e) {
    throw new Error(`${where}: address ${JSON.stringify(address)} is not bech32 (${(e as Error).message})`, { cause: e });
  }
  if (decoded.prefix !== BECH32_PREFIX) throw new Error(`${where}: address ${JSON.stringify(address)} has prefix "${decoded.prefix}", expected "${BECH32_PREFIX}"`);
  if (decoded.data.length !== 20) throw new Error(`${where}: address ${JSON.stringify(address)} holds ${decoded.data.length} bytes, an account address holds 20`);
  if (address !== address.toLowerCase()) throw new Error(`${where}: address ${JSON.stringify(address)} must be lowercase`);
  return address;
}

function checkUrl(raw: string, where: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`${where}: inference_url ${JSON.stringify(raw)} is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`${where}: inference_url ${JSON.stringify(raw)} must be http or https`);
  if (url.search !== '' || url.hash !== '') throw new Error(`${where}: inference_url ${JSON.stringify(raw)} must have no query or fragment`);
  if (url.username !== '' || url.password !== '') throw new Error(`${where}: inference_url must not carry credentials`);
  return url.href.replace(/\/+$/, '');
}

function checkExternalHosts(hosts: ExternalHost[], name: string): ExternalHost[] {
  const addresses = new Map<string, number>();
  const urls = new Map<string, number>();
  hosts.forEach((h, i) => {
    const a = addresses.get(h.address);
    if (a !== undefined) throw new Error(`${name}: address ${h.address} is given twice (entries ${a + 1} and ${i + 1}); each external host holds one slot`);
    const u = urls.get(h.url);
    if (u !== undefined) throw new Error(`${name}: inference_url ${h.url} is given twice (entries ${u + 1} and ${i + 1})`);
    addresses.set(h.address, i);
    urls.set(h.url, i);
  });
  return hosts;
}

/**
 * DEVNET_HOST_KEYS: 64-hex private keys, comma-separated; entry i is simulated host i's key, an empty
 * entry (`,,`) leaves that host's generated key. Errors name the entry, never its value.
 */
export function parseHostKeys(value: (string | undefined)[] | string | undefined, hosts: number, name = 'DEVNET_HOST_KEYS'): (string | undefined)[] {
  if (value === undefined) return [];
  const entries = typeof value === 'string' ? (value.trim() === '' ? [] : value.split(',')) : value;
  const keys = entries.map((e, i) => {
    const k = (e ?? '').trim().replace(/^0x/i, '');
    if (k === '') return undefined;
    if (!isPrivateKeyHex(k)) throw new Error(`${name} entry ${i + 1} must be 64 hex characters encoding a valid secp256k1 key (not zero, below the curve order)`);
    return k.toLowerCase();
  });
  while (keys.length > 0 && keys[keys.length - 1] === undefined) keys.pop();
  if (keys.length > hosts) throw new Error(`${name} has ${keys.length} entries but there are ${hosts} simulated hosts (DEVNET_HOSTS): entry i is host i's key`);
  const seen = new Map<string, number>();
  keys.forEach((k, i) => {
    if (k === undefined) return;
    const j = seen.get(k);
    if (j !== undefined) throw new Error(`${name} entries ${j + 1} and ${i + 1} are the same key: each simulated host needs its own`);
    seen.set(k, i);
  });
  return keys;
}

/**
 * DEVNET_APPROVED_VERSIONS: unset = every version the gateway speaks; set, its comma-separated names
 * (spaces trimmed, empty entries ignored), so an empty string is the empty list (any version).
 */
export function parseApprovedVersions(value: string[] | string | undefined, name = 'DEVNET_APPROVED_VERSIONS'): string[] {
  if (value === undefined) return [...SUPPORTED_VERSION_NAMES];
  const names = (typeof value === 'string' ? value.split(',') : value).map((s) => s.trim()).filter((s) => s !== '');
  for (const n of names) {
    // The keeper refuses a settlement version longer than 128 (k/devshard_settlement.go).
    if (n.length > 128) throw new Error(`${name}: version name ${JSON.stringify(n.slice(0, 20))}… is longer than 128 characters`);
  }
  return [...new Set(names)];
}

export function resolveDevnetConfig(options: DevnetOptions = {}): DevnetConfig {
  const env = options.env ?? process.env;
  const positive = (n: number, name: string): number => {
    if (n <= 0) throw new Error(`${name} must be positive`);
    return n;
  };
  const externalHosts =
    options.externalHosts === undefined
      ? parseExternalHosts(env.DEVNET_EXTERNAL_HOSTS)
      : typeof options.externalHosts === 'string'
        ? parseExternalHosts(options.externalHosts, 'externalHosts')
        : checkExternalHosts(options.externalHosts.map((h, i) => ({ address: checkAddress(h.address, `externalHosts entry ${i + 1}`), url: checkUrl(h.url, `externalHosts entry ${i + 1}`) })), 'externalHosts');
  const hosts = options.hosts ?? intFrom(env.DEVNET_HOSTS, 'DEVNET_HOSTS') ?? 3;
  if (!Number.isInteger(hosts) || hosts < 0) throw new Error('hosts must be a non-negative integer');
  if (hosts + externalHosts.length <= 0) throw new Error('DEVNET_HOSTS=0 needs DEVNET_EXTERNAL_HOSTS: an escrow needs at least one slot');
  const hostKeys = parseHostKeys(options.hostKeys ?? env.DEVNET_HOST_KEYS, hosts, options.hostKeys !== undefined ? 'hostKeys' : 'DEVNET_HOST_KEYS');
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
    hosts,
    externalHosts,
    hostKeys,
    tokenDelayMs: options.tokenDelayMs ?? intFrom(env.DEVNET_TOKEN_DELAY_MS, 'DEVNET_TOKEN_DELAY_MS') ?? 5,
    statePath: options.statePath ?? (env.DEVNET_STATE?.trim() || undefined),
    startHeight: positive(options.startHeight ?? 1, 'start height'),
    autoBlocks: options.autoBlocks ?? true,
    pruneUnsettled: options.pruneUnsettled ?? !['0', 'false', 'off', 'no'].includes((env.DEVNET_PRUNE_UNSETTLED ?? '').trim().toLowerCase()),
    approvedVersions:
      options.approvedVersions !== undefined ? parseApprovedVersions(options.approvedVersions, 'approvedVersions') : parseApprovedVersions(env.DEVNET_APPROVED_VERSIONS),
    warmKeyGrants: (options.warmKeyGrants ?? []).map((g) => ({ ...g })),
    logRequests: options.logRequests ?? false,
  };
}
