/**
 * The fields a fold reads of a per-request event's data (InferenceStarted / Finished / Failed),
 * taken from the stored JSON text without building the object: JSON.parse is ~0.75 µs of the
 * ~3 µs a partition of a rebuild spends per event, a match of these patterns ~0.25 µs, and the
 * fold reads 3 of the event's 6–9 values.
 *
 * Each pattern is the whole text the store's canonical JSON writes for the event's current shape
 * (catalog/escrow.ts: keys sorted, no whitespace), with strings of printable ASCII without escapes
 * and integers of at most 15 digits (exact as doubles). Text that matches is valid JSON that
 * JSON.parse reads into exactly the captured values; anything else (another shape, an escape,
 * a long number) does not match, and the caller parses the text.
 */
import type { InferenceEntry } from './catalog.js';

/**
 * The events `events` stand for one request event at a time: each InferencesRecorded replaced by
 * its entries (`{ data, type }`, in order), every other event as it is. For readers that look at
 * requests one by one (reconciler, settlement tally, explain, tests).
 */
export function* eachRequestEvent<E extends { type: string; data: unknown }>(events: Iterable<E>): Generator<E | InferenceEntry> {
  for (const e of events) {
    if (e.type === 'InferencesRecorded') yield* (e.data as { entries: InferenceEntry[] }).entries;
    else yield e;
  }
}

/** InferencesRecorded's entries (parsed or scanned) counted by type; `entries` is how many there are in all. */
export function countEntries(entries: unknown): { entries: number; started: number; finished: number; failed: number } {
  const counts = { entries: 0, started: 0, finished: 0, failed: 0 };
  if (!Array.isArray(entries)) return counts;
  counts.entries = entries.length;
  for (const e of entries) {
    const type = (e as { type?: unknown } | null)?.type;
    if (type === 'InferenceStarted') counts.started++;
    else if (type === 'InferenceFinished') counts.finished++;
    else if (type === 'InferenceFailed') counts.failed++;
  }
  return counts;
}

/** The per-request event types (their data is what `scanRequestData` reads). */
export const REQUEST_TYPES: readonly string[] = ['InferenceStarted', 'InferenceFinished', 'InferenceFailed'];

/** Whether `type` is one of REQUEST_TYPES. */
export const isRequestType = (type: string): boolean => type === 'InferenceStarted' || type === 'InferenceFinished' || type === 'InferenceFailed';

/** requestId, nonce and the amount fields of a per-request event (undefined where absent). */
export interface RequestFields {
  requestId: string | undefined;
  nonce: number | undefined;
  reservedCost: string | undefined;
  cost: string | undefined;
}

/** A JSON string's content: printable ASCII but the quote and the backslash (no escapes). */
const S = String.raw`[ !#-\[\]-~]*`;
/** A JSON integer of at most 15 digits. */
const I = String.raw`-?(?:0|[1-9][0-9]{0,14})`;
const USAGE = String.raw`\{"completionTokens":${I},"promptTokens":${I},"totalTokens":${I}\}`;
const STARTED_BODY = String.raw`\{"clientKeyId":(?:"${S}"|null),"inputTokens":${I},"maxTokens":${I},"nonce":(${I}),"requestId":"(${S})","reservedCost":"(${S})"\}`;
const FINISHED_BODY = String.raw`\{"cost":"(${S})","nonce":(${I}),"requestId":"(${S})","usage":${USAGE}\}`;
const FAILED_BODY = String.raw`\{"cost":"(${S})","nonce":(${I}),"reason":"${S}","requestId":"(${S})","usage":${USAGE}\}`;
const STARTED = new RegExp(`^${STARTED_BODY}$`);
const FINISHED = new RegExp(`^${FINISHED_BODY}$`);
const FAILED = new RegExp(`^${FAILED_BODY}$`);
/**
 * One entry of InferencesRecorded's text (`{"data":…,"type":…}`) and what follows it (`,` or `]`),
 * matched where the last one ended (sticky). Groups 1–3: a start's nonce, requestId, reservedCost;
 * 4–6 and 7–9: an end's cost, nonce, requestId; 10: the separator.
 */
const ENTRY = new RegExp(
  String.raw`\{"data":(?:${STARTED_BODY},"type":"InferenceStarted"|${FINISHED_BODY},"type":"InferenceFinished"|${FAILED_BODY},"type":"InferenceFailed")\}([,\]])`,
  'y',
);
const ENTRIES_OPEN = '{"entries":[';

/** The fields of a per-request event's data text, or undefined (see the module comment). */
export function scanRequestData(type: string, text: string): RequestFields | undefined {
  if (type === 'InferenceStarted') {
    const m = STARTED.exec(text);
    return m ? { requestId: m[2], nonce: Number(m[1]), reservedCost: m[3], cost: undefined } : undefined;
  }
  const m = (type === 'InferenceFinished' ? FINISHED : type === 'InferenceFailed' ? FAILED : undefined)?.exec(text);
  return m ? { requestId: m[3], nonce: Number(m[2]), reservedCost: undefined, cost: m[1] } : undefined;
}

/** An InferencesRecorded entry's type and the fields a fold reads of it (`amount`: a start's reservedCost, an end's cost). */
export interface EntryFields {
  type: 'InferenceStarted' | 'InferenceFinished' | 'InferenceFailed';
  requestId: string;
  nonce: number;
  amount: string;
}

/**
 * The entries of InferencesRecorded's data text, in order, or undefined when the text is not
 * exactly the canonical JSON of `{ entries: [...] }` with entries of the three shapes above (then
 * the caller parses it). Matches entry by entry, so a text that matches is the JSON of exactly
 * these entries.
 */
export function scanRecordedEntries(text: string): EntryFields[] | undefined {
  if (!text.startsWith(ENTRIES_OPEN) || !text.endsWith(']}')) return undefined;
  const out: EntryFields[] = [];
  ENTRY.lastIndex = ENTRIES_OPEN.length;
  for (;;) {
    const m = ENTRY.exec(text);
    if (!m) return undefined;
    if (m[2] !== undefined) out.push({ type: 'InferenceStarted', requestId: m[2], nonce: Number(m[1]), amount: m[3]! });
    else if (m[6] !== undefined) out.push({ type: 'InferenceFinished', requestId: m[6], nonce: Number(m[5]), amount: m[4]! });
    else out.push({ type: 'InferenceFailed', requestId: m[9]!, nonce: Number(m[8]), amount: m[7]! });
    if (m[10] === ']') return ENTRY.lastIndex === text.length - 1 ? out : undefined;
  }
}
