/**
 * The due-retry decision shared by the rotation task and the depletion check: pure, from the
 * recorded retries, the escrows' states and epochs, and one chain reading.
 */
import { describe, expect, it } from 'vitest';
import { ChainError } from '../../src/chain/port.js';
import { GatewayError } from '../../src/gateway/errors.js';
import { DRAINED_PENDING, drainedSettleRetries, dueSettleRetries, retryAfter, settleWindowClosedError, type RetryEscrow } from '../../src/gateway/workers/rotation/settle-retry.js';
import type { EscrowContext, EscrowState } from '../../src/machines/index.js';

const escrow = (id: string, state: RetryEscrow['state'] = 'finalized', epoch: number | null = 0): RetryEscrow => ({ id, state, epoch });

describe('dueSettleRetries', () => {
  const retries = { '1': { attempt: 2, retryAtHeight: 90 } };

  it('is due once the chain reached retryAtHeight, not before, with the next attempt number', () => {
    expect(dueSettleRetries(retries, [escrow('1')], { height: 89, epoch: 0 })).toEqual([]);
    expect(dueSettleRetries(retries, [escrow('1')], { height: 90, epoch: 0 })).toEqual([{ kind: 'retry_settle', escrowId: '1', attempt: 3 }]);
    // the next epoch is still inside the window
    expect(dueSettleRetries(retries, [escrow('1')], { height: 150, epoch: 1 })).toEqual([{ kind: 'retry_settle', escrowId: '1', attempt: 3 }]);
  });

  it('gives up once the window closed, even before retryAtHeight; an escrow of unknown epoch is left to the chain', () => {
    const closed = dueSettleRetries({ '1': { attempt: 1, retryAtHeight: 500 } }, [escrow('1')], { height: 205, epoch: 2 });
    expect(closed).toEqual([{ kind: 'settle_window_closed', escrowId: '1', escrowEpoch: 0, attempts: 1 }]);
    expect(settleWindowClosedError(closed[0] as Extract<(typeof closed)[0], { kind: 'settle_window_closed' }>, 2)).toEqual({
      kind: 'wrong_epoch',
      message: 'settle window closed: escrow 1 belongs to epoch 0 and the chain is in epoch 2 (a settle is accepted only in epochs 0 and 1); not retried after 1 failed attempt(s)',
    });
    expect(dueSettleRetries(retries, [escrow('1', 'finalized', null)], { height: 205, epoch: 2 })).toEqual([{ kind: 'retry_settle', escrowId: '1', attempt: 3 }]);
  });

  it('needs nothing for escrows that left the settle-pending states or are unknown; answers every due one', () => {
    for (const state of ['settled', 'settling', 'settleDeferred', 'removed'] as const) {
      expect(dueSettleRetries(retries, [escrow('1', state)], { height: 95, epoch: 0 })).toEqual([]);
    }
    expect(dueSettleRetries(retries, [], { height: 95, epoch: 0 })).toEqual([]);
    const two = { '2': { attempt: 1, retryAtHeight: 80 }, '1': { attempt: 2, retryAtHeight: 90 }, '3': { attempt: 1, retryAtHeight: 99 } };
    expect(dueSettleRetries(two, [escrow('1', 'depleted'), escrow('2'), escrow('3')], { height: 95, epoch: 0 }).map((d) => d.escrowId).sort()).toEqual(['1', '2']);
  });
});

describe('retryAfter', () => {
  it('a transient failure is retried after the block backoff from the height it was made at; a refusal or a local error is not', () => {
    expect(retryAfter(new ChainError('unreachable', 'down'), 1, 100)).toEqual({ attempt: 1, retryAtHeight: 102 });
    expect(retryAfter(new ChainError('timeout', 'slow'), 3, 100)).toEqual({ attempt: 3, retryAtHeight: 108 });
    expect(retryAfter(new GatewayError('upstream', 'host_signatures_missing', 'only 1 of 3 hosts signed'), 9, 100)).toEqual({ attempt: 9, retryAtHeight: 132 });
    expect(retryAfter(new ChainError('wrong_epoch', 'too late'), 1, 100)).toEqual({ attempt: 1 });
    expect(retryAfter(new GatewayError('invalid', 'creator_key_unavailable', 'no key'), 2, 100)).toEqual({ attempt: 2 });
  });
});

describe('drainedSettleRetries', () => {
  const e = (state: EscrowState, settleRetry?: EscrowContext['settleRetry'], epoch: number | null = 0) => ({ state, context: { epoch, ...(settleRetry ? { settleRetry } : {}) } });

  it('takes the retries escrows record in their own state while deferred; due like the others, in that state only', () => {
    const escrows = new Map([
      ['1', e('settleDeferred', { attempt: 2, retryAtHeight: 90 })],
      ['2', e('settleDeferred')], // deferred, still draining or never attempted: not a retry
      ['3', e('settled', { attempt: 1, retryAtHeight: 50 })], // settled since: its last retry is history
      ['4', e('settleDeferred', { attempt: 1, retryAtHeight: 80 }, 3)],
    ]);
    const drained = drainedSettleRetries(escrows);
    expect(drained).toEqual({
      retries: { '1': { attempt: 2, retryAtHeight: 90 }, '4': { attempt: 1, retryAtHeight: 80 } },
      escrows: [{ id: '1', state: 'settleDeferred', epoch: 0 }, { id: '4', state: 'settleDeferred', epoch: 3 }],
    });
    expect(dueSettleRetries(drained.retries, drained.escrows, { height: 79, epoch: 1 }, DRAINED_PENDING)).toEqual([]);
    expect(dueSettleRetries(drained.retries, drained.escrows, { height: 90, epoch: 1 }, DRAINED_PENDING)).toEqual([
      { kind: 'retry_settle', escrowId: '1', attempt: 3 },
      { kind: 'retry_settle', escrowId: '4', attempt: 2 },
    ]);
    expect(dueSettleRetries(drained.retries, drained.escrows, { height: 85, epoch: 2 }, DRAINED_PENDING)).toEqual([
      { kind: 'settle_window_closed', escrowId: '1', escrowEpoch: 0, attempts: 2 },
      { kind: 'retry_settle', escrowId: '4', attempt: 2 },
    ]);
    // The rotation's default states leave a deferred escrow to the drain reactor.
    expect(dueSettleRetries(drained.retries, drained.escrows, { height: 95, epoch: 0 })).toEqual([]);
  });
});
