import { describe, expect, it } from 'vitest';
import type { CatalogEvent, ChainInputs } from '../../src/events/catalog.js';
import { explainRotation, formatExplain } from '../../src/projections/rotation-explain.js';
import { record } from '../machines/events.js';

const M = 'm1';
const chain = (height: number, epoch: number): ChainInputs => ({ height, epoch, nextBoundaryHeight: (epoch + 1) * 100, blocksUntilBoundary: (epoch + 1) * 100 - height, pocActive: false });
const c7 = chain(785, 7);
const refusal = { kind: 'insufficient_funds' as const, message: 'spendable balance 5ngonka is smaller than 1000000000ngonka', code: 5, codespace: 'sdk' };
const rot = (event: CatalogEvent) => ({ streamId: `rotation-${M}`, event });
const esc = (id: string, event: CatalogEvent) => ({ streamId: `escrow-${id}`, event });
const intent = (id: string, event: CatalogEvent) => ({ streamId: `escrow-create-${id}`, event });
const usage = { promptTokens: 1, completionTokens: 1, totalTokens: 2 };

/** A recorded failed rotation: the temporary create refused, regulars promoted, a settle waiting on requests. */
const log = record([
  esc('5', { type: 'EscrowCreated', data: { escrowId: '5', txHash: 'A', height: 700, epoch: 7, creator: 'c', amount: '1000000000', model: M, role: 'regular', slots: [] } }),
  esc('6', { type: 'EscrowCreated', data: { escrowId: '6', txHash: 'B', height: 701, epoch: 7, creator: 'c', amount: '1000000000', model: M, role: 'regular', slots: [] } }),
  // Registered, so routable: the machine takes requests only then (explain counts them by its rules).
  esc('6', { type: 'EscrowRegistered', data: { escrowId: '6', model: M } }),
  rot({ type: 'RotationPhaseStarted', data: { model: M, phase: 1, chain: c7, target: 1, existing: 2 } }),
  rot({ type: 'RotationCreateDecided', data: { model: M, role: 'temporary', chain: c7, target: 1, existing: 2, intentIds: ['i-1'] } }),
  intent('i-1', { type: 'EscrowCreateRequested', data: { intentId: 'i-1', model: M, amount: '1000000000', creator: 'c', keySource: { kind: 'env', name: 'K' }, role: 'temporary', epoch: 7, register: true, origin: 'rotation', txHash: 'T1' } }),
  intent('i-1', { type: 'EscrowCreateFailed', data: { intentId: 'i-1', model: M, role: 'temporary', epoch: 7, error: refusal, txHash: 'T1' } }),
  rot({ type: 'RotationFailed', data: { model: M, step: 'create_temporary', role: 'temporary', chain: c7, error: refusal, suppress: true, intentId: 'i-1' } }),
  rot({ type: 'RotationPromoted', data: { model: M, chain: c7, escrowIds: ['5'] } }),
  // Two starts recorded together (as the gateway records them), the end of one on its own (as older logs do).
  esc('6', {
    type: 'InferencesRecorded',
    data: {
      entries: [
        { type: 'InferenceStarted', data: { requestId: 'r1', nonce: 1, clientKeyId: null, reservedCost: '10', inputTokens: 1, maxTokens: 1 } },
        { type: 'InferenceStarted', data: { requestId: 'r2', nonce: 2, clientKeyId: null, reservedCost: '10', inputTokens: 1, maxTokens: 1 } },
      ],
    },
  }),
  rot({ type: 'RotationSettleDecided', data: { model: M, role: 'regular', chain: c7, escrowIds: ['6'] } }),
  esc('6', { type: 'EscrowSettleDeferred', data: { inFlight: 2, origin: 'rotation', keySource: { kind: 'env', name: 'K' } } }),
  esc('6', { type: 'InferenceFinished', data: { requestId: 'r1', nonce: 1, usage, cost: '2' } }),
  rot({ type: 'RotationPhaseCompleted', data: { model: M, phase: 1, chain: c7, created: 1, promoted: 1, settleDecided: 1 } }),
  rot({ type: 'DepletionReplacementDecided', data: { model: M, escrowId: '5', reason: 'depleted', chain: chain(790, 7), intentId: 'd-1' } }),
  rot({ type: 'DepletionReplacementFailed', data: { model: M, escrowId: '5', reason: 'depleted', chain: chain(790, 7), error: refusal, suppress: true } }),
]);

describe('explain rotation', () => {
  it('given a recorded failed rotation, it names the step, the chain reason, the suppression and the settle waiting on requests', () => {
    const x = explainRotation(log);
    expect(x.cycles).toHaveLength(1);
    const cycle = x.cycles[0]!;
    expect(cycle).toMatchObject({ model: M, epoch: 7, status: 'in_progress', stage: 'waiting_poc', promoted: ['5'] });
    expect(cycle.failures).toEqual([expect.objectContaining({ step: 'create_temporary', role: 'temporary', suppressed: true, intentId: 'i-1', error: refusal })]);
    expect(cycle.settles).toEqual([{ escrowId: '6', role: 'regular', state: 'deferred', inFlight: 1 }]);
    expect(x.replacements).toEqual([expect.objectContaining({ escrowId: '5', reason: 'depleted', suppressed: true, failure: refusal })]);

    const text = formatExplain(x);
    expect(text).toContain('cycle of epoch 7 (boundary at height 800): in progress (waiting poc) with FAILURES');
    expect(text).toContain('temporary escrow create refused by the chain: insufficient_funds: spendable balance 5ngonka');
    expect(text).toContain('step create_temporary (temporary): the chain said insufficient_funds');
    expect(text).toContain(`temporary creates for ${M} in epoch 7`);
    expect(text).toContain('escrow 6 (regular): waiting on 1 in-flight request(s)');
    expect(text).toContain('escrow 5 (depleted) at height 790, epoch 7: FAILED: insufficient_funds');
    // in log order
    const positions = [...text.matchAll(/#(\d+) /g)].map((m) => Number(m[1]));
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
  });

  it('filters by model and epoch; an empty selection says so', () => {
    expect(explainRotation(log, { model: 'other' }).cycles).toEqual([]);
    expect(explainRotation(log, { epoch: 8 }).cycles).toEqual([]);
    expect(explainRotation(log, { model: M, epoch: 7 }).cycles).toHaveLength(1);
    expect(formatExplain(explainRotation(log, { epoch: 3 }))).toMatch(/No rotation is recorded/);
  });

  describe('settle retries', () => {
    const c0 = chain(85, 0);
    const down = { kind: 'unreachable' as const, message: 'chain RPC unreachable at http://127.0.0.1:1/: 503' };
    const start = [
      esc('3', { type: 'EscrowCreated', data: { escrowId: '3', txHash: 'A', height: 10, epoch: 0, creator: 'c', amount: '1000000000', model: M, role: 'regular', slots: [] } }),
      rot({ type: 'RotationPhaseStarted', data: { model: M, phase: 1, chain: c0, target: 0, existing: 1 } }),
      rot({ type: 'RotationPromoted', data: { model: M, chain: c0, escrowIds: [] } }),
      rot({ type: 'RotationSettleDecided', data: { model: M, role: 'regular', chain: c0, escrowIds: ['3'] } }),
      rot({ type: 'RotationFailed', data: { model: M, step: 'settle', role: 'regular', chain: c0, error: down, suppress: false, escrowId: '3', attempt: 1, retryAtHeight: 87 } }),
      rot({ type: 'RotationPhaseCompleted', data: { model: M, phase: 1, chain: c0, created: 0, promoted: 0, settleDecided: 1 } }),
      rot({ type: 'RotationFailed', data: { model: M, step: 'settle', role: 'regular', chain: chain(88, 0), error: down, suppress: false, escrowId: '3', attempt: 2, retryAtHeight: 92 } }),
    ];

    it('a settle retried after the phase and then settled: every attempt in the cycle that decided it, the cycle not failed', () => {
      const x = explainRotation(
        record([
          ...start,
          esc('3', { type: 'EscrowSettleRequested', data: { txHash: 'S', keySource: { kind: 'env', name: 'K' }, txBytes: 'AA==', origin: 'rotation' } }),
          esc('3', { type: 'EscrowSettled', data: { txHash: 'S', height: 93, refund: '999000000' } }),
        ]),
      );
      const cycle = x.cycles[0]!;
      expect(cycle.failures.map((f) => [f.attempt, f.retryAtHeight])).toEqual([
        [1, 87],
        [2, 92],
      ]);
      expect(cycle.settles).toEqual([{ escrowId: '3', role: 'regular', state: 'settled', inFlight: 0, reason: `unreachable: ${down.message}` }]);
      const text = formatExplain(x);
      expect(text).toContain('FAILED settle of escrow 3 (attempt 2) at height 88, epoch 0: unreachable');
      expect(text).toContain('transient, tried again from height 92 while the settle window is open (settle window: epochs 0 and 1)');
      expect(text).toContain('escrow 3 settled on chain at height 93');
      expect(text).toContain('in progress (waiting poc)\n'); // no "with FAILURES": recovered
      expect(text).toContain('Failures (all recovered):');
      expect(text).toContain('step settle of escrow 3 attempt 2 (regular): no answer from the chain (unreachable: chain RPC unreachable');
      expect(text).toContain('; transient, settled on a later attempt');
    });

    it('a retry still waiting is listed with the height it waits for', () => {
      const text = formatExplain(explainRotation(record(start)));
      expect(text).toContain('with FAILURES');
      expect(text).toContain('escrow 3 (regular): last attempt failed (unreachable: chain RPC unreachable');
      expect(text).toContain('attempt 3 from height 92 while the settle window is open');
    });

    it('a retry given up because the settle window closed says so, and that nothing was sent', () => {
      const message = 'settle window closed: escrow 3 belongs to epoch 0 and the chain is in epoch 2 (a settle is accepted only in epochs 0 and 1); not retried after 2 failed attempt(s)';
      const x = explainRotation(
        record([...start, rot({ type: 'RotationFailed', data: { model: M, step: 'settle', role: 'regular', chain: chain(205, 2), error: { kind: 'wrong_epoch', message }, suppress: false, escrowId: '3', windowClosed: true } })]),
      );
      expect(x.cycles[0]!.settles[0]).toMatchObject({ escrowId: '3', state: 'failed' });
      expect(x.cycles[0]!.failures.at(-1)).toMatchObject({ windowClosed: true, escrowId: '3' });
      const text = formatExplain(x);
      expect(text).toContain(`GAVE UP settle of escrow 3 at height 205, epoch 2: ${message}; the unused deposit can no longer be settled on chain`);
      expect(text).toContain(`step settle of escrow 3 (regular): ${message}\n`);
      expect(text).not.toContain('Settles not finished');
    });
  });

  describe('settle retries of a depletion replacement\'s old escrow', () => {
    const c0 = chain(85, 0);
    const down = { kind: 'unreachable' as const, message: 'chain RPC unreachable at http://127.0.0.1:1/: 503' };
    const failed = (height: number, attempt: number, retryAtHeight: number) =>
      rot({ type: 'DepletionReplacementFailed', data: { model: M, escrowId: '3', reason: 'depleted', chain: chain(height, 0), error: down, suppress: false, step: 'settle', attempt, retryAtHeight } });
    const start = [
      esc('3', { type: 'EscrowCreated', data: { escrowId: '3', txHash: 'A', height: 10, epoch: 0, creator: 'c', amount: '1000000000', model: M, role: 'regular', slots: [] } }),
      rot({ type: 'DepletionReplacementDecided', data: { model: M, escrowId: '3', reason: 'depleted', chain: c0, intentId: 'd-1' } }),
      esc('4', { type: 'EscrowCreated', data: { escrowId: '4', intentId: 'd-1', txHash: 'B', height: 86, epoch: 0, creator: 'c', amount: '1000000000', model: M, role: 'regular', slots: [] } }),
      failed(86, 1, 88),
      failed(88, 2, 92),
    ];

    it('a retry still waiting: the replacement succeeded, the old escrow\'s settle waits for its next attempt; each failure listed', () => {
      const x = explainRotation(record(start));
      expect(x.replacements).toEqual([expect.objectContaining({ escrowId: '3', replacementId: '4', failure: null, settle: expect.objectContaining({ state: 'retrying', retry: { attempt: 3, atHeight: 92 } }) })]);
      expect(x.replacements[0]!.settle!.failures.map((f) => [f.attempt, f.retryAtHeight])).toEqual([
        [1, 88],
        [2, 92],
      ]);
      const text = formatExplain(x);
      expect(text).toContain('escrow 3 (depleted) at height 85, epoch 0: replaced by escrow 4; settle of escrow 3 not finished: last attempt failed (unreachable: chain RPC unreachable');
      expect(text).toContain('attempt 3 from height 92 while the settle window is open');
      expect(text).toContain('settle of escrow 3 attempt 2: no answer from the chain (unreachable: chain RPC unreachable at http://127.0.0.1:1/: 503); transient, retried from height 92');
    });

    it('settled on a later attempt: said once, the failures recovered', () => {
      const text = formatExplain(
        explainRotation(
          record([
            ...start,
            esc('3', { type: 'EscrowSettleRequested', data: { txHash: 'S', keySource: { kind: 'env', name: 'K' }, txBytes: 'AA==', origin: 'depletion' } }),
            esc('3', { type: 'EscrowSettled', data: { txHash: 'S', height: 93, refund: '999000000' } }),
          ]),
        ),
      );
      expect(text).toContain('replaced by escrow 4; escrow 3 settled on chain at height 93 after 2 failed settle attempt(s)');
      expect(text).toContain('settle of escrow 3 attempt 1: no answer from the chain (unreachable: chain RPC unreachable at http://127.0.0.1:1/: 503); transient, settled on a later attempt');
    });

    it('given up because the settle window closed, nothing sent; a chain refusal is not retried', () => {
      const message = 'settle window closed: escrow 3 belongs to epoch 0 and the chain is in epoch 2 (a settle is accepted only in epochs 0 and 1); not retried after 2 failed attempt(s)';
      const gaveUp = rot({ type: 'DepletionReplacementFailed', data: { model: M, escrowId: '3', reason: 'depleted', chain: chain(205, 2), error: { kind: 'wrong_epoch', message }, suppress: false, step: 'settle', windowClosed: true } });
      const x = explainRotation(record([...start, gaveUp]));
      expect(x.replacements[0]!.settle).toMatchObject({ state: 'failed' });
      expect(x.replacements[0]!.settle!.failures.at(-1)).toMatchObject({ windowClosed: true });
      expect(formatExplain(x)).toContain(`replaced by escrow 4; GAVE UP settle of escrow 3: ${message}; the unused deposit can no longer be settled on chain`);

      const refused = { kind: 'wrong_epoch' as const, message: 'settlement outside the escrow epoch window', code: 1107 };
      const once = rot({ type: 'DepletionReplacementFailed', data: { model: M, escrowId: '3', reason: 'depleted', chain: chain(205, 2), error: refused, suppress: false, step: 'settle', attempt: 1 } });
      const text = formatExplain(explainRotation(record([...start.slice(0, 3), once])));
      expect(text).toContain('settle of escrow 3 FAILED: wrong_epoch: settlement outside the escrow epoch window; its settle window has closed');
      expect(text).toContain('settle of escrow 3 attempt 1: the chain said wrong_epoch: settlement outside the escrow epoch window; settle window closed, not retried');
    });
  });

  describe('retries of a settle deferred while requests were in flight (the drain reactor\'s)', () => {
    const down = { kind: 'unreachable' as const, message: 'chain RPC call failed: Bad status on response: 503' };
    const c0 = chain(85, 0);
    const k = { kind: 'env' as const, name: 'K' };
    /** The drained attempt `attempt` at height `height` failed transiently. */
    const drainFailed = (id: string, attempt: number, height: number, retryAtHeight: number) =>
      esc(id, { type: 'EscrowSettleFailed', data: { reason: down.message, error: down, attempt, height, retryAtHeight } });
    const inFlight = (id: string) => [
      esc(id, { type: 'EscrowCreated', data: { escrowId: id, txHash: 'A', height: 10, epoch: 0, creator: 'c', amount: '1000000000', model: M, role: 'regular', slots: [] } }),
      esc(id, { type: 'InferenceStarted', data: { requestId: `r${id}`, nonce: 1, clientKeyId: null, reservedCost: '10', inputTokens: 1, maxTokens: 1 } }),
    ];
    const drained = (id: string, origin: 'rotation' | 'depletion') => [
      esc(id, { type: 'EscrowSettleDeferred', data: { inFlight: 1, origin, keySource: k } }),
      esc(id, { type: 'InferenceFinished', data: { requestId: `r${id}`, nonce: 1, usage, cost: '2' } }),
      drainFailed(id, 1, 86, 88),
      drainFailed(id, 2, 88, 92),
    ];
    const cycle = [
      ...inFlight('3'),
      rot({ type: 'RotationPhaseStarted', data: { model: M, phase: 1, chain: c0, target: 0, existing: 1 } }),
      rot({ type: 'RotationPromoted', data: { model: M, chain: c0, escrowIds: [] } }),
      rot({ type: 'RotationSettleDecided', data: { model: M, role: 'regular', chain: c0, escrowIds: ['3'] } }),
      ...drained('3', 'rotation'),
    ];
    const settledAt = (id: string, height: number) => [
      esc(id, { type: 'EscrowSettleRequested', data: { txHash: 'S', keySource: k, txBytes: 'AA==', origin: 'rotation' } }),
      esc(id, { type: 'EscrowSettled', data: { txHash: 'S', height, refund: '999000000' } }),
    ];

    it('in the cycle that decided the settle: each drained attempt, the retry waiting, then settled and recovered', () => {
      const waiting = explainRotation(record(cycle));
      expect(waiting.cycles[0]!.settles).toEqual([expect.objectContaining({ escrowId: '3', state: 'retrying', retry: { attempt: 3, atHeight: 92 } })]);
      expect(waiting.cycles[0]!.failures.map((f) => [f.drained, f.attempt, f.retryAtHeight])).toEqual([
        [true, 1, 88],
        [true, 2, 92],
      ]);
      const text = formatExplain(waiting);
      expect(text).toContain('settle of escrow 3 deferred: 1 request(s) in flight');
      expect(text).toContain('FAILED deferred settle of escrow 3 (attempt 2) at height 88: unreachable: chain RPC call failed');
      expect(text).toContain('transient, tried again from height 92 while the settle window is open (settle window: epochs 0 and 1)');
      expect(text).toContain('escrow 3 (regular): last attempt failed (unreachable: chain RPC call failed: Bad status on response: 503); attempt 3 from height 92');

      const settled = formatExplain(explainRotation(record([...cycle, ...settledAt('3', 93)])));
      expect(settled).toContain('escrow 3 settled on chain at height 93');
      expect(settled).toContain('Failures (all recovered):');
      expect(settled).toContain('step deferred settle of escrow 3 attempt 1: no answer from the chain (unreachable: chain RPC call failed');
    });

    it('in the cycle: given up once the window closed (nothing sent), or refused once and not retried', () => {
      const message = 'settle window closed: escrow 3 belongs to epoch 0 and the chain is in epoch 2 (a settle is accepted only in epochs 0 and 1); not retried after 2 failed attempt(s)';
      const gaveUp = esc('3', { type: 'EscrowSettleFailed', data: { reason: message, error: { kind: 'wrong_epoch', message }, height: 405, windowClosed: true } });
      const x = explainRotation(record([...cycle, gaveUp]));
      expect(x.cycles[0]!.settles[0]).toMatchObject({ state: 'failed' });
      const text = formatExplain(x);
      expect(text).toContain(`GAVE UP deferred settle of escrow 3 at height 405: ${message}; the unused deposit can no longer be settled on chain`);
      expect(text).not.toContain('Settles not finished');

      const refused = { kind: 'wrong_epoch' as const, message: 'settlement outside the escrow epoch window', code: 1107 };
      const once = esc('3', { type: 'EscrowSettleFailed', data: { reason: refused.message, error: refused, txHash: 'S', attempt: 1, height: 405 } });
      const refusedText = formatExplain(explainRotation(record([...cycle.slice(0, -2), once])));
      expect(refusedText).toContain('FAILED deferred settle of escrow 3 (attempt 1) at height 405: wrong_epoch: settlement outside the escrow epoch window; its settle window has closed');
    });

    it('of a depletion replacement\'s old escrow: its drained attempts under the replacement, until settled', () => {
      const replaced = [
        ...inFlight('3'),
        rot({ type: 'DepletionReplacementDecided', data: { model: M, escrowId: '3', reason: 'depleted', chain: c0, intentId: 'd-1' } }),
        esc('4', { type: 'EscrowCreated', data: { escrowId: '4', intentId: 'd-1', txHash: 'B', height: 86, epoch: 0, creator: 'c', amount: '1000000000', model: M, role: 'regular', slots: [] } }),
        ...drained('3', 'depletion'),
      ];
      const x = explainRotation(record(replaced));
      expect(x.replacements[0]!.settle).toMatchObject({ state: 'retrying', retry: { attempt: 3, atHeight: 92 } });
      const text = formatExplain(x);
      expect(text).toContain('replaced by escrow 4; settle of escrow 3 not finished: last attempt failed (unreachable: chain RPC call failed');
      expect(text).toContain('deferred settle of escrow 3 attempt 2: no answer from the chain (unreachable: chain RPC call failed: Bad status on response: 503); transient, retried from height 92');
      expect(formatExplain(explainRotation(record([...replaced, ...settledAt('3', 93)])))).toContain('replaced by escrow 4; escrow 3 settled on chain at height 93 after 2 failed settle attempt(s)');
    });

    it('a settle failure recorded without the drain reactor\'s fields (every log before them) is explained as before', () => {
      const old = esc('3', { type: 'EscrowSettleFailed', data: { reason: 'timeout', txHash: 'S' } });
      const x = explainRotation(record([...cycle.slice(0, -2), old]));
      expect(x.cycles[0]!.failures).toEqual([]);
      expect(x.cycles[0]!.settles[0]).toMatchObject({ state: 'failed', reason: 'timeout' });
      expect(formatExplain(x)).toContain('settle of escrow 3 failed: timeout');
    });
  });
});
