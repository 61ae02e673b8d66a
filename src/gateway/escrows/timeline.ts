/** GET /v1/admin/devshards/{id}/timeline: an escrow's stream read as its timeline. */
import { readEscrowTimeline, type Timeline } from '../../projections/timeline.js';
import type { GatewayContext } from '../context.js';
import { escrowOr404 } from './decide.js';

/** The escrow's id and its timeline (members absent when its stream holds nothing to show). */
export type TimelineAnswer = { escrow_id: string } & Partial<Timeline>;

export async function escrowTimeline(ctx: GatewayContext, id: string): Promise<TimelineAnswer> {
  escrowOr404(ctx, id);
  return { escrow_id: id, ...(await readEscrowTimeline((stream, from, limit) => ctx.engine.store.readStream(stream, from, limit), id)) };
}
