/**
 * The warning before the chain prunes an unsettled escrow (k/devshard_pruning.go: once the epoch is
 * ≥ the escrow's + 2 it is deleted and its whole deposit split equally per unique slot address; the
 * creator gets nothing back). A settle is accepted only in the escrow's epoch and the next, so the
 * settle deadline and the prune point coincide: the switch into epoch + 2.
 *
 * The watch reads the epoch (/v1/epochs/latest via src/chain) at least every 5 s, keeps
 * it for the status documents (`prune_epoch`, `settle_deadline_epoch`, `blocks_until_prune`), and
 * logs `escrow_prune_approaching` once per escrow when it is within DEVSHARD_PRUNE_WARN_BLOCKS blocks
 * (or already in its last settle epoch when the epoch length is unknown) of its prune point.
 */
import type { EpochInfo } from '../../chain/port.js';
import type { GatewayContext } from '../context.js';

export interface PruneInfo {
  /** The epoch in which the chain prunes it if still unsettled (escrow epoch + 2). */
  prune_epoch: number;
  /** The last epoch a settle is accepted in (escrow epoch + 1). */
  settle_deadline_epoch: number;
  /** Blocks until the prune point (0 once reached); null when the chain's epoch is not known yet. */
  blocks_until_prune: number | null;
}

const lastEpoch = new WeakMap<GatewayContext, EpochInfo>();
const warned = new WeakMap<GatewayContext, Set<string>>();

/** The epoch the watch read last (undefined before its first read). */
export const knownEpoch = (ctx: GatewayContext): EpochInfo | undefined => lastEpoch.get(ctx);

/**
 * Whether an unsettled escrow of `epoch` is past its settle window by the epoch the watch read last
 * (the chain's epoch ≥ the escrow's + 2: pruned, or about to be at the next block). Such an escrow
 * can neither serve (its hosts answer "escrow not found") nor settle: no request is routed to it.
 * Known from the epoch alone, so no chain round trip on the request path.
 */
export function settleWindowClosedAt(ctx: GatewayContext, epoch: number | null | undefined): boolean {
  const e = lastEpoch.get(ctx);
  return e !== undefined && epoch !== null && epoch !== undefined && e.epochIndex >= epoch + 2;
}

/**
 * Blocks from `e` to the first block of epoch `pruneEpoch`. The epoch switch is `nextBoundaryHeight`;
 * one epoch further needs the epoch length (epoch_stages next_poc_start − poc_start), unknown otherwise.
 */
export function blocksUntilEpoch(e: EpochInfo, pruneEpoch: number, epochLength?: number): number | null {
  if (e.epochIndex >= pruneEpoch) return 0;
  const toSwitch = Math.max(0, e.nextBoundaryHeight - e.height);
  const more = pruneEpoch - e.epochIndex - 1;
  if (more === 0) return toSwitch;
  return epochLength !== undefined && epochLength > 0 ? toSwitch + more * epochLength : null;
}

const epochLengthOf = (e: EpochInfo): number | undefined => e.epochLength;

/** The prune fields of an unsettled escrow of `epoch` (null: settled, or its epoch unknown). */
export function pruneInfo(ctx: GatewayContext, epoch: number | null, settled: boolean): PruneInfo | null {
  if (settled || epoch === null) return null;
  const e = lastEpoch.get(ctx);
  const pruneEpoch = epoch + 2;
  return { prune_epoch: pruneEpoch, settle_deadline_epoch: epoch + 1, blocks_until_prune: e ? blocksUntilEpoch(e, pruneEpoch, epochLengthOf(e)) : null };
}

/** One watch pass: read the epoch, warn once for each unsettled escrow nearing its prune point. */
export async function checkPrune(ctx: GatewayContext): Promise<void> {
  const e = await ctx.chain.epoch();
  lastEpoch.set(ctx, e);
  let seen = warned.get(ctx);
  if (!seen) warned.set(ctx, (seen = new Set()));
  const warnBlocks = ctx.config.behaviour.pruneWarnBlocks;
  for (const x of ctx.projections.pool.all()) {
    if (x.state === 'removed' || x.state === 'settled' || seen.has(x.escrowId)) continue;
    const c = ctx.engine.escrow(x.escrowId)?.context;
    if (!c || c.settled || c.epoch === null) continue;
    const info = pruneInfo(ctx, c.epoch, false)!;
    const near = info.blocks_until_prune !== null ? info.blocks_until_prune <= warnBlocks : e.epochIndex >= info.settle_deadline_epoch;
    if (!near) continue;
    seen.add(x.escrowId);
    const note =
      info.blocks_until_prune === 0
        ? `unsettled and its settle window has closed: the chain prunes it (or has pruned it) and pays its whole deposit (${c.deposit}) to its hosts`
        : `unsettled: settle it before epoch ${info.prune_epoch} (${info.blocks_until_prune ?? '?'} blocks) or the chain prunes it and pays its whole deposit (${c.deposit}) to its hosts, returning nothing to the creator`;
    ctx.logger.warn(
      { component: 'prune', escrow_id: x.escrowId, state: x.state, epoch_index: c.epoch, chain_epoch: e.epochIndex, height: e.height, ...info, deposit: c.deposit, balance: c.balance, note },
      'escrow_prune_approaching',
    );
  }
}

export function startPruneWatch(ctx: GatewayContext): { stop: () => void; tick: () => Promise<void> } {
  let running: Promise<void> | undefined;
  const tick = (): Promise<void> =>
    // Every instance: it writes nothing, and its readings serve this instance's chat (the PoC gate).
    (running ??= checkPrune(ctx)
      .catch((err) => ctx.logger.debug({ err: { message: (err as Error).message } }, 'escrow_prune_check_failed'))
      .finally(() => (running = undefined)));
  // Also the PoC gate's reading (poc-gate.ts): at least every 5 s, as devshardctl polls its phase gate.
  const timer = setInterval(() => void tick(), Math.min(5_000, ctx.config.behaviour.balanceCheckIntervalMs));
  timer.unref();
  return { stop: () => clearInterval(timer), tick };
}
