/**
 * The instance's ownership of escrows, wired (gateway/scale): the whole log for a sole process
 * (SQLite), leases for instances sharing a PostgreSQL log. The lease keeper's hooks are the use
 * cases a restart runs, per escrow: reconcile when one is taken over, give back unused nonces
 * before one is handed over, forget its devshard session once it is gone.
 */
import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/index.js';
import { escrowStream } from '../events/catalog.js';
import type { EventStore } from '../events/store.js';
import type { GatewayContext } from '../gateway/context.js';
import { createLeaseKeeper, type LeaseKeeper } from '../gateway/scale/lease-keeper.js';
import { soleOwnership, type Ownership } from '../gateway/scale/ownership.js';
import { reconcileEscrow, releaseUnusedNoncesOf } from '../gateway/workers/reconcile.js';

/** A store that can be asked to read what other instances committed (PostgreSQL). */
interface FollowingStore extends EventStore {
  catchUp(): Promise<void>;
}

const follows = (store: EventStore): store is FollowingStore => typeof (store as Partial<FollowingStore>).catchUp === 'function';

export function createOwnership(config: GatewayConfig, store: EventStore, logger: Logger, ctx: () => GatewayContext, url: () => string | undefined): { ownership: Ownership; keeper: LeaseKeeper | undefined } {
  const table = store.leases;
  if (!table || !follows(store)) return { ownership: soleOwnership(config.server.instanceName), keeper: undefined };
  const keeper = createLeaseKeeper({
    table,
    instance: config.server.instanceName,
    url,
    ttlMs: config.storage.postgres?.leaseTtlMs ?? 10_000,
    logger,
    async catchUpTo(position) {
      while (store.lastPosition() < position) await store.catchUp();
    },
    escrows: () =>
      ctx()
        .projections.pool.all()
        .filter((e) => e.state !== 'settled' && e.state !== 'removed')
        .map((e) => e.escrowId),
    idle: (id) => (ctx().engine.escrow(id)?.context.inFlight ?? 0) === 0 && ctx().engine.settledOn(id),
    takenOver: async (id) => {
      const report = await reconcileEscrow(ctx(), id);
      if (report.orphanedRequests > 0 || report.noncesReleased.length > 0 || report.noncesSkipped.length > 0) ctx().logger.info({ escrow_id: id, reconcile: report }, 'took the escrow over: reconciled what its previous instance left under way');
    },
    handingOver: (id) => releaseUnusedNoncesOf(ctx(), id),
    dropped: (id) => ctx().network.forgetEscrow?.(id),
    exclusive: (id, f) => ctx().engine.serial(escrowStream(id), f, { claim: false }),
  });
  return { ownership: keeper, keeper };
}
