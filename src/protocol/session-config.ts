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

/**
 * `DefaultDevshardValidationRate` of the chain since v0.2.14 (gonka 59b1ee7e
 * inference-chain/x/inference/types/params.go:108, and devshard/types/config.go
 * `DefaultValidationRate`): what a host binds for an escrow row whose frozen validation_rate is 0.
 */
export const DEFAULT_DEVSHARD_VALIDATION_RATE = 1000;

/**
 * The bind params of a session: the values frozen on its escrow at creation (DevshardEscrow 15–18,
 * `ChainEscrow.frozen`) win over the live chain params (`live`, read at bind), as hosts since chain
 * v0.2.14 bind them (gonka 59b1ee7e devshard/bridge/config.go `SessionConfigAtBind` takes
 * validation_rate from the escrow; Z5 devshard/bridge/config.go takes all four from it).
 * - validation_rate: frozen non-zero wins; a frozen 0 (a legacy row) is DEFAULT_DEVSHARD_VALIDATION_RATE;
 *   not served at all (a chain before v0.2.14) → the live param, as v2 hosts bound it.
 * - vote_threshold_factor, refusal_timeout, execution_timeout: frozen non-zero wins, else the live param.
 * No frozen values at all: `live` unchanged. Pure; `applyChainBindParams` applies the result.
 */
export function bindParamsAtBind(frozen: ChainBindParams | undefined, live: ChainBindParams | undefined): ChainBindParams | undefined {
  if (!frozen || Object.keys(frozen).length === 0) return live;
  const l = live ?? {};
  const validationRate =
    frozen.validationRate === undefined ? l.validationRate : frozen.validationRate > 0 ? frozen.validationRate : DEFAULT_DEVSHARD_VALIDATION_RATE;
  const voteThresholdFactor = frozen.voteThresholdFactor !== undefined && frozen.voteThresholdFactor > 0 ? frozen.voteThresholdFactor : l.voteThresholdFactor;
  const refusalTimeout = frozen.refusalTimeout !== undefined && frozen.refusalTimeout > 0n ? frozen.refusalTimeout : l.refusalTimeout;
  const executionTimeout = frozen.executionTimeout !== undefined && frozen.executionTimeout > 0n ? frozen.executionTimeout : l.executionTimeout;
  return {
    ...(refusalTimeout !== undefined ? { refusalTimeout } : {}),
    ...(executionTimeout !== undefined ? { executionTimeout } : {}),
    ...(validationRate !== undefined ? { validationRate } : {}),
    ...(voteThresholdFactor !== undefined ? { voteThresholdFactor } : {}),
  };
}
