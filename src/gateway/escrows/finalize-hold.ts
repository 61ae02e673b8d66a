/**
 * An escrow being finalized takes no new chat, and its finalize waits for the requests in flight.
 * Over the devshard protocol MsgFinalizeRound takes the escrow's next nonce and, once the session
 * reaches Settlement, no later diff can carry a Finish: a request still under way when the round
 * is composed would lose its nonce to it, or be billed by the log and never paid by the chain.
 * So finalize first holds the escrow (the chat path skips it), then waits until nothing is in
 * flight (bounded), then composes the rounds, whose diffs carry the last Finishes.
 */
import type { GatewayContext } from '../context.js';

const held = new WeakMap<object, Set<string>>();

/** True while `escrowId` is being finalized: the chat path routes elsewhere. */
export function isFinalizing(ctx: GatewayContext, escrowId: string): boolean {
  return held.get(ctx.engine)?.has(escrowId) ?? false;
}

/**
 * Holds the escrow and waits (up to `waitMs`) until none of its requests is in flight. Answers the
 * release and how many were still in flight when the wait ended (0 unless it timed out).
 */
export async function holdForFinalize(ctx: GatewayContext, escrowId: string, waitMs: number): Promise<{ release: () => void; stillInFlight: number }> {
  let set = held.get(ctx.engine);
  if (!set) held.set(ctx.engine, (set = new Set()));
  set.add(escrowId);
  const release = () => void set!.delete(escrowId);
  const inFlight = () => ctx.engine.escrow(escrowId)?.context.inFlight ?? 0;
  const deadline = Date.now() + waitMs;
  while (inFlight() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  // The last ends are recorded after their host's meta was taken: let those appends land too.
  await ctx.engine.idle();
  return { release, stillInFlight: inFlight() };
}
