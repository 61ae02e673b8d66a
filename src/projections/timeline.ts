/**
 * An escrow's timeline: each event of its creation intent and of its own stream, with position,
 * time, type, actor and the escrow's state after it; the newest `limit` entries and a total count.
 *
 * Read from the log when asked, not kept as a projection. Why: kept, it held up to 1,000 entries
 * for every escrow the gateway ever had, in memory and in every projections checkpoint (7.7 MB
 * after a million requests over 53 escrows, 99% of the checkpoint), and writing that checkpoint
 * every 30 s is what made the serving process's RSS climb (docs/lab/benchmarks-notebook.md, session 10). One
 * escrow's events are an indexed read, and its own machine is all that gives their states.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { createIntentStream, escrowStream } from '../events/catalog.js';
import type { RecordedEvent } from '../events/envelope.js';
import { countEntries } from '../events/request-data.js';
import { stateName } from '../machines/index.js';
import { actorLabel } from './actor.js';
import { EscrowPoolProjection } from './escrow-pool.js';

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
  /** Events of the escrow (and of its creation intent), including those no longer shown. */
  total: number;
  entries: TimelineEntry[];
}

export const DEFAULT_TIMELINE_LIMIT = 1_000;

/**
 * Events read per page. A page is read and folded in one stretch of the event loop, so it is kept
 * small: 16 InferencesRecorded of ~40 entries took 2–3 ms (scratch/tl-time.mjs).
 */
export const TIMELINE_PAGE_EVENTS = 16;

/** At most `limit` events of a stream from `fromVersion` on, in order, as stored (EventStore.readStream). */
export type StreamPageReader = (streamId: string, fromVersion: number, limit: number) => RecordedEvent[] | Promise<RecordedEvent[]>;

/** Folds records, in log order, into a timeline of the newest `limit` entries. */
export class TimelineBuilder {
  private readonly pool = new EscrowPoolProjection();
  private readonly keep: number;
  private entries: TimelineEntry[] = [];
  private total = 0;

  constructor(limit = DEFAULT_TIMELINE_LIMIT) {
    this.keep = Math.max(1, limit);
  }

  add(record: RecordedEvent): void {
    const step = this.pool.apply(record);
    const entry: TimelineEntry = {
      position: record.position,
      time: record.time,
      event: record.type,
      actor: actorLabel(record.metadata?.actor),
      state: step ? stateName(step.snapshot.value) : '?',
      accepted: step?.accepted ?? true,
    };
    if (record.type === 'InferencesRecorded') {
      const counts = countEntries((record.data as { entries?: unknown } | null)?.entries);
      entry.requests = { started: counts.started, ended: counts.entries - counts.started };
    }
    this.total += 1;
    this.entries.push(entry);
    // Bounded while folding a long stream: trimmed to the newest `keep` whenever it doubles.
    if (this.entries.length >= 2 * this.keep) this.entries.splice(0, this.entries.length - this.keep);
  }

  timeline(): Timeline {
    return { total: this.total, entries: this.entries.slice(-this.keep) };
  }
}

/**
 * The timeline of `escrowId` from the log, read page by page with a turn of the event loop between
 * pages (a stream can hold tens of thousands of events); undefined when the escrow has no events.
 * The creation intent named by the escrow's EscrowCreated contributes its events before that one,
 * as the escrow starts from the intent's state.
 */
export async function readEscrowTimeline(readPage: StreamPageReader, escrowId: string, limit = DEFAULT_TIMELINE_LIMIT, pause: () => Promise<unknown> = nextTurn): Promise<Timeline | undefined> {
  const stream = escrowStream(escrowId);
  const firstPage = await readPage(stream, 0, TIMELINE_PAGE_EVENTS);
  const first = firstPage[0];
  if (!first) return undefined;
  const builder = new TimelineBuilder(limit);
  const intentId = first.type === 'EscrowCreated' ? (first.data as { intentId?: unknown } | null)?.intentId : undefined;
  if (typeof intentId === 'string') {
    for await (const r of pages(readPage, createIntentStream(intentId), [], pause)) if (r.position < first.position) builder.add(r);
  }
  for await (const r of pages(readPage, stream, firstPage, pause)) builder.add(r);
  return builder.timeline();
}

/** A stream's records, page by page (starting with `read`, already read from version 0), pausing between pages. */
async function* pages(readPage: StreamPageReader, streamId: string, read: RecordedEvent[], pause: () => Promise<unknown>): AsyncGenerator<RecordedEvent> {
  let page = read.length > 0 ? read : await readPage(streamId, 0, TIMELINE_PAGE_EVENTS);
  for (;;) {
    yield* page;
    if (page.length < TIMELINE_PAGE_EVENTS) return;
    await pause();
    page = await readPage(streamId, page[page.length - 1]!.streamVersion + 1, TIMELINE_PAGE_EVENTS);
  }
}
