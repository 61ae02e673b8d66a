/**
 * Escrow timelines: per escrow, each event with position, time, type, actor and the escrow's state
 * after it. A creation intent's entries move into the escrow's timeline at EscrowCreated.
 * Bounded per escrow (inference events dominate): the newest `limit` entries and a total count.
 */
import { parseStreamId } from '../events/catalog.js';
import type { Actor, RecordedEvent } from '../events/envelope.js';
import { deferredColumnsOf, isEntryList, metadataJsonOf, requestFieldsOf } from '../events/fold-read.js';
import { stateName } from '../machines/index.js';
import { actorLabel } from './actor.js';
import { EscrowPoolProjection, type FoldStep, type StreamRef } from './escrow-pool.js';
import { TimelineRing, type Timeline } from './timeline-ring.js';
import { countEntries } from '../events/request-data.js';

export type { Timeline, TimelineEntry } from './timeline-ring.js';

export interface TimelineState {
  escrows: Record<string, Timeline>;
  intents: Record<string, Timeline>;
}

export const DEFAULT_TIMELINE_LIMIT = 1_000;

/** Client labels interned by key id; past this many (keys are configured, so never in practice) the table starts over. */
const LABELS_MAX = 10_000;

/**
 * The escrow-timeline projection: per escrow (and creation intent) a ring of its newest `limit`
 * entries (timeline-ring.ts says why a ring), which readers see as labelled copies.
 */
export class TimelineProjection {
  private escrows = new Map<string, TimelineRing>();
  private intents = new Map<string, TimelineRing>();
  /** Position of each escrow timeline's first event (negative: restored, in restore order); orders `merge`. */
  private firstAt = new Map<string, number>();
  private readonly ownsPool: boolean;
  /** Client actor labels by key id (a new label string per event would be kept by every entry). */
  private labels = new Map<string, string>();
  /** The last state value named: fast-path snapshots share their value, nested names are built strings. */
  private lastValue: unknown;
  private lastState = '';
  private readonly pool: EscrowPoolProjection;

  /**
   * @param pool the pool the aggregate applies each record to *before* this projection; without
   *   one the timeline keeps (and applies) its own.
   */
  constructor(pool?: EscrowPoolProjection, private readonly limit = DEFAULT_TIMELINE_LIMIT) {
    this.ownsPool = !pool;
    this.pool = pool ?? new EscrowPoolProjection();
  }

  apply(record: RecordedEvent, result = this.ownsPool ? this.pool.apply(record) : undefined, stream: StreamRef = parseStreamId(record.streamId)): void {
    if (stream.kind !== 'escrow' && stream.kind !== 'create-intent') return;
    this.fold(record, stream, result && { value: result.snapshot.value, accepted: result.accepted });
  }

  /**
   * `apply` given what the pool made of the record (EscrowPoolProjection.fold): the state value
   * after it and whether it was accepted; undefined when the pool did not fold it.
   */
  fold(record: RecordedEvent, stream: StreamRef, step: FoldStep | undefined): void {
    if (stream.kind !== 'escrow' && stream.kind !== 'create-intent') return;
    let state: string;
    if (step) state = this.stateOf(step.value);
    else {
      const snapshot = stream.kind === 'escrow' ? this.pool.escrow(stream.id) : this.pool.intent(stream.id);
      state = snapshot ? this.stateOf(snapshot.value) : '?';
    }
    const accepted = step?.accepted ?? true;
    const map = stream.kind === 'escrow' ? this.escrows : this.intents;
    let timeline = map.get(stream.id);
    if (!timeline) {
      const intentId = record.type === 'EscrowCreated' ? (record.data as { intentId?: string }).intentId : undefined;
      const intent = intentId ? this.intents.get(intentId) : undefined;
      if (intentId && intent) this.intents.delete(intentId);
      timeline = intent ?? new TimelineRing(this.limit);
      map.set(stream.id, timeline);
      if (map === this.escrows) this.firstAt.set(stream.id, record.position);
    }
    const deferred = deferredColumnsOf(record);
    const meta = deferred ?? metadataJsonOf(record);
    let started = -1;
    let ended = -1;
    if (record.type === 'InferencesRecorded') {
      // Counted from the scanned entries when the read left the data as text, else from the data.
      const scanned = requestFieldsOf(record);
      const counts = countEntries(scanned && isEntryList(scanned) ? scanned : (record.data as { entries?: unknown } | null)?.entries);
      started = counts.started;
      ended = counts.entries - counts.started;
    }
    timeline.push({
      position: record.position,
      time: deferred ? undefined : record.time,
      event: record.type,
      actor: meta === undefined ? this.labelOf(record.metadata?.actor) : undefined,
      state,
      accepted,
      meta,
      started,
      ended,
    });
  }

  private stateOf(value: unknown): string {
    if (value !== this.lastValue) {
      this.lastValue = value;
      this.lastState = stateName(value);
    }
    return this.lastState;
  }

  private labelOf(actor: Actor | undefined): string {
    if (actor?.kind !== 'client') return actorLabel(actor);
    let label = this.labels.get(actor.keyId);
    if (label === undefined) {
      if (this.labels.size >= LABELS_MAX) this.labels.clear();
      this.labels.set(actor.keyId, (label = actorLabel(actor)));
    }
    return label;
  }

  /** One escrow's timeline (a copy). */
  of(escrowId: string): Timeline | undefined {
    const t = this.escrows.get(escrowId);
    return t?.view(this.limit);
  }

  snapshot(): TimelineState {
    const all = (m: Map<string, TimelineRing>) => Object.fromEntries([...m].map(([id, t]) => [id, t.view(this.limit)]));
    return { escrows: all(this.escrows), intents: all(this.intents) };
  }

  restore(state: TimelineState): void {
    const ring = (t: Timeline) => TimelineRing.from(t, this.limit);
    this.escrows = new Map(Object.entries(state.escrows).map(([id, t]) => [id, ring(t)]));
    this.intents = new Map(Object.entries(state.intents).map(([id, t]) => [id, ring(t)]));
    this.firstAt = new Map([...this.escrows.keys()].map((id, i) => [id, i - this.escrows.size]));
  }

  /** The escrow timelines `owns` picks (labelled views), each with the position that orders it, for `merge`. */
  part(owns: (escrowId: string) => boolean): [escrowId: string, timeline: Timeline, firstAt: number][] {
    const out: [string, Timeline, number][] = [];
    for (const [id, t] of this.escrows) if (owns(id)) out.push([id, t.view(this.limit), this.firstAt.get(id)!]);
    return out;
  }

  /** The creation intents' timelines, in their order, for `merge`. */
  shared(): [intentId: string, timeline: Timeline][] {
    return [...this.intents].map(([id, t]) => [id, t.view(this.limit)]);
  }

  /**
   * Replaces the state with the union of partitions (see EscrowPoolProjection.merge).
   */
  merge(intents: [string, Timeline][], parts: [string, Timeline, number][][]): void {
    this.intents = new Map(intents.map(([id, t]) => [id, TimelineRing.from(t, this.limit)]));
    this.escrows = new Map();
    this.firstAt = new Map();
    for (const [id, t, firstAt] of parts.flat().sort((a, b) => a[2] - b[2])) {
      this.escrows.set(id, TimelineRing.from(t, this.limit));
      this.firstAt.set(id, firstAt);
    }
  }
}
