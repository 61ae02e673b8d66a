/**
 * The router's escrow pool: every escrow's statechart snapshot, folded from its streams, and per
 * model the set of routable (state `active`) escrows. Hot-path reads (`pick`, `escrow`) are
 * in-memory; nothing here touches SQL.
 *
 * A creation intent (`escrow-create-<uuid>`) is folded through the escrow machine too; when the
 * escrow stream starts with EscrowCreated naming that intent, the escrow continues from the
 * intent's snapshot, so one escrow's state covers its whole life.
 *
 * Beside it: pool-types.ts (what it hands out and keeps), routable-escrows.ts (the routable sets),
 * escrow-run.ts (a batch fold's runs), stream-refs.ts (parsed stream ids).
 */
import { parseStreamId, SCHEMA_VERSIONS, upcast, type Amount } from '../events/catalog.js';
import { isEntryList, requestFieldsOf } from '../events/fold-read.js';
import type { RecordedEvent } from '../events/envelope.js';
import {
  escrowMachine,
  initialSnapshot,
  persistState,
  restoreState,
  type EscrowContext,
  type EscrowInput,
  type EscrowSnapshot,
  type EscrowState,
} from '../machines/index.js';
import { stepEscrowFast } from '../machines/escrow-fast.js';
import { ACCEPTED, BAIL, EscrowRun } from './escrow-run.js';
import { summary, type EscrowPoolState, type FoldStep, type PendingCreate, type PoolEscrow, type PoolPart, type PoolShared } from './pool-types.js';
import { RoutableEscrows } from './routable-escrows.js';
import type { StreamRef } from './stream-refs.js';

export type { EscrowPoolState, FoldStep, PendingCreate, PoolEscrow, PoolPart, PoolShared } from './pool-types.js';
export { streamRefs, type StreamRef } from './stream-refs.js';

/**
 * A step the write side took for an event it appended to an escrow stream: the snapshot it
 * stepped from and the one it got (engine.ts). `lookup(streamId, type, data)` hands it over once,
 * for the committed record of that event (matched by its data's identity), or undefined.
 */
export interface DecidedStep {
  base: EscrowSnapshot;
  snapshot: EscrowSnapshot;
}
export type DecidedSteps = (streamId: string, type: string, data: unknown) => DecidedStep | undefined;

/** The escrow pool projection. */
export class EscrowPoolProjection {
  private readonly escrows = new Map<string, EscrowSnapshot>();
  /**
   * During a batch fold (beginBatch … endBatch): escrows whose inference events are being folded
   * in a run (escrow-run.ts); their entry in `escrows` is the run's start until the run finishes.
   * Every read finishes the runs first, so nothing outside sees a stale snapshot.
   */
  private runs: Map<string, EscrowRun> | undefined;
  private readonly step: FoldStep = { value: 'none', accepted: false };
  private readonly intents = new Map<string, EscrowSnapshot>();
  private readonly pendingCreates = new Map<string, PendingCreate>();
  private readonly routable = new RoutableEscrows();
  /** pick's parsed usable balance per escrow, with the decimals it was parsed from (usableOf). */
  private readonly usable = new Map<string, { balance: Amount; reserved: Amount; usable: bigint }>();
  /** Position of each escrow's first event (negative: restored, in restore order); orders `merge`. */
  private readonly firstAt = new Map<string, number>();

  /** See adoptDecidedSteps. */
  private decided: DecidedSteps | undefined;

  constructor(private readonly input: EscrowInput = {}) {}

  /**
   * Live folds take the write side's snapshot for an event it decided, when it stepped from the
   * very snapshot this projection holds: the fast path is a pure function of (snapshot, event), so
   * the result is the same, and each chat event is then stepped once instead of twice (~2–4 µs per
   * event). Anything else (an event another path appended, a chain of decisions broken by a failed
   * append) is stepped here as before.
   */
  adoptDecidedSteps(lookup: DecidedSteps): void {
    this.decided = lookup;
  }

  /**
   * Folds one committed record. Returns the escrow (or intent) snapshot after it, or undefined
   * when the record is not an escrow event. Events the machine refuses leave the state unchanged.
   */
  apply(record: RecordedEvent, stream: StreamRef = parseStreamId(record.streamId)): { id: string; snapshot: EscrowSnapshot; accepted: boolean } | undefined {
    if (stream.kind !== 'escrow' && stream.kind !== 'create-intent') return undefined;
    const event = upcast(record);
    if (!event) return undefined;
    if (stream.kind === 'create-intent') {
      const before = this.intents.get(stream.id) ?? initialSnapshot(escrowMachine, this.input);
      const { snapshot, accepted } = stepEscrowFast(before, event);
      this.intents.set(stream.id, snapshot);
      if (accepted && event.type === 'EscrowCreateRequested') {
        const d = event.data;
        this.pendingCreates.set(d.intentId, { intentId: d.intentId, model: d.model, role: d.role, epoch: d.epoch, txHash: d.txHash, position: record.position });
      } else if (accepted && event.type === 'EscrowCreateFailed') {
        this.pendingCreates.delete(event.data.intentId);
      }
      return { id: stream.id, snapshot, accepted };
    }
    const run = this.runs?.get(stream.id);
    if (run) {
      this.runs!.delete(stream.id);
      this.escrows.set(stream.id, run.finish());
    }
    let before = this.escrows.get(stream.id);
    const isNew = !before;
    if (!before) {
      const intentId = event.type === 'EscrowCreated' ? event.data.intentId : undefined;
      before = (intentId && this.intents.get(intentId)) || initialSnapshot(escrowMachine, this.input);
    }
    const decided = this.decided?.(record.streamId, event.type, event.data);
    const { snapshot, accepted } = decided && decided.base === before ? { snapshot: decided.snapshot, accepted: true } : stepEscrowFast(before, event);
    if (event.type === 'EscrowCreated' && accepted && event.data.intentId) {
      this.pendingCreates.delete(event.data.intentId);
      this.intents.delete(event.data.intentId);
    }
    if (isNew) this.firstAt.set(stream.id, record.position);
    this.escrows.set(stream.id, snapshot);
    this.index(stream.id, before, snapshot, record.position);
    return { id: stream.id, snapshot, accepted };
  }

  /**
   * Starts a batch fold: until endBatch, `fold` folds inference events (and nonce reservations)
   * of escrows in a fast state in runs (escrow-run.ts) instead of a snapshot per event. For
   * rebuild and catch-up, where many events are folded before anything reads the pool.
   */
  beginBatch(): void {
    this.runs ??= new Map();
  }

  /** Ends a batch fold: every run's snapshot is stored. */
  endBatch(): void {
    this.finishRuns();
    this.runs = undefined;
  }

  /**
   * `apply` for a batch fold: the state value after the record and whether it was accepted
   * (undefined when not an escrow event). The returned object is reused by the next call.
   */
  fold(record: RecordedEvent, stream: StreamRef): FoldStep | undefined {
    const runs = this.runs;
    if (runs && stream.kind === 'escrow') {
      const type = record.type;
      // NoncesReserved too: one in every ~256 requests of an escrow, it would otherwise end the run.
      if (type === 'InferencesRecorded' || type === 'InferenceStarted' || type === 'InferenceFinished' || type === 'InferenceFailed' || type === 'NoncesReserved') {
        let run = runs.get(stream.id);
        if (!run) {
          const snapshot = this.escrows.get(stream.id);
          run = snapshot && EscrowRun.of(snapshot);
          if (run) runs.set(stream.id, run);
        }
        if (run) {
          // A record read for folding may carry the fields the run reads (its data still unparsed).
          const request = record.schemaVersion === SCHEMA_VERSIONS[type] ? requestFieldsOf(record) : undefined;
          let outcome: number;
          if (request && isEntryList(request)) outcome = run.foldEntryFields(request);
          else if (request) outcome = run.foldRequest(type, request.requestId, request.nonce, type === 'InferenceStarted' ? request.reservedCost : request.cost);
          else {
            const event = upcast(record)!;
            outcome = event.type === 'InferencesRecorded' ? run.foldEntries(event.data.entries) : run.fold(event.type, event.data);
          }
          if (outcome !== BAIL) {
            // The state value is the run's throughout, so routability changes at most once, here.
            if (!run.indexed) {
              this.index(stream.id, run.base, run.base, record.position);
              run.indexed = true;
            }
            this.step.value = run.base.value;
            this.step.accepted = outcome === ACCEPTED;
            return this.step;
          }
        }
      }
    }
    const result = this.apply(record, stream);
    if (!result) return undefined;
    this.step.value = result.snapshot.value;
    this.step.accepted = result.accepted;
    return this.step;
  }

  /** Stores every run's snapshot (before any read; runs start again with the next inference event). */
  private finishRuns(): void {
    const runs = this.runs;
    if (!runs?.size) return;
    for (const [id, run] of runs) this.escrows.set(id, run.finish());
    runs.clear();
  }

  private index(id: string, before: EscrowSnapshot, after: EscrowSnapshot, position: number): void {
    this.routable.update(id, before, after, position);
  }


  /**
   * The routable escrow of `model` with the fewest requests in flight whose usable balance
   * (balance − reserved) covers `reservedCost`; ties go to the larger usable balance.
   * O(number of routable escrows of the model).
   */
  pick(model: string, reservedCost: Amount = '0'): PoolEscrow | undefined {
    this.finishRuns();
    const ids = this.routable.of(model);
    if (!ids) return undefined;
    const need = BigInt(reservedCost);
    let best: EscrowSnapshot | undefined;
    let bestId = '';
    let bestUsable = 0n;
    for (const id of ids) {
      const s = this.escrows.get(id)!;
      const c = s.context;
      if (c.nonce + 1 >= c.routingStop) continue;
      // More in flight than the best so far cannot win: skip its two decimal parses (per request, per escrow).
      if (best && c.inFlight > best.context.inFlight) continue;
      const usable = this.usableOf(id, c.balance, c.reserved);
      if (usable < need) continue;
      if (!best || c.inFlight < best.context.inFlight || (c.inFlight === best.context.inFlight && usable > bestUsable)) {
        best = s;
        bestId = id;
        bestUsable = usable;
      }
    }
    return best && summary(bestId, best);
  }

  /**
   * balance − reserved as a bigint, parsed again only when either decimal changed: a pick reads
   * every routable escrow of the model, and most did not change since the last request.
   */
  private usableOf(id: string, balance: Amount, reserved: Amount): bigint {
    const hit = this.usable.get(id);
    if (hit && hit.balance === balance && hit.reserved === reserved) return hit.usable;
    const usable = BigInt(balance) - BigInt(reserved);
    if (hit) {
      hit.balance = balance;
      hit.reserved = reserved;
      hit.usable = usable;
    } else this.usable.set(id, { balance, reserved, usable });
    return usable;
  }

  /** The escrow's statechart snapshot: ask `.can(event)` before appending to `escrow-<id>`. */
  escrow(escrowId: string): EscrowSnapshot | undefined {
    this.finishRuns();
    return this.escrows.get(escrowId);
  }

  /** The snapshot of a creation intent (until its EscrowCreated). */
  intent(intentId: string): EscrowSnapshot | undefined {
    return this.intents.get(intentId);
  }

  /** Whether any escrow of the model is routable (no allocation; the per-request check). */
  hasRoutable(model: string): boolean {
    return (this.routable.of(model)?.size ?? 0) > 0;
  }

  /** Routable escrows of a model. */
  routableOf(model: string): PoolEscrow[] {
    this.finishRuns();
    return [...(this.routable.of(model) ?? [])].map((id) => summary(id, this.escrows.get(id)!));
  }

  /** Every escrow the gateway knows (removed ones included), in first-seen order. */
  all(): PoolEscrow[] {
    this.finishRuns();
    return [...this.escrows].map(([id, s]) => summary(id, s));
  }

  /** Escrow contexts keyed by id (read-only view, for status and rotation decisions). */
  contexts(): ReadonlyMap<string, { state: EscrowState; context: EscrowContext }> {
    this.finishRuns();
    return new Map([...this.escrows].map(([id, s]) => [id, { state: s.value as EscrowState, context: s.context }]));
  }

  /** Creation intents with no outcome yet. */
  pending(): PendingCreate[] {
    return [...this.pendingCreates.values()];
  }

  /** Models that have at least one escrow. */
  models(): string[] {
    this.finishRuns();
    return [...new Set([...this.escrows.values()].map((s) => s.context.model ?? '').filter(Boolean))].sort();
  }

  /** JSON-safe state, for checkpoints and rebuild-equality tests. */
  snapshot(): EscrowPoolState {
    this.finishRuns();
    const obj = (m: Map<string, EscrowSnapshot>) => Object.fromEntries([...m].map(([id, s]) => [id, persistState(s)]));
    return { escrows: obj(this.escrows), intents: obj(this.intents), pendingCreates: Object.fromEntries(this.pendingCreates) };
  }

  /** Replaces the state with a checkpointed one. */
  restore(state: EscrowPoolState): void {
    this.clear();
    for (const [id, p] of Object.entries(state.intents)) this.intents.set(id, restoreState(escrowMachine, p));
    const escrows = Object.entries(state.escrows);
    escrows.forEach(([id, p], i) => {
      const s = restoreState(escrowMachine, p);
      this.escrows.set(id, s);
      this.firstAt.set(id, i - escrows.length);
      this.index(id, s, s, i - escrows.length);
    });
    for (const [id, p] of Object.entries(state.pendingCreates)) this.pendingCreates.set(id, p);
  }

  /** The escrows `owns` picks, for `merge` (see PoolPart). */
  part(owns: (escrowId: string) => boolean): PoolPart {
    this.finishRuns();
    const escrows: PoolPart['escrows'] = [];
    for (const [id, s] of this.escrows) if (owns(id)) escrows.push([id, persistState(s), this.firstAt.get(id)!]);
    return { escrows, routable: this.routable.part(owns) };
  }

  /** The creation intents, for `merge`. */
  shared(): PoolShared {
    return { intents: [...this.intents].map(([id, s]) => [id, persistState(s)]), pendingCreates: [...this.pendingCreates] };
  }

  /**
   * Replaces the state with the union of partitions: the same escrows, in the same order, and the
   * same routable sets in the same order as one fold of the whole log gives, when each escrow is in
   * exactly one part (that of the partition that folded all its events) and `shared` comes from any.
   */
  merge(shared: PoolShared, parts: PoolPart[]): void {
    this.clear();
    for (const [id, p] of shared.intents) this.intents.set(id, restoreState(escrowMachine, p));
    for (const [id, p] of shared.pendingCreates) this.pendingCreates.set(id, p);
    for (const [id, p, firstAt] of parts.flatMap((part) => part.escrows).sort((a, b) => a[2] - b[2])) {
      this.escrows.set(id, restoreState(escrowMachine, p));
      this.firstAt.set(id, firstAt);
    }
    this.routable.merge(parts.flatMap((part) => part.routable));
  }

  private clear(): void {
    this.runs?.clear();
    this.escrows.clear();
    this.usable.clear();
    this.intents.clear();
    this.pendingCreates.clear();
    this.routable.clear();
    this.firstAt.clear();
  }
}
