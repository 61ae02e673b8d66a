/**
 * The bind params of a session: the escrow's frozen values (DevshardEscrow 15–18, devshard_escrow.proto
 * at Z5 = zpoken/gonka@86cff503) over the live chain params. Sources: gonka 59b1ee7e
 * devshard/bridge/config.go `SessionConfigAtBind` (validation_rate from the escrow row, 0 → 1000) and
 * devshard/types/config.go `ApplyChainSessionBindParams` (the rest live); chain 59b1ee7e
 * inference-chain/x/inference/types/params.go:108 `DefaultDevshardValidationRate uint32 = 1000`.
 */
import { describe, expect, it } from 'vitest';
import { applyChainBindParams, bindParamsAtBind, DEFAULT_DEVSHARD_VALIDATION_RATE, sessionConfigFromEscrow } from '../../src/protocol/session-config.js';

const live = { refusalTimeout: 60n, executionTimeout: 1200n, validationRate: 5000, voteThresholdFactor: 50 };

describe('bindParamsAtBind', () => {
  it('the default validation rate is the chain\'s since v0.2.14', () => {
    expect(DEFAULT_DEVSHARD_VALIDATION_RATE).toBe(1000);
  });

  it('frozen non-zero values win over the live params', () => {
    expect(bindParamsAtBind({ validationRate: 3000, voteThresholdFactor: 67, refusalTimeout: 30n, executionTimeout: 900n }, live)).toEqual({
      validationRate: 3000,
      voteThresholdFactor: 67,
      refusalTimeout: 30n,
      executionTimeout: 900n,
    });
  });

  it('a frozen 0 (a legacy row): validation_rate → 1000, the others → the live param', () => {
    expect(bindParamsAtBind({ validationRate: 0, voteThresholdFactor: 0, refusalTimeout: 0n, executionTimeout: 0n }, live)).toEqual({
      validationRate: 1000,
      voteThresholdFactor: 50,
      refusalTimeout: 60n,
      executionTimeout: 1200n,
    });
  });

  it('a chain that knows only validation_rate (v0.2.14): the rest stays live', () => {
    expect(bindParamsAtBind({ validationRate: 2500 }, live)).toEqual({ ...live, validationRate: 2500 });
  });

  it('no frozen values (a chain before v0.2.14): the live params unchanged, as v2 hosts bound them', () => {
    expect(bindParamsAtBind(undefined, live)).toBe(live);
    expect(bindParamsAtBind({}, live)).toBe(live);
    expect(bindParamsAtBind(undefined, undefined)).toBeUndefined();
  });

  it('no live params: the frozen ones alone, unset members left out', () => {
    expect(bindParamsAtBind({ validationRate: 0, refusalTimeout: 45n }, undefined)).toEqual({ validationRate: 1000, refusalTimeout: 45n });
  });

  it('what the session config then holds: the frozen vote factor sets the threshold, the frozen timeouts the deadlines', () => {
    const n = 16;
    const cfg = applyChainBindParams(sessionConfigFromEscrow(n, {}), n, bindParamsAtBind({ validationRate: 0, voteThresholdFactor: 67, refusalTimeout: 0n, executionTimeout: 900n }, live)!);
    expect([cfg.validationRate, cfg.voteThreshold, cfg.refusalTimeout, cfg.executionTimeout]).toEqual([1000, 10, 60n, 900n]);
  });
});
