/**
 * The two guards every operator command on an escrow runs through: the escrow is known here (else
 * a 404), and the escrow statechart allows what is asked (else a 409 naming the state).
 */
import { refuse } from '../errors.js';
import type { GatewayContext } from '../context.js';
import { TransitionRefused } from '../write/engine.js';

export function escrowOr404(ctx: GatewayContext, escrowId: string) {
  const s = ctx.engine.escrow(escrowId);
  if (!s || s.value === 'removed') throw refuse.notFound(`No devshard ${escrowId} is registered on this gateway.`, 'devshard_not_found');
  return s;
}

/** Runs a decision; a statechart refusal becomes a 409 the operator can act on. */
export async function decided<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    if (err instanceof TransitionRefused) {
      throw refuse.conflict(`Devshard ${err.escrowId} is ${err.state}; ${err.eventType.replace(/^Escrow/, '').toLowerCase()} is not possible in that state.`, 'invalid_state');
    }
    throw err;
  }
}
