/** Deactivate: the escrow takes no new chat (it stays here, unsettled, and can be re-activated). */
import { newEvent } from '../../events/catalog.js';
import type { EventMetadata } from '../../events/envelope.js';
import type { GatewayContext } from '../context.js';
import { decided, escrowOr404 } from './decide.js';
import { devshardView, type DevshardView } from './view.js';

export async function deactivateEscrow(ctx: GatewayContext, escrowId: string, metadata: EventMetadata, reason?: string): Promise<DevshardView> {
  const s = escrowOr404(ctx, escrowId);
  if (s.value === 'deactivated') return await devshardView(ctx, escrowId);
  await decided(() => ctx.engine.decideEscrow('escrow', escrowId, [newEvent('EscrowDeactivated', reason ? { reason } : {}, metadata)]));
  return devshardView(ctx, escrowId);
}
