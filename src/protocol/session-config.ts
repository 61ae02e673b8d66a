/**
 * The session config frozen at bind (gonka 8a35022 devshard/types/config.go): escrow values
 * (price, fees, seal settings) and chain params (vote threshold, validation rate, timeouts).
 * Normalisation fills only the "0 means default" seal fields, as `NormalizeSessionConfig` does.
 */

export interface SessionConfig {
  /** int64 seconds; carried, no machine rule reads it. */
  refusalTimeout: bigint;
  /** int64 seconds; carried, no machine rule reads it. */
  executionTimeout: bigint;
  tokenPrice: bigint;
  createDevshardFee: bigint;
  feePerNonce: bigint;
  /** uint32: accept / invalid weight must exceed it. */
  voteThreshold: number;
  /** uint32 basis points; carried, validator sampling is host-local. */
  validationRate: number;
  inferenceSealGraceNonces: number;
  inferenceSealGraceSeconds: number;
  autoSealEveryNNonces: number;
}

/** `DefaultInferenceSealGraceSeconds`. */
export const DEFAULT_SEAL_GRACE_SECONDS = 3600;
/** `DefaultAutoSealEveryNNonces`. */
export const DEFAULT_AUTO_SEAL_EVERY_N_NONCES = 150;

/**
 * `DefaultInferenceSealGraceNonces(groupSize)`: groupSize × 1 with a floor of 20. The Go comment says
 * 10 × group, but the multiplier constant is 1; the chain's own default (10 × 16 = 160) is what
 * escrows usually carry, so this fallback applies only to escrows with 0.
 */
export const defaultSealGraceNonces = (groupSize: number): number => Math.max(groupSize, 20);

/** `NormalizeSessionConfig`. */
export function normalizeSessionConfig(cfg: SessionConfig, groupSize: number): SessionConfig {
  return {
    ...cfg,
    inferenceSealGraceNonces: cfg.inferenceSealGraceNonces === 0 ? defaultSealGraceNonces(groupSize) : cfg.inferenceSealGraceNonces,
    inferenceSealGraceSeconds: cfg.inferenceSealGraceSeconds === 0 ? DEFAULT_SEAL_GRACE_SECONDS : cfg.inferenceSealGraceSeconds,
    autoSealEveryNNonces: cfg.autoSealEveryNNonces === 0 ? DEFAULT_AUTO_SEAL_EVERY_N_NONCES : cfg.autoSealEveryNNonces,
  };
}

/** `ComputeVoteThreshold`: groupSize × factor / 100 (integer), or groupSize / 2 when factor is 0. */
export const computeVoteThreshold = (groupSize: number, factorPercent: number): number =>
  factorPercent === 0 ? Math.floor(groupSize / 2) : Math.floor((groupSize * factorPercent) / 100) >>> 0;

/** `DefaultSessionConfig(groupSize)`: the compiled defaults. */
export const defaultSessionConfig = (groupSize: number): SessionConfig =>
  normalizeSessionConfig(
    {
      refusalTimeout: 60n,
      executionTimeout: 1200n,
      tokenPrice: 1n,
      createDevshardFee: 10_000n,
      feePerNonce: 1_000n,
      voteThreshold: Math.floor(groupSize / 2),
      validationRate: 5000,
      inferenceSealGraceNonces: 0,
      inferenceSealGraceSeconds: 0,
      autoSealEveryNNonces: 0,
    },
    groupSize,
  );

/** Per-escrow values frozen on the escrow at create; 0 means "the compiled default" (`EscrowSessionFields`). */
export interface EscrowSessionFields {
  tokenPrice?: bigint;
  createDevshardFee?: bigint;
  feePerNonce?: bigint;
  inferenceSealGraceNonces?: number;
  inferenceSealGraceSeconds?: number;
  autoSealEveryNNonces?: number;
}

/** Chain params read once at bind; 0 means "not provided" except as noted (`LiveSessionBindParams`). */
export interface ChainBindParams {
  refusalTimeout?: bigint;
  executionTimeout?: bigint;
  /** Taken as is, 0 included (0 disables validator sampling). */
  validationRate?: number;
  /** Percent; 0 falls back to n / 2. */
  voteThresholdFactor?: number;
}

/** `SessionConfigFromEscrow`: the compiled defaults overlaid with the escrow's non-zero values. */
export function sessionConfigFromEscrow(groupSize: number, f: EscrowSessionFields): SessionConfig {
  const cfg = defaultSessionConfig(groupSize);
  const pos = <T extends bigint | number>(v: T | undefined, d: T): T => (v !== undefined && v > 0 ? v : d);
  return normalizeSessionConfig(
    {
      ...cfg,
      tokenPrice: pos(f.tokenPrice, cfg.tokenPrice),
      createDevshardFee: pos(f.createDevshardFee, cfg.createDevshardFee),
      feePerNonce: pos(f.feePerNonce, cfg.feePerNonce),
      inferenceSealGraceNonces: pos(f.inferenceSealGraceNonces, cfg.inferenceSealGraceNonces),
      inferenceSealGraceSeconds: pos(f.inferenceSealGraceSeconds, cfg.inferenceSealGraceSeconds),
      autoSealEveryNNonces: pos(f.autoSealEveryNNonces, cfg.autoSealEveryNNonces),
    },
    groupSize,
  );
}

/** `ApplyChainSessionBindParams`: the chain's governance values frozen into the config at bind. */
export function applyChainBindParams(cfg: SessionConfig, groupSize: number, p: ChainBindParams): SessionConfig {
  return normalizeSessionConfig(
    {
      ...cfg,
      validationRate: p.validationRate ?? 0,
      voteThreshold: computeVoteThreshold(groupSize, p.voteThresholdFactor ?? 0),
      refusalTimeout: p.refusalTimeout !== undefined && p.refusalTimeout > 0n ? p.refusalTimeout : cfg.refusalTimeout,
      executionTimeout: p.executionTimeout !== undefined && p.executionTimeout > 0n ? p.executionTimeout : cfg.executionTimeout,
    },
    groupSize,
  );
}
