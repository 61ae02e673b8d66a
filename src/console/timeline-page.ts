/**
 * An escrow's timeline one page at a time, by position: the events of its creation intent, its own
 * stream and its devshard session stream, merged in log order. A page reads at most `limit` events
 * of each stream from a cursor (each stream's next version), so an escrow with 100,000 events opens
 * as fast as one with ten: nothing is folded from the start, and the statechart's state is shown
 * where an event alone says it (EscrowSettled → settled); `state` at a position is time travel's
 * job (state-at.ts).
 */
import { createIntentStream, devshardSessionStream, escrowStream } from '../events/catalog.js';
import type { RecordedEvent } from '../events/envelope.js';
import type { ConsoleLog } from './log-source.js';
import { eventView, type EventView } from './event-view.js';

export const TIMELINE_DEFAULT_LIMIT = 200;
export const TIMELINE_MAX_LIMIT = 1_000;

export interface TimelinePage {
  escrow_id: string;
  /** The streams merged, in the order of the cursors' parts. */
  streams: string[];
  /** Events in those streams. */
  total: number;
  entries: EventView[];
  /** Cursor of the page before this one (null at the start). */
  before: string | null;
  /** Cursor of the page after this one (null at the end). */
  after: string | null;
}

/** The streams of an escrow's timeline: its creation intent (when named), itself, its devshard session. */
export async function timelineStreams(log: ConsoleLog, escrowId: string): Promise<string[] | undefined> {
  const own = escrowStream(escrowId);
  if (log.streamVersion(own) < 0) return undefined;
  const first = (await log.readStream(own, 0, 1))[0];
  const intentId = first?.type === 'EscrowCreated' ? (first.data as { intentId?: unknown }).intentId : undefined;
  return [...(typeof intentId === 'string' ? [createIntentStream(intentId)] : []), own, devshardSessionStream(escrowId)];
}

/** "3.120.95" → [3, 120, 95]; undefined when it does not fit the streams. */
export function parseCursor(text: string | undefined, parts: number): number[] | undefined {
  if (text === undefined) return undefined;
  const v = text.split('.').map(Number);
  return v.length === parts && v.every((n) => Number.isInteger(n) && n >= 0) ? v : undefined;
}

const cursorText = (v: number[]) => v.join('.');

/** Merges per-stream pages by position, tagged with their stream's index. */
function merged(pages: RecordedEvent[][]): { r: RecordedEvent; i: number }[] {
  return pages.flatMap((p, i) => p.map((r) => ({ r, i }))).sort((a, b) => a.r.position - b.r.position);
}

/**
 * One page: forward from `after` (each stream's next version; the start when absent), or backward
 * from `before` (exclusive; `end` = past every stream's head).
 */
export async function timelinePage(log: ConsoleLog, escrowId: string, streams: string[], opts: { after?: number[]; before?: number[] | 'end'; limit?: number }): Promise<TimelinePage> {
  const limit = Math.min(Math.max(1, opts.limit ?? TIMELINE_DEFAULT_LIMIT), TIMELINE_MAX_LIMIT);
  const heads = streams.map((s) => log.streamVersion(s));
  const total = heads.reduce((n, h) => n + h + 1, 0);
  const ends = heads.map((h) => h + 1);
  let start: number[];
  let stop: number[];
  let taken: { r: RecordedEvent; i: number }[];
  if (opts.before !== undefined) {
    const before = opts.before === 'end' ? ends : opts.before.map((v, i) => Math.min(v, ends[i]!));
    const pages: RecordedEvent[][] = [];
    for (const [i, s] of streams.entries()) {
      const from = Math.max(0, before[i]! - limit);
      pages.push(before[i]! > from ? await log.readStream(s, from, before[i]! - from) : []);
    }
    taken = merged(pages).slice(-limit);
    stop = before;
    start = before.map((v, i) => v - taken.filter((t) => t.i === i).length);
  } else {
    start = opts.after ?? streams.map(() => 0);
    const pages: RecordedEvent[][] = [];
    for (const [i, s] of streams.entries()) pages.push(start[i]! < ends[i]! ? await log.readStream(s, start[i]!, limit) : []);
    taken = merged(pages).slice(0, limit);
    stop = start.map((v, i) => v + taken.filter((t) => t.i === i).length);
  }
  const atStart = start.every((v) => v === 0);
  const atEnd = stop.every((v, i) => v >= ends[i]!);
  return {
    escrow_id: escrowId,
    streams,
    total,
    entries: taken.map((t) => eventView(t.r)),
    before: atStart ? null : cursorText(start),
    after: atEnd ? null : cursorText(stop),
  };
}
