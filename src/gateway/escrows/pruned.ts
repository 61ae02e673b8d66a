/**
 * A settle the chain answers `escrow N not found` for an escrow this gateway has in its log, once
 * the chain's epoch is at least the escrow's + 2, is not a lost escrow: the chain pruned it
 * (k/devshard_pruning.go) because its settle window (its epoch and the next) closed unsettled.
 * Its whole deposit went to its hosts, split equally per unique slot address; nothing returns to
 * the creator. It is read as the closed settle window (`wrong_epoch`, what the keeper answers for a
 * late settle before pruning ran), so rotation, the retries and explain treat it the same way.
 */
import { ChainError } from '../../chain/port.js';
import type { GatewayContext } from '../context.js';

export function prunedMessage(escrowId: string, escrowEpoch: number, chainEpoch: number): string {
  return (
    `settle window closed: escrow ${escrowId} of epoch ${escrowEpoch} was pruned by the chain (epoch ${chainEpoch} ≥ ${escrowEpoch + 2}; ` +
    `a settle is accepted only in epochs ${escrowEpoch} and ${escrowEpoch + 1}): its whole deposit went to its hosts, ` +
    `split equally per unique slot address, and nothing returns to the creator`
  );
}

/** `err` as the closed settle window when it is the chain's not-found for a pruned escrow of ours; else `err`. */
export async function settleErrorOf<E>(ctx: GatewayContext, escrowId: string, err: E): Promise<E | ChainError> {
  if (!(err instanceof ChainError) || err.kind !== 'not_found') return err;
  const escrowEpoch = ctx.engine.escrow(escrowId)?.context.epoch;
  if (escrowEpoch === null || escrowEpoch === undefined) return err;
  const chainEpoch = await ctx.chain.epoch().then((e) => e.epochIndex, () => null);
  if (chainEpoch === null || chainEpoch < escrowEpoch + 2) return err;
  return new ChainError('wrong_epoch', prunedMessage(escrowId, escrowEpoch, chainEpoch), err.detail);
}

/**
 * Before the hosts are asked to sign or any fee is spent: once the chain's epoch is at least the
 * escrow's + 2 the chain has pruned it (hosts and keeper both answer `escrow N not found`), so the
 * settle is refused here as the closed settle window. Undefined while the window is open, or when
 * the escrow's epoch or the chain's is unknown (then the chain judges).
 */
export async function settleWindowClosed(ctx: GatewayContext, escrowId: string): Promise<ChainError | undefined> {
  const escrowEpoch = ctx.engine.escrow(escrowId)?.context.epoch;
  if (escrowEpoch === null || escrowEpoch === undefined) return undefined;
  const chainEpoch = await ctx.chain.epoch().then((e) => e.epochIndex, () => null);
  if (chainEpoch === null || chainEpoch < escrowEpoch + 2) return undefined;
  return new ChainError('wrong_epoch', prunedMessage(escrowId, escrowEpoch, chainEpoch), { precheck: true });
}
