/** Remove: a settled escrow leaves this gateway's lists (its stream stays in the log). */
import { newEvent } from '../../events/catalog.js';
import type { EventMetadata } from '../../events/envelope.js';
import { stateName } from '../../machines/index.js';
import type { GatewayContext } from '../context.js';
import { refuse } from '../errors.js';
import { decided, escrowOr404 } from './decide.js';

/** devshardctl's {id, deleted} (gateway.go handleAdminCleanDevshard) beside ours. */
export interface RemoveAnswer {
  id: string;
  deleted: true;
  escrow_id: string;
  removed: true;
}

export async function removeEscrow(ctx: GatewayContext, escrowId: string, metadata: EventMetadata): Promise<RemoveAnswer> {
  const s = escrowOr404(ctx, escrowId);
  if (!s.context.settled) {
    // devshardctl deletes any inactive devshard with no requests in flight, its state store with it.
    // An unsettled escrow's record is the only way to settle it: without it the creator cannot
    // claim the unused deposit, and the chain prunes the escrow to the hosts at the end of its epochs.
    const busy = s.context.inFlight > 0 ? ` It has ${s.context.inFlight} request(s) in flight.` : '';
    throw refuse.conflict(
      `Devshard ${escrowId} is ${stateName(s.value)} and not settled; removing it now would lose its settlement state, and its whole deposit would be pruned to the hosts (the chain pays an unsettled escrow out to its hosts two epochs after its own) instead of the unused part returning to the creator.${busy} Settle it first (POST /v1/admin/devshards/${escrowId}/settle), then delete it.`,
      'not_settled',
    );
  }
  await decided(() => ctx.engine.decideEscrow('escrow', escrowId, [newEvent('EscrowRemoved', {}, metadata)]));
  // devshardctl's {id, deleted} (gateway.go handleAdminCleanDevshard) beside ours.
  return { id: escrowId, deleted: true, escrow_id: escrowId, removed: true };
}
