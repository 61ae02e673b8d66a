/**
 * Finalize: the hosts sign the session's settlement, which the log records (EscrowFinalized); the
 * settlement document is what finalize answers, then and on every GET.
 */
import { newEvent } from '../../events/catalog.js';
import type { EventMetadata } from '../../events/envelope.js';
import { decideFinalize, stateName } from '../../machines/index.js';
import type { GatewayContext } from '../context.js';
import { refuse } from '../errors.js';
import { decided, escrowOr404 } from './decide.js';
import { holdForFinalize } from './finalize-hold.js';
import { buildSettlement, settlementDocument, type SettlementFile } from './settlement.js';

export async function finalizeEscrow(ctx: GatewayContext, escrowId: string, metadata: EventMetadata): Promise<SettlementFile> {
  const d = decideFinalize(escrowOr404(ctx, escrowId));
  if (d.kind === 'refuse' || !ctx.engine.canEscrow(escrowId, { type: 'EscrowFinalized', data: { settlement: null } } as never)) {
    // (canEscrow also refuses an escrow whose stream can take no event until a restart: engine.ts.)
    throw refuse.conflict(`Devshard ${escrowId} is ${stateName(escrowOr404(ctx, escrowId).value)}; it can no longer be finalized.`, 'invalid_state');
  }
  // No new chat on it, and the requests under way end first (finalize-hold.ts says why).
  const hold = await holdForFinalize(ctx, escrowId, ctx.config.limits.finalizeDrainMs);
  let built: Awaited<ReturnType<typeof buildSettlement>>;
  try {
    if (hold.stillInFlight > 0) {
      ctx.logger.warn({ escrow_id: escrowId, in_flight: hold.stillInFlight }, 'finalizing with requests still in flight: what they cost is billed by the log but not in the settlement');
    }
    built = await buildSettlement(ctx, escrowId);
    // How far each host applied the diffs goes into the log before the settlement it signed.
    await ctx.hostAcks?.flush();
    await decided(() => ctx.engine.decideEscrow('escrow', escrowId, [newEvent('EscrowFinalized', { settlement: built.settlement }, metadata)]));
  } finally {
    hold.release();
  }
  if (built.failures.length > 0) {
    ctx.logger.warn({ escrow_id: escrowId, failures: built.failures }, 'some hosts did not sign the settlement; settle collects them again');
  }
  return settlementDocument(built.settlement);
}

/**
 * GET finalize: the settlement document of a finalized escrow; before finalize devshardctl's 409
 * `session not yet finalized` (proxy.go handleGetFinalize).
 */
export function finalizedDocument(ctx: GatewayContext, escrowId: string): SettlementFile {
  const s = escrowOr404(ctx, escrowId);
  if (!s.context.settlement) {
    throw refuse.conflict(`session not yet finalized: devshard ${escrowId} is ${stateName(s.value)}; finalize it with POST /devshard/${escrowId}/v1/finalize.`, 'not_finalized');
  }
  return settlementDocument(s.context.settlement);
}
