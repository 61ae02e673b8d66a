/**
 * Escrow timelines: per escrow, each event with position, time, type, actor and the escrow's state
 * after it. A creation intent's entries move into the escrow's timeline at EscrowCreated.
 * Bounded per escrow (inference events dominate): the newest `limit` entries and a total count.
 */
import { parseStreamId } from '../events/catalog.js';
import type { Actor, EventMetadata, RecordedEvent } from '../events/envelope.js';
import { deferredColumnsOf, metadataJsonOf, type DeferredColumns } from '../events/fold-read.js';
import { stateName } from '../machines/index.js';
import { actorLabel } from './actor.js';
import { EscrowPoolProjection, type FoldStep, type StreamRef } from './escrow-pool.js';

export interface TimelineEntry {
  position: number;
  time: string;
  event: string;
  actor: string;
  /** Escrow state after the event. */
  state: string;
  /** False when the statechart refused the event. */
  accepted: boolean;
}

export interface Timeline {
  total: number;
  entries: TimelineEntry[];
}

export interface TimelineState {
  escrows: Record<string, Timeline>;
  intents: Record<string, Timeline>;
}

export const DEFAULT_TIMELINE_LIMIT = 1_000;

/**
 * An entry as folded: the actor label is built when read (most entries are trimmed unread).
 * Restored entries carry the label string already. A record read for folding (StoredRecord) has
 * its metadata still as text: the entry keeps that text (`meta`) and parses it only when read. If
 * the read left time and metadata in the table (a partition of a rebuild), the entry keeps where
 * to load them from (`meta`, `time` undefined) and they are loaded, for the entries a view shows,
 * all at once.
 */
interface StoredEntry extends Omit<TimelineEntry, 'actor' | 'time'> {
  time: string | undefined;
  actor: Actor | string | undefined;
  meta?: string | DeferredColumns;
}

/** Loads time and metadata text of entries [from, end) whose read left them in the table. */
function load(entries: StoredEntry[], from: number): void {
  const by = new Map<DeferredColumns, StoredEntry[]>();
  for (let i = from; i < entries.length; i++) {
    const e = entries[i]!;
    if (typeof e.meta !== 'object') continue;
    let list = by.get(e.meta);
    if (!list) by.set(e.meta, (list = []));
    list.push(e);
  }
  for (const [source, list] of by) {
    const rows = source.load(list.map((e) => e.position));
    list.forEach((e, i) => {
      e.time = rows[i]!.time;
      e.meta = rows[i]!.metadata;
    });
  }
}

/** The entry's actor label; computed once, then kept in place of what it came from. */
function labelOf(e: StoredEntry): string {
  if (typeof e.actor === 'string') return e.actor;
  if (typeof e.meta === 'object') load([e], 0);
  const text = e.meta as string | undefined;
  const actor = text !== undefined ? (JSON.parse(text) as EventMetadata | undefined)?.actor : e.actor;
  e.meta = undefined;
  return (e.actor = actorLabel(actor));
}

interface StoredTimeline {
  total: number;
  entries: StoredEntry[];
}

/** The newest `limit` entries, labelled (a fresh copy). */
function view(t: StoredTimeline, limit: number): Timeline {
  const from = Math.max(0, t.entries.length - limit);
  load(t.entries, from);
  const entries: TimelineEntry[] = new Array(t.entries.length - from);
  for (let i = from; i < t.entries.length; i++) {
    const e = t.entries[i]!;
    entries[i - from] = {
      position: e.position,
      time: e.time!,
      event: e.event,
      actor: labelOf(e),
      state: e.state,
      accepted: e.accepted,
    };
  }
  return { total: t.total, entries };
}

/**
 * The escrow-timeline projection. Entries are trimmed to `limit` only when they reach twice the
 * limit (amortized O(1) per event instead of shifting a full array each time); readers see the
 * newest `limit`.
 */
export class TimelineProjection {
  private escrows = new Map<string, StoredTimeline>();
  private intents = new Map<string, StoredTimeline>();
  /** Position of each escrow timeline's first event (negative: restored, in restore order); orders `merge`. */
  private firstAt = new Map<string, number>();
  private readonly ownsPool: boolean;
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
    if (step) state = stateName(step.value);
    else {
      const snapshot = stream.kind === 'escrow' ? this.pool.escrow(stream.id) : this.pool.intent(stream.id);
      state = snapshot ? stateName(snapshot.value) : '?';
    }
    const accepted = step?.accepted ?? true;
    const map = stream.kind === 'escrow' ? this.escrows : this.intents;
    let timeline = map.get(stream.id);
    if (!timeline) {
      const intentId = record.type === 'EscrowCreated' ? (record.data as { intentId?: string }).intentId : undefined;
      const intent = intentId ? this.intents.get(intentId) : undefined;
      if (intentId && intent) this.intents.delete(intentId);
      timeline = intent ?? { total: 0, entries: [] };
      map.set(stream.id, timeline);
      if (map === this.escrows) this.firstAt.set(stream.id, record.position);
    }
    timeline.total += 1;
    const deferred = deferredColumnsOf(record);
    const meta = deferred ?? metadataJsonOf(record);
    timeline.entries.push({
      position: record.position,
      time: deferred ? undefined : record.time,
      event: record.type,
      actor: meta === undefined ? record.metadata?.actor : undefined,
      state,
      accepted,
      meta,
    });
    if (timeline.entries.length >= 2 * this.limit) timeline.entries.splice(0, timeline.entries.length - this.limit);
  }

  /** One escrow's timeline (a copy). */
  of(escrowId: string): Timeline | undefined {
    const t = this.escrows.get(escrowId);
    return t && view(t, this.limit);
  }

  snapshot(): TimelineState {
    const all = (m: Map<string, StoredTimeline>) => Object.fromEntries([...m].map(([id, t]) => [id, view(t, this.limit)]));
    return { escrows: all(this.escrows), intents: all(this.intents) };
  }

  restore(state: TimelineState): void {
    const s = structuredClone(state);
    this.escrows = new Map(Object.entries(s.escrows));
    this.intents = new Map(Object.entries(s.intents));
    this.firstAt = new Map([...this.escrows.keys()].map((id, i) => [id, i - this.escrows.size]));
  }

  /** The escrow timelines `owns` picks (labelled views), each with the position that orders it, for `merge`. */
  part(owns: (escrowId: string) => boolean): [escrowId: string, timeline: Timeline, firstAt: number][] {
    const out: [string, Timeline, number][] = [];
    for (const [id, t] of this.escrows) if (owns(id)) out.push([id, view(t, this.limit), this.firstAt.get(id)!]);
    return out;
  }

  /** The creation intents' timelines, in their order, for `merge`. */
  shared(): [intentId: string, timeline: Timeline][] {
    return [...this.intents].map(([id, t]) => [id, view(t, this.limit)]);
  }

  /**
   * Replaces the state with the union of partitions (see EscrowPoolProjection.merge): the timelines
   * are taken over, not copied.
   */
  merge(intents: [string, Timeline][], parts: [string, Timeline, number][][]): void {
    this.intents = new Map(intents);
    this.escrows = new Map();
    this.firstAt = new Map();
    for (const [id, t, firstAt] of parts.flat().sort((a, b) => a[2] - b[2])) {
      this.escrows.set(id, t);
      this.firstAt.set(id, firstAt);
    }
  }
}
