/** The escrows this gateway keeps (every one not removed), and the only one of them when a request names none. */
import type { PoolEscrow } from '../../projections/index.js';
import type { GatewayContext } from '../context.js';
import { refuse } from '../errors.js';

/** Escrows not removed (the admin lists, metrics gauges). */
export function liveEscrows(ctx: GatewayContext): PoolEscrow[] {
  return ctx.projections.pool.all().filter((e) => e.state !== 'removed');
}

/**
 * The escrow of the bare /v1/finalize (`method` is the request's). devshardctl answers 400 unless
 * exactly one devshard is loaded (gateway.go handleSingleOnly): the request names no devshard, so
 * it is the request that is wrong.
 */
export function onlyEscrow(ctx: GatewayContext, method: string): string {
  const escrows = liveEscrows(ctx);
  if (escrows.length !== 1) {
    throw refuse.invalid(`${method} /v1/finalize works only with exactly one configured devshard (this gateway has ${escrows.length}); use ${method} /devshard/{id}/v1/finalize.`, null, 'not_single_escrow');
  }
  return escrows[0]!.escrowId;
}
