/**
 * The devnet's devshard_escrow_params: the chain's compiled defaults (gonka 8a35022
 * inference-chain/x/inference/types/params.go, DefaultDevshardEscrowParams; the validation rate as
 * at 59b1ee7e), with what a devnet needs changed: its creators allowlisted, its own
 * min/max/nonce/price settings (DEVNET_*), the group size = its number of hosts (simulated and
 * external). The approved versions are not in params, as on chain v0.2.16 (its upgrade migrated the
 * list into a store of its own, zpoken/gonka@ef1a5efd app/upgrades/v0_2_16): the devnet's store
 * lists DEVNET_APPROVED_VERSIONS (approvedVersionEntries).
 */
import { sha256 } from '@cosmjs/crypto';
import { toHex, toUtf8 } from '@cosmjs/encoding';
import type { DevnetConfig } from './config.js';
import type { ApprovedVersion, EscrowParamsState } from './state.js';

/** t/params.go compiled defaults (validation rate: 59b1ee7e params.go:108, 1000; 5000 before). */
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
  validationRate: 1_000,
  voteThresholdFactor: 50,
  defaultInferenceSealGraceSeconds: 3_600,
  defaultAutoSealEveryNNonces: 150,
} as const;

/**
 * `params.validation_params.logprobs_mode` (params.proto ValidationParams field 26): t/params.go
 * `DefaultLogprobsMode = LogprobsModeProcessed = "processed_logprobs"` (gonka 59b1ee7e); hosts read it
 * (dapi chain_params_fetcher.go) and ask the model for those logprobs.
 */
export const LOGPROBS_MODE = 'processed_logprobs';

/** t/params.go DefaultDevshardInferenceSealGraceNonces: 10 × group size, floor 20. */
export const sealGraceNonces = (groupSize: number): number => Math.max(20, 10 * groupSize);

/**
 * The approved-versions store's entries for `names` (sorted by name, as the keeper's
 * GetApprovedVersions iterates them). On the chain `binary` is a download URL and `sha256` the hex
 * sha256 of that archive; the devnet runs no binary, so both are stand-ins of the same form.
 */
export function approvedVersionEntries(names: readonly string[]): ApprovedVersion[] {
  return [...new Set(names)].sort().map((name) => {
    const binary = `https://devnet.invalid/devshard/${encodeURIComponent(name)}/devshard.zip`;
    return { name, binary, sha256: toHex(sha256(toUtf8(binary))) };
  });
}

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
    maxNonce: config.maxNonce,
    defaultInferenceSealGraceNonces: sealGraceNonces(slotCount(config)),
  };
}

/**
 * Fills the fields a snapshot written before the full params existed lacks, and drops the params'
 * approved_versions an older snapshot carries (the store holds them now).
 */
export function completeParams(saved: Partial<EscrowParamsState> & { approvedVersions?: unknown }, config: DevnetConfig): EscrowParamsState {
  const { approvedVersions: _moved, ...rest } = saved;
  return { ...devnetParams(config, saved.allowedCreatorAddresses ?? []), ...rest } as EscrowParamsState;
}
