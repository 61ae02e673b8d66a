/**
 * The drain reactor: a settle deferred while requests were in flight is completed when the last
 * one ends (spec: "completes only when it has none"). It reads the key source from the recorded
 * EscrowSettleDeferred, so it also resumes after a restart.
 *
 * A failed drained settle is recorded (EscrowSettleFailed with the attempt and the chain height it
 * was made at), by the attempt or, when its tx's outcome was unknown, by the reconciler once the
 * chain tells (the tx's intent records the attempt for it). A transient failure keeps the escrow deferred with the height of its next attempt
 * (settle-retry.ts: the rotation's block backoff); the reactor's own tick tries it again from that
 * height while the escrow's settle window is open, else gives it up and records that once. Any
 * other failure leaves the escrow finalized, not retried. The tick, not the rotation task or the
 * depletion check, runs these: they hand deferred settles over to the reactor, an admin's settle
 * is deferred with rotation off too, and the key is the one the deferral recorded, not a model's
 * private_key_env. The decision reads only the log and one chain reading (no clock), so replay
 * decides the same and a pending retry continues after a restart.
 */
import { escrowStream, newEvent, type ChainInputs, type CreateOrigin, type KeySource } from '../../events/catalog.js';
import type { Actor, EventMetadata } from '../../events/envelope.js';
import type { GatewayContext } from '../context.js';
import type { TxFeeOverride } from '../../chain/port.js';
import { settleEscrow, txFeeOfRecord, type SettleAnswer } from '../escrows/settle.js';
import {
  DRAINED_PENDING,
  drainedFailureFields,
  drainedSettleRetries,
  dueSettleRetries,
  settleWindowClosedError,
  windowNote,
  type DrainedAttempt,
  type DueSettleRetry,
} from './rotation/settle-retry.js';
import { errorInfo, readChainOr } from './rotation/steps.js';

const CHAIN_TIMEOUT_MS = 5_000;

/** Who a drained settle acts for: whoever deferred it. */
const ACTORS: Record<CreateOrigin, Actor> = { admin: { kind: 'admin' }, rotation: { kind: 'rotation-task' }, depletion: { kind: 'depletion-check' } };

/** The periodic part: due retries (and drained settles never attempted), every GATEWAY_BALANCE_CHECK_INTERVAL_MS. */
export interface DrainTask {
  /** One pass (tests, and the timer). */
  tick(): Promise<void>;
  /** Stops the timer and waits for the tick under way. */
  stop(): Promise<void>;
}

/** The deferral a drained settle completes: its key source, who asked, and metadata linking to it. */
async function deferral(ctx: GatewayContext, escrowId: string): Promise<{ keySource: KeySource; origin: CreateOrigin; metadata: EventMetadata; txFee?: TxFeeOverride }> {
  const deferred = [...(await ctx.engine.readStream(escrowStream(escrowId)))].reverse().find((r) => r.type === 'EscrowSettleDeferred');
  const data = deferred?.type === 'EscrowSettleDeferred' ? deferred.data : undefined;
  const origin = data?.origin ?? 'admin';
  return {
    keySource: data?.keySource ?? { kind: 'env', name: 'DEVSHARD_PRIVATE_KEY' },
    origin,
    metadata: { actor: ACTORS[origin], causationId: deferred ? String(deferred.position) : undefined },
    // The admin's fee and gas for this settle, when the deferral names them.
    ...(data?.txFee ? { txFee: txFeeOfRecord(data.txFee) } : {}),
  };
}

type Attempt = { answer: SettleAnswer } | { err: unknown } | undefined;

/** Attempt `attempt` (1 = the first) at a drained settle, made at `chain`; every failure is recorded once. */
async function attemptDrained(ctx: GatewayContext, escrowId: string, chain: ChainInputs, attempt: number): Promise<void> {
  const log = ctx.logger.child({ component: 'drain', escrow_id: escrowId });
  const base = { height: chain.height, epoch: chain.epoch, attempt };
  const drained: DrainedAttempt = { attempt, height: chain.height };
  const outcome: Attempt = await ctx.engine.serial(escrowStream(escrowId), async () => {
    // Read before the state check, so nothing is awaited between the check and the settle.
    const { keySource, origin, metadata, txFee } = await deferral(ctx, escrowId);
    const s = ctx.engine.escrow(escrowId);
    if (s?.value !== 'settleDeferred' || s.context.inFlight > 0) return undefined; // settled (or sent) by hand since
    try {
      return { answer: await settleEscrow(ctx, escrowId, { keySource, origin, metadata, drained, ...(txFee ? { txFee } : {}) }) };
    } catch (err) {
      // Once its tx was sent settleEscrow recorded the failure (with this attempt); before, it is recorded here.
      const now = ctx.engine.escrow(escrowId);
      if (now?.value === 'settleDeferred' && now.context.settleRetry?.attempt !== attempt) {
        const error = errorInfo(err);
        await ctx.engine.decideEscrow('escrow', escrowId, [newEvent('EscrowSettleFailed', { reason: error.message, error, ...drainedFailureFields(drained, err) }, metadata)]);
      }
      return { err };
    }
  });
  if (!outcome) return;
  if ('answer' in outcome) {
    log.info({ ...base, ...outcome.answer }, outcome.answer.status === 'settled' ? 'escrow_drain_settled' : 'escrow_drain_settle_pending');
    return;
  }
  const error = errorInfo(outcome.err);
  const now = ctx.engine.escrow(escrowId);
  if (now?.value === 'settleDeferred' && now.context.settleRetry?.attempt === attempt) {
    log.warn({ ...base, error, retry_at_height: now.context.settleRetry.retryAtHeight }, 'escrow_drain_settle_retry_scheduled');
  } else if (now?.value === 'finalized') {
    log.error({ ...base, error, retried: false, ...windowNote(error) }, 'escrow_drain_settle_failed');
  } else {
    log.warn({ ...base, error, state: now?.value }, 'escrow_drain_settle_pending');
  }
}

/** A pending retry whose settle window closed: recorded as given up (nothing is sent). */
async function giveUp(ctx: GatewayContext, due: Extract<DueSettleRetry, { kind: 'settle_window_closed' }>, chain: ChainInputs): Promise<void> {
  const { escrowId } = due;
  const error = settleWindowClosedError(due, chain.epoch);
  const recorded = await ctx.engine.serial(escrowStream(escrowId), async () => {
    const { metadata } = await deferral(ctx, escrowId);
    const s = ctx.engine.escrow(escrowId);
    if (s?.value !== 'settleDeferred' || !s.context.settleRetry) return false;
    await ctx.engine.decideEscrow('escrow', escrowId, [newEvent('EscrowSettleFailed', { reason: error.message, error, height: chain.height, windowClosed: true }, metadata)]);
    return true;
  });
  if (recorded) {
    ctx.logger.error(
      { component: 'drain', escrow_id: escrowId, height: chain.height, epoch: chain.epoch, escrow_epoch: due.escrowEpoch, attempts: due.attempts, error },
      'escrow_drain_settle_window_closed',
    );
  }
}

export function createDrainReactor() {
  const running = new Set<Promise<unknown>>();
  const busy = new Set<string>();

  /** Runs `work` for one escrow unless something already runs for it. */
  const run = (ctx: GatewayContext, escrowId: string, work: () => Promise<void>): Promise<void> => {
    if (busy.has(escrowId)) return Promise.resolve();
    busy.add(escrowId);
    const p = work()
      .catch((err) => ctx.logger.error({ component: 'drain', escrow_id: escrowId, err: { message: (err as Error).message } }, 'escrow_drain_settle_failed: the attempt could not be run'))
      .finally(() => {
        busy.delete(escrowId);
        running.delete(p);
      });
    running.add(p);
    return p;
  };

  /** The first attempt once drained; a settle awaiting its retry is the tick's. */
  const settleDrained = (ctx: GatewayContext, escrowId: string): Promise<void> => {
    const s = ctx.engine.escrow(escrowId);
    if (!s || s.value !== 'settleDeferred' || s.context.inFlight > 0 || s.context.settleRetry) return Promise.resolve();
    return run(ctx, escrowId, async () => {
      // Its retry would need a height: while the chain cannot be read the settle waits for the tick.
      const chain = await readChainOr(ctx, CHAIN_TIMEOUT_MS, { component: 'drain', escrow_id: escrowId }, 'escrow_drain_chain_unreadable: the drained settle waits');
      if (chain) await attemptDrained(ctx, escrowId, chain, 1);
    });
  };

  /** Due retries are run or given up; a drained settle not yet attempted is started. */
  const tick = async (ctx: GatewayContext): Promise<void> => {
    // Instances sharing a log: the leader retries drained settles (each instance still settles
    // what drains on it right after its last request: afterRequest).
    if (!ctx.ownership.isLeader()) return;
    const escrows = ctx.projections.pool.contexts();
    const first = [...escrows.keys()].map((id) => settleDrained(ctx, id));
    const { retries, escrows: waiting } = drainedSettleRetries(escrows);
    if (waiting.length > 0) {
      const chain = await readChainOr(ctx, CHAIN_TIMEOUT_MS, { component: 'drain' }, 'escrow_drain_chain_unreadable: settle retries wait');
      for (const due of chain ? dueSettleRetries(retries, waiting, chain, DRAINED_PENDING) : []) {
        await run(ctx, due.escrowId, () => (due.kind === 'retry_settle' ? attemptDrained(ctx, due.escrowId, chain!, due.attempt) : giveUp(ctx, due, chain!)));
      }
    }
    await Promise.all(first);
  };

  return {
    afterRequest: (ctx: GatewayContext, escrowId: string): void => void settleDrained(ctx, escrowId),
    /** After start: escrows whose deferred settle can now proceed (pending retries wait for the tick). */
    async resumeDeferred(ctx: GatewayContext): Promise<void> {
      for (const e of ctx.projections.pool.all()) void settleDrained(ctx, e.escrowId);
      await Promise.allSettled([...running]);
    },
    /** Starts the periodic tick on the balance-check interval. */
    start(ctx: GatewayContext): DrainTask {
      let ticking: Promise<void> | undefined;
      const once = (): Promise<void> =>
        (ticking ??= tick(ctx)
          .catch((err) => ctx.logger.error({ component: 'drain', err: { message: (err as Error).message } }, 'escrow_drain_tick_failed'))
          .finally(() => (ticking = undefined)));
      const timer = setInterval(() => void once(), ctx.config.behaviour.balanceCheckIntervalMs);
      timer.unref();
      return {
        tick: once,
        async stop() {
          clearInterval(timer);
          await ticking;
        },
      };
    },
    /** Waits for settles under way (shutdown). */
    async idle(): Promise<void> {
      await Promise.allSettled([...running]);
    },
  };
}
