/**
 * Start-up reconciliation (docs/architecture.md, principle 3): what the log says was under way when the
 * process stopped is settled by asking the chain, never by guessing.
 *  - a create intent with no outcome: look its tx up by hash; if the chain never saw it, broadcast
 *    the recorded bytes again (same hash: it cannot create twice); the outcome is then recorded;
 *  - an escrow in `settling`: the same with its settle tx;
 *  - requests in flight when the process died (orphans): they can no longer end here, so they are
 *    recorded as failed; what a sent one cost is billed by the devshard protocol, when its host's
 *    MsgFinishInference reaches a later diff (protocol-billing.ts), not guessed here;
 *  - nonces the previous run reserved beyond its last start (NoncesReserved) were never sent (a
 *    nonce's diff is in the log before it leaves, and its start no later): they are released
 *    (NoncesReleased) and the next request continues right after the last used nonce, so the hosts
 *    see every nonce once and none skipped. A clean stop releases them itself (`releaseUnusedNonces`).
 *
 * The create/settle part also runs in the background (`startIntentReconciler`) so an outcome that
 * was unknown when the command answered (node unreachable, tx not yet included) gets recorded
 * without a restart. A drained settle's tx (its intent names the drain reactor's attempt) that the
 * chain refused is recorded with that attempt, so a transient refusal is retried by the reactor
 * with the same backoff, and given up once the settle window closed, as if answered at once. A
 * settle the rotation task or the depletion check sent itself (its intent names the owner's
 * attempt) has its refusal recorded in rotation-<model> as that owner records one, so its own
 * retries (settleRetries, depletionSettleRetries) pick it up.
 */
import { createIntentStream, devshardSessionStream, escrowStream, newEvent, type EscrowEventData } from '../../events/catalog.js';
import type { EventMetadata, NewEvent } from '../../events/envelope.js';
import { eachRequestEvent } from '../../events/request-data.js';
import { txSequence } from '../../chain/tx-sequence.js';
import type { GatewayContext } from '../context.js';
import { busyWith, recordedTxOutcome } from '../escrows/broadcast.js';
import { resolvePendingCreate } from '../escrows/create.js';
import { recordSettleFailure, resolveSettle } from '../escrows/settle.js';
import { settleErrorOf } from '../escrows/pruned.js';
import { withModelLock } from './rotation/lock.js';
import { drainedAttemptOf, ownerAttemptOf, retryAfter, windowNote, type OwnerAttempt } from './rotation/settle-retry.js';
import { errorInfo, readChainOr, recordOwnerSettleFailure, RotationRefused } from './rotation/steps.js';

const CHAIN_TIMEOUT_MS = 5_000;

const META: EventMetadata = { actor: { kind: 'reconciler' } };

export interface ReconcileReport {
  creates: { intentId: string; result: 'created' | 'failed' | 'unknown' }[];
  settles: { escrowId: string; result: 'settled' | 'failed' | 'unknown' }[];
  orphanedRequests: number;
  /** Nonces the previous run sent whose starts the log lacks (never expected: see endCrashedRequests). */
  noncesSkipped: { escrowId: string; from: number; upTo: number }[];
  /** Reservations of the previous run cut back to its last used nonce. */
  noncesReleased: { escrowId: string; upTo: number; released: number }[];
}

const emptyReport = (): ReconcileReport => ({ creates: [], settles: [], orphanedRequests: 0, noncesSkipped: [], noncesReleased: [] });

/**
 * At a clean stop, once nothing is in flight: every start is recorded, so each escrow's reservation
 * is cut back to its last used nonce (NoncesReleased) and the next run continues right after it.
 */
export async function releaseUnusedNonces(ctx: GatewayContext): Promise<void> {
  for (const e of ctx.projections.pool.all()) if (ctx.ownership.owns(e.escrowId)) await releaseUnusedNoncesOf(ctx, e.escrowId);
}

/** One escrow's reservation cut back to its last used nonce, when nothing is in flight on it (a stop, a hand-over). */
export async function releaseUnusedNoncesOf(ctx: GatewayContext, escrowId: string): Promise<void> {
  const snap = ctx.engine.escrow(escrowId);
  if (!snap || snap.context.inFlight > 0) return;
  const event = newEvent('NoncesReleased', { upTo: snap.context.nonce }, { actor: { kind: 'shutdown' } });
  if (ctx.engine.canEscrow(escrowId, event)) await ctx.engine.decideEscrow('escrow', escrowId, [event]);
}

/**
 * At start: what the previous run left under way. Instances sharing a log do the escrows' part
 * when they take each one over (reconcileEscrow) and the intents' on the leader's timer.
 */
export async function reconcile(ctx: GatewayContext): Promise<ReconcileReport> {
  const report = emptyReport();
  if (ctx.ownership.shared) return report;
  for (const e of ctx.projections.pool.all()) await reconcileEscrow(ctx, e.escrowId, report);
  await reconcileIntents(ctx, report);
  return report;
}

/** The escrow's requests left in flight and its unused reservation (a restart, or taking it over from another instance). */
export async function reconcileEscrow(ctx: GatewayContext, escrowId: string, report: ReconcileReport = emptyReport()): Promise<ReconcileReport> {
  const snap = ctx.engine.escrow(escrowId);
  if (snap && (Object.keys(snap.context.pending).length > 0 || (snap.context.nonceReserved ?? 0) > snap.context.nonce)) await endCrashedRequests(ctx, escrowId, report);
  return report;
}

/**
 * Create intents without outcome and escrows in `settling`: outcome by hash (or re-broadcast).
 * Handled in the order their txs were signed (account sequence): after a crash that lost several
 * of them (a node restart empties its mempool), re-sending a later one before an earlier one would
 * have the node refuse it as bad_sequence and record a valid create or settle as failed.
 */
export async function reconcileIntents(ctx: GatewayContext, report: ReconcileReport = emptyReport()): Promise<ReconcileReport> {
  const busy = busyWith(ctx);
  const work: { sequence: number; run: () => Promise<void> }[] = [];
  for (const p of ctx.projections.pool.pending()) {
    if (busy.has(p.txHash)) continue;
    const first = (await ctx.engine.readStream(createIntentStream(p.intentId)))[0];
    const sequence = txSequence(first?.type === 'EscrowCreateRequested' ? first.data.txBytes : undefined) ?? Infinity;
    work.push({ sequence, run: () => reconcileCreate(ctx, p.intentId, report) });
  }
  for (const e of ctx.projections.pool.all()) {
    if (ctx.engine.escrow(e.escrowId)?.value !== 'settling') continue;
    work.push({ sequence: txSequence((await lastSettleIntent(ctx, e.escrowId))?.txBytes) ?? Infinity, run: () => reconcileSettle(ctx, e.escrowId, busy, report) });
  }
  // Stable: what has no readable sequence keeps its order (creates before settles), after the rest.
  work.sort((a, b) => (a.sequence === b.sequence ? 0 : a.sequence < b.sequence ? -1 : 1));
  for (const w of work) await w.run();
  return report;
}

async function reconcileCreate(ctx: GatewayContext, intentId: string, report: ReconcileReport): Promise<void> {
  await ctx.engine.serial(createIntentStream(intentId), async () => {
    if (ctx.engine.intent(intentId)?.value !== 'creating') return;
    const r = await resolvePendingCreate(ctx, intentId, META);
    report.creates.push({ intentId, result: r === undefined ? 'unknown' : r.ok ? 'created' : 'failed' });
  });
}

async function reconcileSettle(ctx: GatewayContext, escrowId: string, busy: Set<string>, report: ReconcileReport): Promise<void> {
  const settling = ctx.engine.escrow(escrowId);
  if (settling?.value !== 'settling') return;
  // A settle the rotation task or the depletion check sent itself: its failure is recorded in
  // rotation-<model> too, under the model's lock taken before the escrow's (as they take them).
  const model = settling.context.model;
  const owned = model !== null && ownerAttemptOf((await lastSettleIntent(ctx, escrowId)) ?? {}) !== undefined;
  const locked = <T>(f: () => Promise<T>): Promise<T> => (owned ? withModelLock(ctx, model, f) : f());
  await locked(() => ctx.engine.serial(escrowStream(escrowId), async () => {
    const snap = ctx.engine.escrow(escrowId);
    if (snap?.value !== 'settling') return;
    const req = await lastSettleIntent(ctx, escrowId);
    if (!req || busy.has(req.txHash)) return;
    const outcome = await recordedTxOutcome(ctx, { txHash: req.txHash, txBytes: req.txBytes ?? '', creator: snap.context.creator ?? '' });
    if (outcome === 'unknown') {
      report.settles.push({ escrowId, result: 'unknown' });
      return;
    }
    // The rotation's or depletion check's attempt: its refusal is recorded in rotation-<model> first
    // (a crash before the escrow's failure leaves it settling, found again), then the escrow's.
    const owner = ownerAttemptOf(req);
    // A pruned escrow's not-found reads as its closed settle window (escrows/pruned.ts).
    const refusal = await settleErrorOf(ctx, escrowId, 'error' in outcome ? outcome.error : outcome.code !== 0 ? ctx.chain.errorOf(outcome) : undefined);
    if (owner && refusal && snap.context.model !== null) {
      if (!(await recordOwnerRefusal(ctx, escrowId, snap.context.model, owner, refusal))) {
        report.settles.push({ escrowId, result: 'unknown' });
        return;
      }
    }
    // A drained settle's failure is recorded as its attempt would have recorded it: with its retry.
    const drained = drainedAttemptOf(req);
    let failed = true;
    if ('error' in outcome) await recordSettleFailure(ctx, escrowId, req.txHash, outcome.error, META, drained);
    else failed = (await resolveSettle(ctx, escrowId, outcome, META, drained)) !== undefined;
    report.settles.push({ escrowId, result: failed ? 'failed' : 'settled' });
    const after = ctx.engine.escrow(escrowId);
    if (drained && after?.value === 'settleDeferred' && after.context.settleRetry) {
      ctx.logger.warn({ component: 'reconcile', escrow_id: escrowId, ...drained, retry_at_height: after.context.settleRetry.retryAtHeight }, 'escrow_drain_settle_retry_scheduled');
    }
  }));
}

/** The escrow's last settle intent (EscrowSettleRequested), if any. */
async function lastSettleIntent(ctx: GatewayContext, escrowId: string): Promise<EscrowEventData['EscrowSettleRequested'] | undefined> {
  const recs = await ctx.engine.readStream(escrowStream(escrowId));
  const req = [...recs].reverse().find((r) => r.type === 'EscrowSettleRequested');
  return req?.type === 'EscrowSettleRequested' ? req.data : undefined;
}

/**
 * Records the chain's refusal of `owner`'s settle tx in rotation-<model> as the attempt would have
 * (recordOwnerSettleFailure: a transient one with its retry, from the attempt's height). False while
 * the chain cannot be read (the event needs a reading): the escrow stays settling for the next pass.
 * A refusal the owner's statechart does not take (a first chain refusal found after the phase that
 * decided it) is not retried and only the escrow's failure records it, as before.
 */
async function recordOwnerRefusal(ctx: GatewayContext, escrowId: string, model: string, owner: OwnerAttempt, refusal: unknown): Promise<boolean> {
  const chain = await readChainOr(ctx, CHAIN_TIMEOUT_MS, { component: 'reconcile', escrow_id: escrowId }, 'escrow_settle_reconcile_chain_unreadable: the refusal is recorded later');
  if (!chain) return false;
  const error = errorInfo(refusal);
  const { retryAtHeight } = retryAfter(refusal, owner.attempt, owner.height);
  const base = { component: 'reconcile', model, escrow_id: escrowId, attempt: owner.attempt, error };
  try {
    await recordOwnerSettleFailure(ctx, model, escrowId, owner, chain, { error, ...(retryAtHeight !== undefined ? { retryAtHeight } : {}) }, META);
  } catch (err) {
    if (err instanceof RotationRefused) return true;
    throw err;
  }
  if (retryAtHeight !== undefined) ctx.logger.warn({ ...base, retry_at_height: retryAtHeight }, `escrow_${owner.retriedBy}_settle_retry_scheduled`);
  else ctx.logger.error({ ...base, retried: false, ...windowNote(error) }, owner.retriedBy === 'rotation' ? 'escrow_rotation_settle_failed' : 'escrow_depletion_replacement_failed: the old escrow could not be settled');
  return true;
}

/**
 * Runs `reconcileIntents` every `intervalMs` while something is unresolved (one run at a time).
 * @returns stop, which also waits for a run under way
 */
export function startIntentReconciler(ctx: GatewayContext, intervalMs: number): () => Promise<void> {
  let running: Promise<unknown> | undefined;
  const timer = setInterval(() => {
    if (running || !ctx.ownership.isLeader()) return;
    const unresolved = ctx.projections.pool.pending().length > 0 || ctx.projections.pool.all().some((e) => e.state === 'settling');
    if (!unresolved) return;
    running = reconcileIntents(ctx)
      .then(
        (report) => {
          const done = [...report.creates, ...report.settles].filter((r) => r.result !== 'unknown');
          if (done.length > 0) ctx.logger.info({ reconcile: report }, 'reconciled chain intents by tx hash');
        },
        (err) => ctx.logger.warn({ err: { message: (err as Error).message } }, 'intent reconciliation failed; retrying later'),
      )
      .finally(() => (running = undefined));
  }, intervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    // A run may be waiting on a slow chain; shutdown does not wait for it long (it is retried on start).
    await Promise.race([running, new Promise((r) => setTimeout(r, 1_000).unref())]);
  };
}

/**
 * Ends the requests in flight when the process died, and gives back the nonces it reserved but
 * never sent. Over the devshard protocol the log says exactly which nonces left: each diff is
 * recorded (DevshardDiffSent) before the request carrying it leaves, and a start is committed no
 * later than its diff (both go through the one writer, the start first). So:
 *  - an orphan whose nonce has a recorded diff was sent: its inference is billed by the protocol,
 *    when its host's MsgFinishInference (or a MsgTimeoutInference) reaches a later diff
 *    (protocol-billing.ts records what the log billed short of it);
 *  - an orphan without one never left: it ends unbilled, and its nonce is filled with a diff of
 *    whatever host txs are pending when the next one is composed (no gap on the wire);
 *  - the reservation beyond the last started nonce was never used: released (NoncesReleased), so
 *    the next request continues right after it and no nonce is skipped.
 * Should the log ever hold diffs above the last recorded start (it cannot, by the order above),
 * those nonces are recorded as used without a start (NoncesSkipped, exactly that range).
 */
async function endCrashedRequests(ctx: GatewayContext, escrowId: string, report: ReconcileReport): Promise<void> {
  const lastSent = await lastSentNonce(ctx, escrowId);
  const records = await ctx.engine.readStream(escrowStream(escrowId));
  // The state after the reads: nothing is awaited from here to the decision.
  const c = ctx.engine.escrow(escrowId)!.context;
  const nonceOf = new Map<string, number>();
  for (const r of eachRequestEvent(records)) {
    if (r.type === 'InferenceStarted' && Object.hasOwn(c.pending, r.data.requestId)) nonceOf.set(r.data.requestId, r.data.nonce);
  }
  const orphans = Object.keys(c.pending)
    .map((requestId) => ({ requestId, nonce: nonceOf.get(requestId) ?? 0 }))
    .sort((a, b) => a.nonce - b.nonce);
  const events: NewEvent[] = orphans.map((o) => {
    const sent = o.nonce <= lastSent;
    return newEvent(
      'InferenceFailed',
      {
        requestId: o.requestId,
        nonce: o.nonce,
        reason: sent
          ? 'gateway restarted while the request was in flight; its inference is billed when its host\'s MsgFinishInference reaches a diff'
          : 'gateway restarted before the request left (no diff of its nonce in the log); never sent, not billed',
        usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
        cost: '0',
      },
      META,
    );
  });
  report.orphanedRequests += events.length;
  // Without the protocol (upstream mode) no diff says which nonces left: the whole reservation is skipped.
  const usedTo = ctx.billing ? Math.max(c.nonce, lastSent) : (c.nonceReserved ?? c.nonce);
  if (usedTo > c.nonce && c.nonceReserved != null && usedTo <= c.nonceReserved) {
    const skip = { from: c.nonce + 1, upTo: usedTo };
    const reason = ctx.billing
      ? 'sent to the hosts by the previous run (their diffs are in the log) before their starts were recorded'
      : 'reserved by the previous run, which stopped without recording whether they were used';
    const event = newEvent('NoncesSkipped', { ...skip, reason }, META);
    if (ctx.engine.canEscrow(escrowId, event)) {
      events.push(event);
      report.noncesSkipped.push({ escrowId, ...skip });
    }
  }
  if (events.length > 0) await ctx.engine.decideEscrow('escrow', escrowId, events);
  // The rest of the reservation was never used (the log says so over the protocol): given back.
  const after = ctx.engine.escrow(escrowId)!.context;
  if (after.nonceReserved != null && after.nonceReserved > after.nonce) {
    const release = newEvent('NoncesReleased', { upTo: after.nonce }, META);
    if (ctx.engine.canEscrow(escrowId, release)) {
      await ctx.engine.decideEscrow('escrow', escrowId, [release]);
      report.noncesReleased.push({ escrowId, upTo: after.nonce, released: after.nonceReserved - after.nonce });
    }
  }
}

/** The last nonce whose diff the log holds (0: none; upstream mode sends no diffs). */
async function lastSentNonce(ctx: GatewayContext, escrowId: string): Promise<number> {
  let last = 0;
  for (const r of await ctx.engine.readStream(devshardSessionStream(escrowId))) {
    if (r.type === 'DevshardDiffSent') last = Math.max(last, Number(r.data.nonce));
  }
  return last;
}
