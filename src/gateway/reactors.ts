/**
 * The drain reactor: a settle deferred while requests were in flight is completed when the last
 * one ends (spec: "completes only when it has none"). It reads the key source from the recorded
 * EscrowSettleDeferred, so it also resumes after a restart.
 */
import { escrowStream, type KeySource, type CreateOrigin } from '../events/catalog.js';
import type { GatewayContext } from './context.js';
import { settleEscrow } from './escrows/lifecycle.js';

export function createDrainReactor() {
  const running = new Set<Promise<unknown>>();
  const busy = new Set<string>();

  const settleDrained = (ctx: GatewayContext, escrowId: string): void => {
    const s = ctx.engine.escrow(escrowId);
    if (!s || s.value !== 'settleDeferred' || s.context.inFlight > 0 || busy.has(escrowId)) return;
    const deferred = [...ctx.engine.readStream(escrowStream(escrowId))].reverse().find((r) => r.type === 'EscrowSettleDeferred');
    const data = deferred?.type === 'EscrowSettleDeferred' ? deferred.data : undefined;
    const keySource: KeySource = data?.keySource ?? { kind: 'env', name: 'DEVSHARD_PRIVATE_KEY' };
    const origin: CreateOrigin = data?.origin ?? 'admin';
    busy.add(escrowId);
    const p = ctx.engine
      .serial(escrowStream(escrowId), () => settleEscrow(ctx, escrowId, { keySource, origin, metadata: { actor: { kind: origin === 'admin' ? 'admin' : 'rotation-task' }, causationId: deferred ? String(deferred.position) : undefined } }))
      .then(
        (answer) => ctx.logger.info({ escrow_id: escrowId, status: answer.status }, 'deferred settle completed after in-flight requests drained'),
        (err) => ctx.logger.error({ escrow_id: escrowId, err: { message: (err as Error).message } }, 'deferred settle failed'),
      )
      .finally(() => {
        busy.delete(escrowId);
        running.delete(p);
      });
    running.add(p);
  };

  return {
    afterRequest: settleDrained,
    /** After start: escrows whose deferred settle can now proceed. */
    async resumeDeferred(ctx: GatewayContext): Promise<void> {
      for (const e of ctx.projections.pool.all()) settleDrained(ctx, e.escrowId);
      await Promise.allSettled([...running]);
    },
    /** Waits for settles under way (shutdown). */
    async idle(): Promise<void> {
      await Promise.allSettled([...running]);
    },
  };
}
