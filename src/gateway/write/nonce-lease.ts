/**
 * Nonce reservations in blocks (docs/architecture.md, principle 6: a nonce is durably reserved before a request
 * leaves). Reserving each nonce with its own fsync put a disk flush in front of every host call;
 * instead a NoncesReserved event covers the next NONCE_BLOCK nonces and is taken when half of the
 * current block is used, so under steady traffic the next block is durable before it is needed and
 * no request waits. A request whose nonce is beyond the durable reservation (a burst larger than half
 * a block, or the first request on an escrow) waits for the block being committed.
 *
 * After a crash, nonces of the last block may have been used without their InferenceStarted in the
 * log; the start-up reconciler records them as skipped (NoncesSkipped), so none is used twice.
 */
import { newEvent } from '../../events/catalog.js';
import type { EventMetadata } from '../../events/envelope.js';
import type { Engine } from './engine.js';
import type { Logger } from 'pino';
import type { Projections } from '../../projections/index.js';

/** Nonces per reservation: at most this many are skipped by a crash, out of the ~19,800 routable. */
export const NONCE_BLOCK = 256;

export class NonceLeases {
  /** escrow id → the reservation being committed. */
  private readonly committing = new Map<string, Promise<unknown>>();

  constructor(private readonly ctx: { engine: Engine; projections: Projections; logger: Logger }) {}

  /**
   * Makes sure `nonce` of the escrow is (or is being) reserved, deciding the next block when less
   * than half of the current one is left. Returns undefined when `nonce` is already durable, else a
   * promise that resolves once it is. Synchronous up to the returned promise, so the caller can
   * decide InferenceStarted for `nonce` right after. `metadata` is the requesting call's (the
   * reservation is recorded as caused by the request that needed it).
   */
  ensure(escrowId: string, nonce: number, metadata: EventMetadata): Promise<unknown> | undefined {
    const decided = this.ctx.engine.escrow(escrowId);
    if (!decided) return undefined;
    const c = decided.context;
    const reserved = c.nonceReserved ?? 0;
    // One block at a time, unless a burst has outrun the block being committed.
    if (reserved - nonce < NONCE_BLOCK / 2 && (!this.committing.has(escrowId) || nonce > reserved)) {
      const upTo = Math.min(Math.max(reserved, nonce - 1) + NONCE_BLOCK, c.routingStop - 1);
      const event = newEvent('NoncesReserved', { upTo }, metadata);
      if (upTo >= nonce && this.ctx.engine.canEscrow(escrowId, event)) {
        const p = this.ctx.engine.decideEscrow('escrow', escrowId, [event]);
        const done = p.then(
          () => undefined,
          (err: unknown) => this.ctx.logger.error({ err, escrow_id: escrowId }, 'could not record a nonce reservation'),
        );
        this.committing.set(escrowId, p);
        void done.finally(() => {
          if (this.committing.get(escrowId) === p) this.committing.delete(escrowId);
        });
      }
    }
    if (nonce <= (this.ctx.projections.pool.escrow(escrowId)?.context.nonceReserved ?? 0)) return undefined;
    // Not durable yet: the block being committed covers it (the statechart refuses the start otherwise).
    return this.committing.get(escrowId);
  }
}
