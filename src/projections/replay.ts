/**
 * Replay (time travel) over a log: folds records through the projections, yielding for each the
 * resulting state of the statechart that owns its stream, and at the end every machine's state.
 * Pure over an iterable of records; `shardgate replay` adds I/O.
 */
import { devshardSessionStream, parseStreamId } from '../events/catalog.js';
import type { RecordedEvent } from '../events/envelope.js';
import { stateName } from '../machines/index.js';
import { actorLabel } from './actor.js';
import { Projections } from './projections.js';
import { countEntries } from '../events/request-data.js';

export interface ReplayRow {
  position: number;
  time: string;
  stream: string;
  event: string;
  actor: string;
  /** State of the owning statechart after the event (escrow, access mode, kill switch, rotation). */
  state: string;
  /** False when the statechart refused the event. */
  accepted: boolean;
  /** InferencesRecorded only: how many requests it starts and ends. */
  requests?: { started: number; finished: number; failed: number };
}

export interface ReplayOptions {
  /** Only this escrow's events (its stream, its creation intent and its devshard session stream). */
  escrow?: string;
  /** Stop after this position, or after the last event at or before this time. */
  until?: number | Date;
  /** Called every `progressEvery` records with the current position. */
  onProgress?: (position: number) => void;
  progressEvery?: number;
}

export interface MachinesAt {
  position: number;
  escrows: Record<string, { state: string; model: string | null; nonce: number; inFlight: number; balance: string; reserved: string }>;
  accessModes: Record<string, string>;
  disabled: { state: string; message: string; newUrl: string };
  rotation: Record<string, { stage: string; epoch: number | null; suppressed: string[] }>;
}

/** Parses `--until`: an integer position or an ISO-8601 time. */
export function parseUntil(text: string): number | Date {
  if (/^\d+$/.test(text)) return Number(text);
  const t = new Date(text);
  if (Number.isNaN(t.getTime())) throw new Error(`--until: not a position or ISO time: ${text}`);
  return t;
}

const beyond = (r: RecordedEvent, until: number | Date | undefined) =>
  until === undefined ? false : typeof until === 'number' ? r.position > until : new Date(r.time).getTime() > until.getTime();

/** Every machine's state as the projections hold it. */
export function machinesAt(p: Projections): MachinesAt {
  const escrows: MachinesAt['escrows'] = {};
  for (const [id, { state, context: c }] of p.pool.contexts()) {
    escrows[id] = { state, model: c.model, nonce: c.nonce, inFlight: c.inFlight, balance: c.balance, reserved: c.reserved };
  }
  const accessModes = Object.fromEntries(p.settings.accessModels().map((m) => [m, p.settings.accessMode(m)]));
  const d = p.settings.disabledSnapshot();
  const rotation: MachinesAt['rotation'] = {};
  for (const model of Object.keys(p.rotation.snapshot().machines).sort()) {
    const s = p.rotation.rotation(model);
    rotation[model] = { stage: stateName(s.value), epoch: s.context.epoch, suppressed: [...s.context.suppressed] };
  }
  return { position: p.position, escrows, accessModes, disabled: { state: String(d.value), message: d.context.message, newUrl: d.context.newUrl }, rotation };
}

/**
 * Replays records, yielding one row per shown event; returns the projections at the stop point.
 * With `escrow`, intent rows are held back until the escrow's EscrowCreated names the intent.
 */
export function* replay(records: Iterable<RecordedEvent>, options: ReplayOptions = {}): Generator<ReplayRow, Projections> {
  const p = new Projections();
  const heldIntents = new Map<string, ReplayRow[]>();
  const every = options.progressEvery ?? 10_000;
  for (const r of records) {
    if (beyond(r, options.until)) break;
    const result = p.pool.apply(r);
    p.settings.apply(r);
    p.rotation.apply(r);
    p.position = r.position;
    if (options.onProgress && r.position % every === 0) options.onProgress(r.position);

    const stream = parseStreamId(r.streamId);
    let state = '';
    let accepted = result?.accepted ?? true;
    if (result) state = stateName(result.snapshot.value);
    else if (stream.kind === 'rotation') {
      const latest = p.rotation.perModel()[stream.model];
      state = latest?.stage ?? '';
      accepted = latest?.accepted ?? true;
    } else if (stream.kind === 'settings') {
      const data = r.data as { model?: string };
      state = r.type === 'ModelAccessModeChanged' && data.model ? p.settings.accessMode(data.model) : r.type.startsWith('Gateway') ? `disabled:${String(p.settings.disabledSnapshot().value)}` : 'applied';
    }
    const row: ReplayRow = { position: r.position, time: r.time, stream: r.streamId, event: r.type, actor: actorLabel(r.metadata?.actor), state, accepted };
    if (r.type === 'InferencesRecorded') {
      const { started, finished, failed } = countEntries((r.data as { entries?: unknown } | null)?.entries);
      row.requests = { started, finished, failed };
    }

    if (options.escrow === undefined) {
      yield row;
    } else if (stream.kind === 'create-intent') {
      heldIntents.set(stream.id, [...(heldIntents.get(stream.id) ?? []), row]);
    } else if ((stream.kind === 'escrow' && stream.id === options.escrow) || r.streamId === devshardSessionStream(options.escrow)) {
      const intentId = r.type === 'EscrowCreated' ? (r.data as { intentId?: string }).intentId : undefined;
      if (intentId) yield* heldIntents.get(intentId) ?? [];
      yield row;
    }
  }
  return p;
}
