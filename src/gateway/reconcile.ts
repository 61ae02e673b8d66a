/**
 * Start-up reconciliation (DESIGN.md principle 3): what the log says was under way when the
 * process stopped is settled by asking the chain, never by guessing.
 *  - a create intent with no outcome: look its tx up by hash; if the chain never saw it, broadcast
 *    the recorded bytes again (same hash: it cannot create twice); the outcome is then recorded;
 *  - an escrow in `settling`: the same with its settle tx;
 *  - requests in flight when the process died: they can no longer end, so they are recorded as
 *    failed (billed nothing) and their reservations released.
 */
import { createIntentStream, escrowStream, newEvent } from '../events/catalog.js';
import type { EventMetadata } from '../events/envelope.js';
import type { PreparedTx, TxOutcome } from '../chain/port.js';
import type { GatewayContext } from './context.js';
import { outcomeUnknown } from './escrows/chain-errors.js';
import { resolveCreate } from './escrows/create.js';
import { resolveSettle } from './escrows/lifecycle.js';
import { chainErrorInfo } from './escrows/chain-errors.js';

const META: EventMetadata = { actor: { kind: 'reconciler' } };

export interface ReconcileReport {
  creates: { intentId: string; result: 'created' | 'failed' | 'unknown' }[];
  settles: { escrowId: string; result: 'settled' | 'failed' | 'unknown' }[];
  orphanedRequests: number;
}

export async function reconcile(ctx: GatewayContext): Promise<ReconcileReport> {
  const report: ReconcileReport = { creates: [], settles: [], orphanedRequests: 0 };
  for (const p of ctx.projections.pool.pending()) {
    const first = ctx.engine.readStream(createIntentStream(p.intentId))[0];
    const txBytes = first?.type === 'EscrowCreateRequested' ? first.data.txBytes : undefined;
    const creator = first?.type === 'EscrowCreateRequested' ? first.data.creator : '';
    const outcome = await outcomeOf(ctx, { txHash: p.txHash, txBytes: txBytes ?? '', creator });
    if (outcome === 'unknown') {
      report.creates.push({ intentId: p.intentId, result: 'unknown' });
      continue;
    }
    if ('error' in outcome) {
      await ctx.engine.decideEscrow('intent', p.intentId, [
        newEvent('EscrowCreateFailed', { intentId: p.intentId, model: p.model, role: p.role, epoch: p.epoch, error: chainErrorInfo(outcome.error), txHash: p.txHash }, META),
      ]);
      report.creates.push({ intentId: p.intentId, result: 'failed' });
      continue;
    }
    const r = await resolveCreate(ctx, p.intentId, outcome, META);
    report.creates.push({ intentId: p.intentId, result: r.ok ? 'created' : 'failed' });
  }

  for (const e of ctx.projections.pool.all()) {
    const snap = ctx.engine.escrow(e.escrowId);
    if (!snap) continue;
    const pending = Object.keys(snap.context.pending);
    if (pending.length > 0) {
      const nonces = new Map<string, number>();
      for (const r of ctx.engine.readStream(escrowStream(e.escrowId))) if (r.type === 'InferenceStarted') nonces.set(r.data.requestId, r.data.nonce);
      const events = pending.map((requestId) =>
        newEvent(
          'InferenceFailed',
          { requestId, nonce: nonces.get(requestId) ?? 0, reason: 'gateway restarted while the request was in flight', usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 }, cost: '0' },
          META,
        ),
      );
      await ctx.engine.decideEscrow('escrow', e.escrowId, events);
      report.orphanedRequests += events.length;
    }
    if (snap.value === 'settling') {
      const recs = ctx.engine.readStream(escrowStream(e.escrowId));
      const req = [...recs].reverse().find((r) => r.type === 'EscrowSettleRequested');
      if (req?.type !== 'EscrowSettleRequested') continue;
      const outcome = await outcomeOf(ctx, { txHash: req.data.txHash, txBytes: req.data.txBytes ?? '', creator: snap.context.creator ?? '' });
      if (outcome === 'unknown') {
        report.settles.push({ escrowId: e.escrowId, result: 'unknown' });
      } else if ('error' in outcome) {
        const info = chainErrorInfo(outcome.error);
        await ctx.engine.decideEscrow('escrow', e.escrowId, [newEvent('EscrowSettleFailed', { reason: info.message, error: info, txHash: req.data.txHash }, META)]);
        report.settles.push({ escrowId: e.escrowId, result: 'failed' });
      } else {
        const failure = await resolveSettle(ctx, e.escrowId, outcome, META);
        report.settles.push({ escrowId: e.escrowId, result: failure ? 'failed' : 'settled' });
      }
    }
  }
  return report;
}

/** The tx's outcome: looked up by hash, else re-broadcast from its recorded bytes. */
async function outcomeOf(ctx: GatewayContext, tx: PreparedTx): Promise<TxOutcome | { error: unknown } | 'unknown'> {
  try {
    const found = await ctx.chain.findTx(tx.txHash);
    if (found) return found;
  } catch {
    return 'unknown';
  }
  if (!tx.txBytes) return { error: new Error('the chain has no such tx and its bytes were not recorded') };
  try {
    return await ctx.chain.broadcast(tx);
  } catch (error) {
    return outcomeUnknown(error) ? 'unknown' : { error };
  }
}
