/**
 * Issue 41 item 1: a rotation failure keeps the chain's kind when a refusal carries it. The list of
 * kinds comes from chain/port.ts, so a kind added there (amount_out_of_range, version_not_approved
 * were missing from the hand-copied list) is recorded as itself, not as 'rejected'.
 */
import { describe, expect, it } from 'vitest';
import { CHAIN_ERROR_KINDS, ChainError } from '../../src/chain/port.js';
import { GatewayError } from '../../src/gateway/errors.js';
import { errorInfo } from '../../src/gateway/workers/rotation/steps.js';

describe('errorInfo', () => {
  it('keeps every chain error kind named by a refusal rule', () => {
    for (const kind of CHAIN_ERROR_KINDS) {
      expect(errorInfo(new GatewayError('chain_refused', kind, `the chain said ${kind}`)).kind).toBe(kind);
    }
    expect(errorInfo(new GatewayError('chain_refused', 'amount_out_of_range', 'escrow amount 5 out of range [10, 20]'))).toEqual({ kind: 'amount_out_of_range', message: 'escrow amount 5 out of range [10, 20]' });
  });

  it('records any other refusal as rejected, and a chain error as the chain said', () => {
    expect(errorInfo(new GatewayError('conflict', 'no_active_escrow', 'none')).kind).toBe('rejected');
    expect(errorInfo(new ChainError('version_not_approved', 'version v9 is not approved')).kind).toBe('version_not_approved');
  });
});
