/**
 * One timeline's newest entries, kept in a ring of parallel arrays rather than one object per
 * entry. Why: an escrow's entries live for its last 1,000 events, so as objects every one of them
 * outlived two scavenges and went to old space, a few hundred bytes per chat request; at 1,000
 * req/s that alone made V8 run a mark-compact every few seconds, the pauses that set the gateway's
 * p99 (docs/benchmarks.md, session 6). Once the ring has grown to its limit an entry costs no
 * allocation: event types and state names come from small sets, the projection interns actor
 * labels, and the time string is shared by every event of a group commit.
 */
import type { Actor, EventMetadata } from '../events/envelope.js';
import type { DeferredColumns } from '../events/fold-read.js';
import { actorLabel } from './actor.js';

export interface TimelineEntry {
  position: number;
  time: string;
  event: string;
  actor: string;
  /** Escrow state after the event. */
  state: string;
  /** False when the statechart refused the event. */
  accepted: boolean;
  /** InferencesRecorded only: the request starts and ends it records. */
  requests?: { started: number; ended: number };
}

export interface Timeline {
  total: number;
  entries: TimelineEntry[];
}

/**
 * How an entry's actor label is known when it is folded: the label itself; the actor; or, for a
 * record read for folding (StoredRecord), its metadata text (`meta`), parsed only if the entry is
 * read (most are overwritten unread). When the read left time and metadata in the table (a
 * partition of a rebuild), `meta` says where to load them from and `time` is undefined.
 */
export interface EntryInput {
  position: number;
  time: string | undefined;
  event: string;
  actor: Actor | string | undefined;
  state: string;
  accepted: boolean;
  meta: string | DeferredColumns | undefined;
  /** InferencesRecorded's starts and ends; −1 for any other event. */
  started: number;
  ended: number;
}

const FIRST_CAPACITY = 8;

export class TimelineRing {
  /** Events this timeline has seen, including those no longer kept. */
  total = 0;
  private start = 0;
  private count = 0;
  private position: Float64Array;
  private accepted: Uint8Array;
  private event: string[];
  private state: string[];
  private time: (string | undefined)[];
  private actor: (Actor | string | undefined)[];
  /** Made on the first entry that has one (live entries never do). */
  private meta: (string | DeferredColumns | undefined)[] | undefined;
  /** Starts and ends per slot (2 × capacity; −1: not InferencesRecorded), made on the first entry that has them. */
  private requests: Int32Array | undefined;

  /** `capacity`: the arrays' first size (they grow up to `limit` as entries come). */
  constructor(
    private readonly limit: number,
    capacity = Math.min(FIRST_CAPACITY, Math.max(1, limit)),
  ) {
    this.position = new Float64Array(capacity);
    this.accepted = new Uint8Array(capacity);
    this.event = new Array<string>(capacity);
    this.state = new Array<string>(capacity);
    this.time = new Array<string | undefined>(capacity);
    this.actor = new Array<Actor | string | undefined>(capacity);
  }

  /**
   * A ring holding a view's entries (checkpoints, merged partitions): the newest `limit` of them,
   * copied straight into arrays of their size (a rebuild converts ~50,000 entries per partition;
   * pushing them one by one, growing from 8, took ~1.2 µs each).
   */
  static from(timeline: Timeline, limit: number): TimelineRing {
    const all = timeline.entries;
    const skip = Math.max(0, all.length - limit);
    const n = all.length - skip;
    const ring = new TimelineRing(limit, Math.max(1, Math.min(limit, n)));
    for (let k = 0; k < n; k++) {
      const e = all[skip + k]!;
      ring.write(k, e, e.requests?.started ?? -1, e.requests?.ended ?? -1);
    }
    ring.count = n;
    ring.total = timeline.total;
    return ring;
  }

  /** Adds the newest entry (and counts it); the oldest is dropped once `limit` are kept. */
  push(e: EntryInput): void {
    this.total += 1;
    const capacity = this.position.length;
    let i: number;
    if (this.count < capacity) i = (this.start + this.count++) % capacity;
    else if (capacity < this.limit) {
      this.grow(Math.min(this.limit, capacity * 2));
      i = this.count++;
    } else {
      i = this.start;
      this.start = (this.start + 1) % capacity;
    }
    this.write(i, e, e.started, e.ended);
    if (e.meta !== undefined) (this.meta ??= new Array(capacity))[i] = e.meta;
    else if (this.meta) this.meta[i] = undefined;
  }

  /** Slot `i`'s columns from an entry (all but `meta`). */
  private write(i: number, e: Omit<EntryInput, 'meta' | 'started' | 'ended'>, started: number, ended: number): void {
    if (started >= 0) {
      const r = (this.requests ??= new Int32Array(2 * this.position.length).fill(-1));
      r[2 * i] = started;
      r[2 * i + 1] = ended;
    } else if (this.requests) this.requests[2 * i] = -1;
    this.position[i] = e.position;
    this.accepted[i] = e.accepted ? 1 : 0;
    this.event[i] = e.event;
    this.state[i] = e.state;
    this.time[i] = e.time;
    this.actor[i] = e.actor;
  }

  /** Reallocates the arrays in entry order (oldest at 0). */
  private grow(capacity: number): void {
    const order = Array.from({ length: this.count }, (_, k) => (this.start + k) % this.position.length);
    const position = new Float64Array(capacity);
    const accepted = new Uint8Array(capacity);
    order.forEach((from, to) => {
      position[to] = this.position[from]!;
      accepted[to] = this.accepted[from]!;
    });
    this.position = position;
    this.accepted = accepted;
    if (this.requests) {
      const requests = new Int32Array(2 * capacity).fill(-1);
      order.forEach((from, to) => {
        requests[2 * to] = this.requests![2 * from]!;
        requests[2 * to + 1] = this.requests![2 * from + 1]!;
      });
      this.requests = requests;
    }
    const move = <T>(a: T[]): T[] => {
      const out = new Array<T>(capacity);
      order.forEach((from, to) => (out[to] = a[from]!));
      return out;
    };
    this.event = move(this.event);
    this.state = move(this.state);
    this.time = move(this.time);
    this.actor = move(this.actor);
    if (this.meta) this.meta = move(this.meta);
    this.start = 0;
  }

  /** The newest `limit` entries, labelled (a fresh copy). */
  view(limit: number): Timeline {
    const from = Math.max(0, this.count - limit);
    const capacity = this.position.length;
    const slots: number[] = [];
    for (let k = from; k < this.count; k++) slots.push((this.start + k) % capacity);
    this.load(slots);
    const r = this.requests;
    const entries = slots.map((i): TimelineEntry => {
      const entry: TimelineEntry = {
        position: this.position[i]!,
        time: this.time[i]!,
        event: this.event[i]!,
        actor: this.label(i),
        state: this.state[i]!,
        accepted: this.accepted[i] === 1,
      };
      if (r && r[2 * i]! >= 0) entry.requests = { started: r[2 * i]!, ended: r[2 * i + 1]! };
      return entry;
    });
    return { total: this.total, entries };
  }

  /** Loads time and metadata text of the slots whose read left them in the table, one query per source. */
  private load(slots: number[]): void {
    const meta = this.meta;
    if (!meta) return;
    const by = new Map<DeferredColumns, number[]>();
    for (const i of slots) {
      const m = meta[i];
      if (typeof m !== 'object') continue;
      let list = by.get(m);
      if (!list) by.set(m, (list = []));
      list.push(i);
    }
    for (const [source, list] of by) {
      const rows = source.load(list.map((i) => this.position[i]!));
      list.forEach((i, k) => {
        this.time[i] = rows[k]!.time;
        meta[i] = rows[k]!.metadata;
      });
    }
  }

  /** The slot's actor label; built once, then kept in place of what it came from. */
  private label(i: number): string {
    const actor = this.actor[i];
    if (typeof actor === 'string') return actor;
    const text = this.meta?.[i] as string | undefined;
    const label = actorLabel(text !== undefined ? (JSON.parse(text) as EventMetadata | undefined)?.actor : actor);
    if (this.meta) this.meta[i] = undefined;
    return (this.actor[i] = label);
  }
}
