/**
 * `shardgate explain rotation`: what each rotation did, in order, from the log alone. Pure: give it
 * the recorded events (any order-preserving subset that holds the `rotation-*` streams and the
 * escrow / intent streams they name) and it answers per model and cycle the steps taken, and for a
 * failed or unfinished cycle the failing step, the chain's reason, what was suppressed, which
 * settles still wait on in-flight requests or on a retry, and which ones can no longer be settled
 * because their settle window closed; the same for the settle of each escrow a depletion
 * replacement replaced. A settle deferred while requests were in flight whose drained attempt
 * failed (EscrowSettleFailed with `attempt` or `windowClosed`, retried by the drain reactor) is
 * explained where its deferral is: in the cycle or the replacement that asked for it.
 */
import { parseStreamId, upcast, type EscrowEventData, type EscrowRole, type RotationEventData } from '../events/catalog.js';
import type { RecordedEvent } from '../events/envelope.js';
import { Projections } from './projections.js';
import { at, reasonOf, settleName, short, WINDOW_CLOSED, type ExplainCycle, type ExplainFailure, type ExplainFilter, type ExplainReplacement, type RotationExplanation } from './rotation-explain-types.js';

export * from './rotation-explain-types.js';
export { formatExplain } from './rotation-explain-format.js';

/** Explains every rotation in the log (optionally one model and / or one epoch). */
export function explainRotation(records: Iterable<RecordedEvent>, filter: ExplainFilter = {}): RotationExplanation {
  const cycles: ExplainCycle[] = [];
  const replacements: ExplainReplacement[] = [];
  const current = new Map<string, ExplainCycle>();
  /** intent id → where its outcome is reported. */
  const intents = new Map<string, { cycle?: ExplainCycle; replacement?: ExplainReplacement; role: EscrowRole }>();
  /** escrow id → the cycle that decided its settle. */
  const settling = new Map<string, ExplainCycle>();
  // In-flight counts as the escrow machine folds them (its guards: a refused start counts nothing).
  const folded = new Projections();
  /** escrow id → its epoch (settle window: that epoch and the next). */
  const escrowEpoch = new Map<string, number>();
  /** old escrow id → the latest depletion replacement decided for it. */
  const replaced = new Map<string, ExplainReplacement>();

  const push = (cycle: ExplainCycle, r: RecordedEvent, text: string) => cycle.steps.push({ position: r.position, time: r.time, event: r.type, text });

  for (const record of records) {
    folded.apply(record);
    const stream = parseStreamId(record.streamId);
    const e = upcast(record);
    if (!e) continue;

    if (stream.kind === 'create-intent' && e.type === 'EscrowCreateFailed') {
      const link = intents.get(e.data.intentId);
      if (link?.cycle) {
        const created = link.cycle.created.find((x) => x.intentId === e.data.intentId);
        if (created) created.failed = true;
        push(link.cycle, record, `${link.role} escrow create refused by the chain: ${reasonOf(e.data.error)} (intent ${short(e.data.intentId)})`);
      }
      if (link?.replacement) link.replacement.failure = e.data.error;
      continue;
    }

    if (stream.kind === 'escrow') {
      const id = stream.id;
      switch (e.type) {
        case 'EscrowCreated': {
          escrowEpoch.set(id, e.data.epoch);
          const link = e.data.intentId ? intents.get(e.data.intentId) : undefined;
          if (link?.cycle) {
            const created = link.cycle.created.find((x) => x.intentId === e.data.intentId);
            if (created) created.escrowId = id;
            push(link.cycle, record, `${link.role} escrow ${id} created on chain at height ${e.data.height} (epoch ${e.data.epoch}, deposit ${e.data.amount})`);
          }
          if (link?.replacement) link.replacement.replacementId = id;
          break;
        }
        case 'EscrowSettleDeferred':
        case 'EscrowSettleRequested':
        case 'EscrowSettled':
        case 'EscrowSettleFailed': {
          const drained = e.type === 'EscrowSettleFailed' ? drainedFailure(id, e.data, record.position) : undefined;
          const rep = replaced.get(id);
          if (drained && rep) replacedSettleFailed(rep, drained);
          const retried = rep?.settle;
          if (retried && e.type === 'EscrowSettleRequested') {
            retried.state = 'settling';
            delete retried.retry;
          } else if (retried && e.type === 'EscrowSettled') {
            retried.state = 'settled';
            retried.settledAt = e.data.height;
            delete retried.retry;
          }
          const cycle = settling.get(id);
          const s = cycle?.settles.find((x) => x.escrowId === id);
          if (!cycle || !s) break;
          if (e.type === 'EscrowSettleDeferred') {
            s.state = 'deferred';
            push(cycle, record, `settle of escrow ${id} deferred: ${e.data.inFlight} request(s) in flight`);
          } else if (e.type === 'EscrowSettleRequested') {
            s.state = 'settling';
            delete s.retry;
          } else if (e.type === 'EscrowSettled') {
            s.state = 'settled';
            delete s.retry;
            const money = e.data.totalPayout !== undefined ? `; total payout ${e.data.totalPayout}, fees ${e.data.fees ?? '?'}, deposit ${BigInt(e.data.totalPayout) + BigInt(e.data.refund)}` : '';
            push(cycle, record, `escrow ${id} settled on chain at height ${e.data.height} (refund ${e.data.refund}${money})`);
          } else if (drained && e.type === 'EscrowSettleFailed') {
            cycle.failures.push(drained);
            s.reason = reasonOf(drained.error);
            settleAfter(s, drained);
            push(cycle, record, settleFailedText(drained, `height ${e.data.height ?? '?'}`, escrowEpoch.get(id), e.data.windowClosed === true));
          } else {
            s.state = 'failed';
            s.reason = e.data.error ? reasonOf(e.data.error) : e.data.reason;
            push(cycle, record, `settle of escrow ${id} failed: ${s.reason}`);
          }
          break;
        }
      }
      continue;
    }

    if (stream.kind !== 'rotation') continue;
    const model = stream.model;
    let cycle = current.get(model);
    switch (e.type) {
      case 'RotationPhaseStarted': {
        const d = e.data;
        if (d.phase === 1) {
          cycle = {
            model,
            epoch: d.chain.epoch,
            phase2Epoch: null,
            startHeight: d.chain.height,
            boundaryHeight: d.chain.nextBoundaryHeight,
            status: 'in_progress',
            stage: 'phase1',
            steps: [],
            failures: [],
            suppressed: [],
            created: [],
            promoted: [],
            settles: [],
          };
          cycles.push(cycle);
          current.set(model, cycle);
          push(cycle, record, `phase 1 started at ${at(d.chain)}, ${d.chain.blocksUntilBoundary} blocks before the boundary at ${d.chain.nextBoundaryHeight}: ${d.target} temporary escrow(s) wanted, ${d.existing} regular routable`);
        } else if (cycle) {
          cycle.stage = 'phase2';
          cycle.phase2Epoch = d.chain.epoch;
          push(cycle, record, `phase 2 started at ${at(d.chain)} (PoC window over): ${d.target} regular escrow(s) wanted, ${d.existing} regular routable`);
        }
        break;
      }
      case 'RotationCreateDecided':
        if (!cycle) break;
        for (const id of e.data.intentIds) {
          intents.set(id, { cycle, role: e.data.role });
          cycle.created.push({ role: e.data.role, intentId: id, escrowId: null, failed: false });
        }
        push(cycle, record, `decided to create ${e.data.intentIds.length} ${e.data.role} escrow(s) at ${at(e.data.chain)} (intents ${e.data.intentIds.map(short).join(', ')})`);
        break;
      case 'RotationCreateSuppressed':
        if (!cycle) break;
        cycle.suppressed.push({ role: e.data.role, epoch: e.data.chain.epoch, reason: e.data.reason });
        push(cycle, record, `${e.data.role} creates suppressed for epoch ${e.data.chain.epoch}: an earlier create failed on chain (${e.data.reason})`);
        break;
      case 'RotationPromoted':
        if (!cycle) break;
        cycle.promoted.push(...e.data.escrowIds);
        push(cycle, record, `fallback: ${e.data.escrowIds.length ? `regular escrow(s) ${e.data.escrowIds.join(', ')}` : 'no regular escrow'} promoted to the temporary role (kept serving through the transition)`);
        break;
      case 'RotationSettleDecided':
        if (!cycle) break;
        for (const id of e.data.escrowIds) {
          settling.set(id, cycle);
          cycle.settles.push({ escrowId: id, role: e.data.role, state: 'decided', inFlight: 0 });
        }
        push(cycle, record, e.data.escrowIds.length ? `decided to finalize and settle ${e.data.role} escrow(s) ${e.data.escrowIds.join(', ')}` : `no ${e.data.role} escrow to settle`);
        break;
      case 'RotationFailed': {
        const d = e.data;
        // A settle's failures belong to the cycle that decided it (a retry may fail in a later one).
        const owner = (d.step === 'settle' && d.escrowId ? settling.get(d.escrowId) : undefined) ?? cycle;
        if (!owner) break;
        const failure = failureOf(d, record.position);
        owner.failures.push(failure);
        if (d.suppress && d.role) owner.suppressed.push({ role: d.role, epoch: d.chain.epoch, reason: reasonOf(d.error) });
        if (d.step === 'settle') {
          const s = owner.settles.find((x) => x.escrowId === d.escrowId);
          if (s) {
            s.reason = reasonOf(d.error);
            settleAfter(s, d);
          }
          push(owner, record, settleFailedText(failure, at(d.chain), d.escrowId ? escrowEpoch.get(d.escrowId) : undefined, d.windowClosed === true));
          break;
        }
        if (d.configuration) {
          push(owner, record, `WAITING ${d.step.replace('_', ' ')} at ${at(d.chain)}: ${d.error.message}`);
          break;
        }
        push(
          owner,
          record,
          `FAILED ${d.step.replace('_', ' ')} at ${at(d.chain)}: ${reasonOf(d.error)}${d.suppress && d.role ? `; further ${d.role} creates for this model in epoch ${d.chain.epoch} are suppressed` : ''}`,
        );
        break;
      }
      case 'RotationPhaseCompleted':
        if (!cycle) break;
        if (e.data.phase === 1) {
          cycle.stage = 'waiting_poc';
          push(cycle, record, `phase 1 completed at ${at(e.data.chain)}: waiting for the boundary and the end of its PoC window`);
        } else {
          cycle.stage = 'done';
          cycle.status = 'completed';
          const bridges = [...cycle.created.filter((x) => x.role === 'temporary' && x.escrowId).map((x) => x.escrowId!), ...cycle.promoted];
          const settledBridges = cycle.settles.filter((x) => x.role === 'temporary').length;
          if (bridges.length > 0 && settledBridges === 0) {
            push(cycle, record, `no replacement escrow was routable, so bridge escrow(s) ${bridges.join(', ')} keep serving (not settled)`);
          }
          push(cycle, record, `phase 2 completed at ${at(e.data.chain)}: ${e.data.created} create(s) decided, ${e.data.promoted} promoted, ${e.data.settleDecided} settle(s) decided in this cycle`);
          current.delete(model);
        }
        break;
      case 'DepletionReplacementDecided': {
        const d = e.data;
        const rep: ExplainReplacement = {
          model,
          escrowId: d.escrowId,
          reason: d.reason,
          epoch: d.chain.epoch,
          height: d.chain.height,
          intentId: d.intentId,
          replacementId: null,
          failure: null,
          suppressed: false,
          position: record.position,
          time: record.time,
        };
        replacements.push(rep);
        replaced.set(d.escrowId, rep);
        intents.set(d.intentId, { replacement: rep, role: 'regular' });
        break;
      }
      case 'DepletionReplacementFailed': {
        const d = e.data;
        let rep = [...replacements].reverse().find((r) => r.model === model && r.escrowId === d.escrowId);
        if (!rep) {
          // Its decision is not in the records given: the failure stands alone.
          rep = { model, escrowId: d.escrowId, reason: d.reason, epoch: d.chain.epoch, height: d.chain.height, intentId: '', replacementId: null, failure: null, suppressed: false, position: record.position, time: record.time };
          replacements.push(rep);
        }
        if (d.step === 'settle') {
          replacedSettleFailed(rep, failureOf({ ...d, step: 'settle' }, record.position));
        } else {
          rep.failure = d.error;
          rep.suppressed = d.suppress;
        }
        break;
      }
    }
  }

  const inFlight = new Map(folded.pool.all().map((e) => [e.escrowId, e.inFlight]));
  for (const c of cycles) for (const s of c.settles) s.inFlight = inFlight.get(s.escrowId) ?? 0;
  const keep = (model: string, epochs: (number | null)[]) =>
    (filter.model === undefined || filter.model === model) && (filter.epoch === undefined || epochs.includes(filter.epoch));
  return {
    cycles: cycles.filter((c) => keep(c.model, [c.epoch, c.phase2Epoch])),
    replacements: replacements.filter((r) => keep(r.model, [r.epoch])),
  };
}

/** The fields of a recorded failure (RotationFailed, or a replacement's DepletionReplacementFailed) that explain reads. */
type RecordedFailure = Omit<RotationEventData['RotationFailed'], 'model' | 'chain' | 'step'> & { step: string };

/**
 * A recorded failure as explained. A settle's window closed when the gateway gave its retry up or
 * the chain answered wrong_epoch.
 */
function failureOf(d: RecordedFailure, position: number): ExplainFailure {
  const windowClosed = d.step === 'settle' && (d.windowClosed === true || d.error.kind === 'wrong_epoch');
  return {
    step: d.step,
    role: d.role ?? null,
    error: d.error,
    suppressed: d.suppress,
    position,
    ...(d.intentId ? { intentId: d.intentId } : {}),
    ...(d.escrowId ? { escrowId: d.escrowId } : {}),
    ...(d.attempt !== undefined ? { attempt: d.attempt } : {}),
    ...(d.retryAtHeight !== undefined ? { retryAtHeight: d.retryAtHeight } : {}),
    ...(windowClosed ? { windowClosed } : {}),
    ...(d.configuration ? { configuration: d.configuration } : {}),
  };
}

/** Where a settle stands after a failed attempt: waiting for its retry, or failed for good. */
function settleAfter(s: { state: string; retry?: { attempt: number; atHeight: number } }, d: Pick<RecordedFailure, 'attempt' | 'retryAtHeight'>): void {
  if (d.retryAtHeight !== undefined) {
    s.state = 'retrying';
    s.retry = { attempt: (d.attempt ?? 1) + 1, atHeight: d.retryAtHeight };
  } else {
    s.state = 'failed';
    delete s.retry;
  }
}

/**
 * A drained settle's failure as explained; undefined for a failure recorded without the drain
 * reactor's fields (every other settle failure, and all of them in logs before drained retries).
 */
function drainedFailure(escrowId: string, d: EscrowEventData['EscrowSettleFailed'], position: number): ExplainFailure | undefined {
  if (d.attempt === undefined && d.windowClosed !== true) return undefined;
  const error = d.error ?? { kind: 'rejected' as const, message: d.reason };
  return { ...failureOf({ step: 'settle', escrowId, error, suppress: false, attempt: d.attempt, retryAtHeight: d.retryAtHeight, windowClosed: d.windowClosed }, position), drained: true };
}

/** The step line of a failed settle attempt at `where`, or of its retry given up (`givenUp`, nothing sent). */
function settleFailedText(f: ExplainFailure, where: string, escrowEpoch: number | undefined, givenUp: boolean): string {
  const what = `${settleName(f)} of escrow ${f.escrowId ?? '?'}`;
  if (givenUp) return `GAVE UP ${what} at ${where}: ${f.error.message}; the unused deposit can no longer be settled on chain`;
  const window = escrowEpoch !== undefined ? ` (settle window: epochs ${escrowEpoch} and ${escrowEpoch + 1})` : '';
  const attempt = f.attempt !== undefined ? ` (attempt ${f.attempt})` : '';
  const next = f.retryAtHeight !== undefined ? `transient, tried again from height ${f.retryAtHeight} while the settle window is open${window}` : f.windowClosed ? WINDOW_CLOSED : 'not retried';
  return `FAILED ${what}${attempt} at ${where}: ${reasonOf(f.error)}; ${next}`;
}

/** A failed attempt at (or the given-up retry of) the settle of a replacement's old escrow. */
function replacedSettleFailed(rep: ExplainReplacement, failure: ExplainFailure): void {
  const settle = (rep.settle ??= { state: 'failed', failures: [] });
  settle.failures.push(failure);
  settleAfter(settle, failure);
}

