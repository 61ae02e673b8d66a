/**
 * Rotation creates are decided before they are signed: the decision event (RotationCreateDecided /
 * DepletionReplacementDecided) names the intent id, then the intent stream `escrow-create-<id>` is
 * written (EscrowCreateRequested, write-ahead of the broadcast) under that very id. A restart finds
 * every decided id in one of four states (absent, pending, failed, created) and never creates twice:
 * absent → create now under the same id; pending → ask the chain by hash; failed / created → done.
 *
 */
import type { CreateOrigin, EscrowRole, KeySource } from '../../../events/catalog.js';
import type { EventMetadata } from '../../../events/envelope.js';
import { createIntentStream } from '../../../events/catalog.js';
import type { GatewayContext } from '../../context.js';
import { createEscrow, type CreateEscrowOutcome } from '../../escrows/create.js';

export { resolvePendingCreate } from '../../escrows/create.js';

export interface DecidedCreate {
  intentId: string;
  privateKeyHex: string;
  keySource: KeySource;
  amount: bigint;
  model: string;
  role: EscrowRole;
  origin: CreateOrigin;
  epoch: number;
  metadata: EventMetadata;
}

/** Where a decided create stands, from the log (projections) alone. */
export type IntentStatus = { kind: 'absent' } | { kind: 'pending' } | { kind: 'failed' } | { kind: 'created'; escrowId: string };

/** Intent id → escrow id of every escrow created from an intent. */
export function createdByIntent(ctx: GatewayContext): Map<string, string> {
  const out = new Map<string, string>();
  for (const [id, e] of ctx.projections.pool.contexts()) if (e.context.intentId) out.set(e.context.intentId, id);
  return out;
}

export function intentStatus(ctx: GatewayContext, intentId: string, created: Map<string, string>): IntentStatus {
  const escrowId = created.get(intentId);
  if (escrowId !== undefined) return { kind: 'created', escrowId };
  const s = ctx.engine.intent(intentId);
  if (!s) return { kind: 'absent' };
  if (s.value === 'createFailed') return { kind: 'failed' };
  return { kind: 'pending' };
}

/** The chain's reason recorded for a failed intent. */
export async function intentFailure(ctx: GatewayContext, intentId: string) {
  const recs = await ctx.engine.readStream(createIntentStream(intentId));
  const failed = recs.find((r) => r.type === 'EscrowCreateFailed');
  return failed?.type === 'EscrowCreateFailed' ? failed.data.error : { kind: 'rejected' as const, message: 'create failed (reason not recorded)' };
}

/** Creates the escrow of a decided intent id (write-ahead intent, broadcast, outcome). */
export function createDecided(ctx: GatewayContext, cmd: DecidedCreate): Promise<CreateEscrowOutcome> {
  return createEscrow(ctx, { ...cmd, register: true });
}

