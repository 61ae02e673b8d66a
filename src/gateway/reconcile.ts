/**
 * Start-up reconciliation (docs/architecture.md, principle 3): what the log says was under way when the
 * process stopped is settled by asking the chain, never by guessing.
 *  - a create intent with no outcome: look its tx up by hash; if the chain never saw it, broadcast
 *    the recorded bytes again (same hash: it cannot create twice); the outcome is then recorded;
 *  - an escrow in `settling`: the same with its settle tx;
 *  - requests in flight when the process died (orphans): they can no longer end here, so they are
 *    recorded as failed and their reservations released;
 *  - nonces the previous run reserved beyond the last recorded start (NoncesReserved): a request may
 *    have used one while its InferenceStarted was still committing, so they are recorded as skipped
 *    (NoncesSkipped) and the next request takes the one after. A clean stop releases its unused ones
 *    itself (`releaseUnusedNonces`), so this happens after a crash only.
 *  What orphans and unrecorded requests cost is asked of the hosts, not guessed: a host may have
 *  served them before the gateway died, and it will refuse to sign a settlement that bills less than
 *  it completed. So for each slot concerned the gateway offers its own figure (what its log already
 *  bills there); a host that refuses with `cost_mismatch` says what it served, and the difference
 *  up to the host's confirmed (completed) cost is billed to that slot's orphans, never more than
 *  each one's reservation (which the balance guaranteed), and what remains, when the slot executed
 *  skipped nonces, as UsageRecovered. Nothing is billed beyond the unspent deposit. A host that
 *  cannot be asked leaves them at cost 0; settle then reports the host's refusal.
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
import { createHash } from 'node:crypto';
import { createIntentStream, escrowStream, newEvent, type EscrowEventData } from '../events/catalog.js';
import type { EventMetadata, NewEvent } from '../events/envelope.js';
import { eachRequestEvent } from '../events/request-data.js';
import { txSequence } from '../chain/tx-sequence.js';
import { collectSignaturesDetailed } from '../network/collect-signatures.js';
import type { GatewayContext } from './context.js';
import { busyWith, recordedTxOutcome } from './escrows/broadcast.js';
import { resolvePendingCreate } from './escrows/create.js';
import { recordSettleFailure, resolveSettle } from './escrows/lifecycle.js';
import { settleErrorOf } from './escrows/pruned.js';
import { withModelLock } from './rotation/lock.js';
import { drainedAttemptOf, ownerAttemptOf, retryAfter, windowNote, type OwnerAttempt } from './rotation/settle-retry.js';
import { errorInfo, readChainOr, recordOwnerSettleFailure, RotationRefused } from './rotation/steps.js';

const CHAIN_TIMEOUT_MS = 5_000;

const META: EventMetadata = { actor: { kind: 'reconciler' } };

export interface ReconcileReport {
  creates: { intentId: string; result: 'created' | 'failed' | 'unknown' }[];
  settles: { escrowId: string; result: 'settled' | 'failed' | 'unknown' }[];
  orphanedRequests: number;
  /** Orphans billed with what their host reports it served. */
  orphansBilled: { escrowId: string; nonce: number; cost: string }[];
  /** Reserved nonces of the previous run recorded as skipped. */
  noncesSkipped: { escrowId: string; from: number; upTo: number }[];
  /** Usage hosts reported beyond the log on slots that executed skipped nonces. */
  usageRecovered: { escrowId: string; slotId: number; cost: string }[];
}

const emptyReport = (): ReconcileReport => ({ creates: [], settles: [], orphanedRequests: 0, orphansBilled: [], noncesSkipped: [], usageRecovered: [] });

/** The nonces reserved beyond the last recorded start, if the escrow's state lets them be skipped. */
function unusedReservation(ctx: GatewayContext, escrowId: string): { from: number; upTo: number } | undefined {
  const snap = ctx.engine.escrow(escrowId);
  const c = snap?.context;
  if (!c || c.nonceReserved == null || c.nonceReserved <= c.nonce) return undefined;
  const range = { from: c.nonce + 1, upTo: c.nonceReserved };
  return ctx.engine.canEscrow(escrowId, { type: 'NoncesSkipped', data: { ...range, reason: '' } }) ? range : undefined;
}

/**
 * At a clean stop, once nothing is in flight: every start is recorded, so each escrow's reservation
 * is cut back to its last used nonce (NoncesReleased) and the next run continues right after it.
 */
export async function releaseUnusedNonces(ctx: GatewayContext): Promise<void> {
  for (const e of ctx.projections.pool.all()) {
    const snap = ctx.engine.escrow(e.escrowId);
    if (!snap || snap.context.inFlight > 0) continue;
    const event = newEvent('NoncesReleased', { upTo: snap.context.nonce }, { actor: { kind: 'shutdown' } });
    if (ctx.engine.canEscrow(e.escrowId, event)) await ctx.engine.decideEscrow('escrow', e.escrowId, [event]);
  }
}

export async function reconcile(ctx: GatewayContext): Promise<ReconcileReport> {
  const report = emptyReport();
  for (const e of ctx.projections.pool.all()) {
    const snap = ctx.engine.escrow(e.escrowId);
    if (snap && (Object.keys(snap.context.pending).length > 0 || unusedReservation(ctx, e.escrowId))) await endCrashedRequests(ctx, e.escrowId, report);
  }
  await reconcileIntents(ctx, report);
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
    const first = ctx.engine.readStream(createIntentStream(p.intentId))[0];
    const sequence = txSequence(first?.type === 'EscrowCreateRequested' ? first.data.txBytes : undefined) ?? Infinity;
    work.push({ sequence, run: () => reconcileCreate(ctx, p.intentId, report) });
  }
  for (const e of ctx.projections.pool.all()) {
    if (ctx.engine.escrow(e.escrowId)?.value !== 'settling') continue;
    work.push({ sequence: txSequence(lastSettleIntent(ctx, e.escrowId)?.txBytes) ?? Infinity, run: () => reconcileSettle(ctx, e.escrowId, busy, report) });
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
  const owned = model !== null && ownerAttemptOf(lastSettleIntent(ctx, escrowId) ?? {}) !== undefined;
  const locked = <T>(f: () => Promise<T>): Promise<T> => (owned ? withModelLock(ctx, model, f) : f());
  await locked(() => ctx.engine.serial(escrowStream(escrowId), async () => {
    const snap = ctx.engine.escrow(escrowId);
    if (snap?.value !== 'settling') return;
    const req = lastSettleIntent(ctx, escrowId);
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
function lastSettleIntent(ctx: GatewayContext, escrowId: string): EscrowEventData['EscrowSettleRequested'] | undefined {
  const recs = ctx.engine.readStream(escrowStream(escrowId));
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
    if (running) return;
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
 * Ends the requests in flight when the process died and skips the nonces it had reserved, billed
 * with what their hosts served.
 */
async function endCrashedRequests(ctx: GatewayContext, escrowId: string, report: ReconcileReport): Promise<void> {
  const snap = ctx.engine.escrow(escrowId)!;
  const c = snap.context;
  const skip = unusedReservation(ctx, escrowId);
  const slots = c.slots;
  const started = new Map<string, { nonce: number; reserved: bigint }>();
  const known = new Map<number, bigint>(); // slot index -> cost the log already bills there
  for (const r of eachRequestEvent(ctx.engine.readStream(escrowStream(escrowId)))) {
    if (r.type === 'InferenceStarted') started.set(r.data.requestId, { nonce: r.data.nonce, reserved: BigInt(r.data.reservedCost) });
    if ((r.type === 'InferenceFinished' || r.type === 'InferenceFailed') && slots.length > 0) {
      const i = r.data.nonce % slots.length;
      known.set(i, (known.get(i) ?? 0n) + BigInt(r.data.cost));
    }
    if (r.type === 'UsageRecovered') {
      const i = slots.findIndex((s) => s.slotId === r.data.slotId);
      if (i >= 0) known.set(i, (known.get(i) ?? 0n) + BigInt(r.data.cost));
    }
  }
  const orphans = Object.keys(c.pending)
    .map((requestId) => ({ requestId, nonce: started.get(requestId)?.nonce ?? 0, reserved: BigInt(c.pending[requestId] ?? started.get(requestId)?.reserved ?? 0n), cost: 0n }))
    .sort((a, b) => a.nonce - b.nonce);

  const recovered: { slotId: number; cost: bigint }[] = [];
  if (slots.length > 0) {
    const bySlot = new Map<number, typeof orphans>();
    for (const o of orphans) {
      const i = o.nonce % slots.length;
      bySlot.set(i, [...(bySlot.get(i) ?? []), o]);
    }
    // slots that executed one of the skipped nonces (an unrecorded request may have run there)
    const skippedSlots = new Set<number>();
    if (skip) for (let n = skip.from; n <= skip.upTo && skippedSlots.size < slots.length; n++) skippedSlots.add(n % slots.length);
    for (const i of skippedSlots) if (!bySlot.has(i)) bySlot.set(i, []);
    const hostStats = slots.map((s, i) => ({ slotId: s.slotId, missed: 0, invalid: 0, cost: known.get(i) ?? 0n, requests: 0 }));
    const probeRoot = createHash('sha256').update(`shardgate/orphan-probe/${escrowId}/${c.nonce}`).digest('hex');
    const asked = [...bySlot.keys()].map((i) => ({ slotId: slots[i]!.slotId, url: slots[i]!.url }));
    const { failures } = await collectSignaturesDetailed(asked, escrowId, { stateRoot: probeRoot, nonce: c.nonce, hostStats }, { timeoutMs: 5_000 }).catch(() => ({ failures: [] }));
    let balance = BigInt(c.balance);
    for (const f of failures) {
      const i = slots.findIndex((s) => s.slotId === f.slotId);
      if (!f.served || i < 0) {
        if (f.status !== 409) ctx.logger.warn({ escrow_id: escrowId, slot_id: f.slotId, reason: f.message }, 'could not ask the host what it served for requests in flight at the crash; they are billed 0');
        continue;
      }
      // Bill the orphans of this slot what the host certainly completed beyond what the log bills.
      let extra = f.served.confirmedCost - (known.get(i) ?? 0n);
      for (const o of bySlot.get(i) ?? []) {
        if (extra <= 0n) break;
        let cost = extra < o.reserved ? extra : o.reserved;
        if (cost > balance) cost = balance;
        o.cost = cost;
        extra -= cost;
        balance -= cost;
      }
      if (extra > 0n && skippedSlots.has(i) && balance > 0n) {
        const cost = extra < balance ? extra : balance;
        recovered.push({ slotId: f.slotId, cost });
        extra -= cost;
        balance -= cost;
      }
      if (extra > 0n) ctx.logger.warn({ escrow_id: escrowId, slot_id: f.slotId, unbilled: extra.toString() }, 'the host reports more served than the requests in flight at the crash reserved');
    }
  }

  const events: NewEvent[] = orphans.map((o) => {
    const billed = o.cost > 0n;
    if (billed) report.orphansBilled.push({ escrowId, nonce: o.nonce, cost: o.cost.toString() });
    return newEvent(
      'InferenceFailed',
      {
        requestId: o.requestId,
        nonce: o.nonce,
        reason: billed ? 'gateway restarted while the request was in flight; billed what the host reports it completed' : 'gateway restarted while the request was in flight',
        usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
        cost: o.cost.toString(),
      },
      META,
    );
  });
  report.orphanedRequests += events.length;
  if (skip) {
    events.push(newEvent('NoncesSkipped', { ...skip, reason: 'reserved by the previous run, which stopped without recording whether they were used' }, META));
    report.noncesSkipped.push({ escrowId, ...skip });
  }
  for (const r of recovered) {
    events.push(newEvent('UsageRecovered', { slotId: r.slotId, cost: r.cost.toString(), reason: 'served by the host for requests the log did not record before the gateway stopped' }, META));
    report.usageRecovered.push({ escrowId, slotId: r.slotId, cost: r.cost.toString() });
  }
  await ctx.engine.decideEscrow('escrow', escrowId, events);
}

