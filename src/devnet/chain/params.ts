/**
 * The devnet's devshard_escrow_params: the chain's compiled defaults (gonka 8a35022
 * inference-chain/x/inference/types/params.go, DefaultDevshardEscrowParams), with what a devnet
 * needs changed: its creators allowlisted, its own min/max/nonce/price settings (DEVNET_*), the
 * group size = its number of hosts (simulated and external), and approved_versions listing v1 and v2 (at 8a35022 the upgrade
 * handlers register only v1; the devnet lists v2 too, so the gateway's "v2" settlements pass).
 */
import type { DevnetConfig } from './config.js';
import type { ApprovedVersion, EscrowParamsState } from './state.js';

/** t/params.go compiled defaults. */
export const COMPILED_DEFAULTS = {
  minAmount: 5_000_000_000n,
  maxAmount: 10_000_000_000n,
  maxEscrowsPerEpoch: 100,
  groupSize: 16,
  tokenPrice: 1n,
  maxNonce: 20_000,
  devshardRequestsEnabled: true,
  createDevshardFee: 10_000n,
  feePerNonce: 1_000n,
  refusalTimeout: 60n,
  executionTimeout: 1_200n,
  validationRate: 5_000,
  voteThresholdFactor: 50,
  defaultInferenceSealGraceSeconds: 3_600,
  defaultAutoSealEveryNNonces: 150,
} as const;

/** t/params.go DefaultDevshardInferenceSealGraceNonces: 10 × group size, floor 20. */
export const sealGraceNonces = (groupSize: number): number => Math.max(20, 10 * groupSize);

export const DEVNET_APPROVED_VERSIONS: ApprovedVersion[] = [
  { name: 'v1', binary: 'devshard-v1', sha256: '' },
  { name: 'v2', binary: 'devshard-v2', sha256: '' },
];

/** Slots per escrow: the simulated hosts, then the external ones. */
export const slotCount = (config: Pick<DevnetConfig, 'hosts' | 'externalHosts'>): number => config.hosts + config.externalHosts.length;

export function devnetParams(config: DevnetConfig, allowed: string[]): EscrowParamsState {
  return {
    ...COMPILED_DEFAULTS,
    minAmount: config.minAmount,
    maxAmount: config.maxAmount,
    maxEscrowsPerEpoch: config.maxEscrowsPerEpoch,
    groupSize: slotCount(config),
    allowedCreatorAddresses: allowed,
    tokenPrice: config.tokenPrice,
    approvedVersions: DEVNET_APPROVED_VERSIONS.map((v) => ({ ...v })),
    maxNonce: config.maxNonce,
    defaultInferenceSealGraceNonces: sealGraceNonces(slotCount(config)),
  };
}

/** Fills the fields a snapshot written before the full params existed lacks. */
export function completeParams(saved: Partial<EscrowParamsState>, config: DevnetConfig): EscrowParamsState {
  return { ...devnetParams(config, saved.allowedCreatorAddresses ?? []), ...saved } as EscrowParamsState;
}
