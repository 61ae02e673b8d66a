import { sha256 } from '@cosmjs/crypto';
import { toBase64, toHex, toUtf8 } from '@cosmjs/encoding';
import { CosmosChainClient, type CosmosChainClientOptions } from '../../src/chain/cosmos-client.js';
import { startDevnet, type Devnet } from '../../src/devnet/chain/index.js';
import type { DevnetOptions } from '../../src/devnet/chain/config.js';
import { deterministicKeyHex } from '../../src/chain/keys.js';
import { hostStatsHash, Phase, signMessage, stateRoot, stateSignatureBytes } from '../../src/protocol/index.js';
import type { HostIdentity } from '../../src/devnet/hosts/chain-view.js';
import type { Settlement } from '../../src/chain/port.js';

export const MODEL = 'Qwen/Qwen3-235B-A22B-Instruct-2507-FP8';
export const CREATOR_KEYS = [deterministicKeyHex('test/creator/a'), deterministicKeyHex('test/creator/b')];

/** A devnet on an ephemeral loopback port with fast blocks, isolated from the caller's env. */
export function startTestDevnet(options: DevnetOptions = {}): Promise<Devnet> {
  return startDevnet({
    port: 0,
    blockTimeMs: 25,
    creators: CREATOR_KEYS,
    models: [MODEL],
    hosts: 3,
    env: {},
    ...options,
  });
}

export function clientFor(devnet: Devnet, overrides: Partial<CosmosChainClientOptions> = {}): CosmosChainClient {
  return new CosmosChainClient({
    rpcUrl: devnet.rpcUrl,
    restUrl: devnet.url,
    nodeBaseUrl: devnet.url,
    chainId: devnet.chainId,
    broadcastPollIntervalMs: 20,
    broadcastTimeoutMs: 10_000,
    ...overrides,
  });
}

/** The devnet's default min_amount of an escrow deposit (DEVNET_MIN_AMOUNT). */
export const MIN_AMOUNT = 1_000_000_000n;

/** A devnet and a chain client on it, for one describe block. */
export async function startDevnetAndClient(options: DevnetOptions = {}): Promise<{ devnet: Devnet; client: CosmosChainClient }> {
  const devnet = await startTestDevnet(options);
  return { devnet, client: clientFor(devnet) };
}

export async function stopDevnetAndClient(t: { devnet?: Devnet; client?: CosmosChainClient }): Promise<void> {
  t.client?.close();
  await t.devnet?.close();
}

/**
 * A settlement in the devshard protocol's format (tag "v2" unless `tag` says otherwise, as the real
 * keeper verifies it, k/devshard_settlement.go): the root sha256(host_stats hash ‖ fees ‖ rest_hash ‖
 * sha256(tag) ‖ 0x02), each given host's 65-byte signature over sha256(StateSignatureContent{root,
 * escrow id, nonce}).
 */
export function signedSettlement(
  escrowId: string,
  hosts: HostIdentity[],
  opts: { costs?: bigint[]; fees?: bigint; nonce?: number; signers?: HostIdentity[]; seed?: string; missed?: number[]; invalid?: number[]; tag?: string } = {},
): Settlement {
  const signers = opts.signers ?? hosts;
  const hostStats = hosts.map((h, i) => ({ slotId: h.index, missed: opts.missed?.[i] ?? 0, invalid: opts.invalid?.[i] ?? 0, cost: opts.costs?.[i] ?? 0n, requests: 1 }));
  const fees = opts.fees ?? 0n;
  const nonce = opts.nonce ?? 3;
  const restHash = sha256(toUtf8(`rest/${escrowId}/${opts.seed ?? ''}`));
  const stats = hostStats.map((h) => ({ ...h, requiredValidations: 0, completedValidations: 0 }));
  const root = stateRoot(hostStatsHash(stats), fees, restHash, opts.tag ?? 'v2', Phase.Settlement);
  const signed = stateSignatureBytes(root, escrowId, BigInt(nonce));
  return {
    escrowId,
    nonce,
    stateRoot: toHex(root),
    restHash: toHex(restHash),
    hostStats,
    signatures: signers.map((h) => ({ slotId: h.index, signature: toBase64(signMessage(signed, h.privateKey)) })),
    fees,
    version: 2,
    ...(opts.tag !== undefined ? { stateRootVersion: opts.tag } : {}),
  };
}
