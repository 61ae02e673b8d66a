/**
 * Projections benchmark (not a test; `npm run bench` or `node dist/bench/projections-bench.js`).
 *
 *  - fold cost of the escrow statechart per high-volume event (InferenceStarted / Finished /
 *    Failed): xstate's `transition` (`step`) vs the fast path (`stepEscrowFast`), in µs per event;
 *  - `Projections.rebuild` over an in-memory log of realistic shape (mostly inference events over a
 *    few escrows per model, each escrow running to the routing stop, then drained, finalized,
 *    settled and replaced), in events/s. Reading the log from SQLite is measured by the store bench.
 */
import { pathToFileURL } from 'node:url';
import {
  createIntentStream,
  escrowStream,
  settingsStream,
  type CatalogEvent,
} from '../src/events/catalog.js';
import type { EventMetadata, RecordedEvent } from '../src/events/envelope.js';
import { escrowMachine, initialSnapshot, ROUTING_STOP_NONCE, step, type EscrowSnapshot } from '../src/machines/index.js';
import { stepEscrowFast } from '../src/machines/escrow-fast.js';
import { NONCE_BLOCK } from '../src/gateway/write/nonce-lease.js';
import { EscrowPoolProjection, Projections } from '../src/projections/index.js';

export interface ProjectionsBenchOptions {
  /** Size of the generated log for the rebuild measurement (default 1,000,000). */
  events?: number;
  /** Models served (default 2). */
  models?: number;
  /** Escrows routed per model at a time (default 2). */
  escrowsPerModel?: number;
  /** Requests in flight per escrow (default 16). */
  inFlight?: number;
  /** Inference events in the fold micro-benchmark (default 200,000). */
  foldEvents?: number;
  /** Rebuild repetitions; the best one is reported (default 3). */
  repeats?: number;
  log?: (line: string) => void;
}

export interface FoldResult {
  events: number;
  /** µs per event through xstate's `transition`. */
  xstateUsPerEvent: number;
  /** µs per event through `stepEscrowFast`. */
  fastUsPerEvent: number;
  speedup: number;
}

export interface RebuildResult {
  events: number;
  seconds: number;
  eventsPerSec: number;
  /** Events per CPU-second of this process (what one uncontended core does). */
  cpuEventsPerSec: number;
  /** Escrow lifecycles in the log (each ran to the routing stop and was settled). */
  escrows: number;
  /** Events the statecharts refused while rebuilding (0 for a well-formed log). */
  refused: number;
  /** The escrow pool alone (statechart folds, routing index) over the same log, events/s. */
  poolOnlyEventsPerSec: number;
}

export interface ProjectionsBenchResult {
  fold: FoldResult;
  rebuild: RebuildResult;
  targets: { rebuildEventsPerSec: number; met: boolean };
}

const TARGET_REBUILD = 500_000;
const DEPOSIT = '1000000000000000';
const usage = { promptTokens: 512, completionTokens: 128, totalTokens: 640 };

/** Deterministic PRNG (mulberry32) so every run folds the same log. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Lane {
  escrowId: string;
  model: string;
  nonce: number;
  /** Highest reserved nonce (NoncesReserved). */
  reserved: number;
  /** requestIds in flight, with their nonce. */
  inFlight: { requestId: string; nonce: number }[];
}

/** One generated event, before the store gives it a position, version, time and hash. */
export interface GeneratedEvent {
  streamId: string;
  event: CatalogEvent;
  metadata: EventMetadata;
}

export interface GenerateOptions extends Pick<ProjectionsBenchOptions, 'models' | 'escrowsPerModel' | 'inFlight'> {
  /**
   * Request id of the n-th request (default `req-<n>`). The gateway uses `req-<uuid>`; the SQLite
   * rebuild bench passes that shape so rows are as long as the soak's.
   */
  requestId?: (n: number) => string;
  /** Client key id on inference events (default `key-1`). */
  keyId?: string;
}

/**
 * Events of realistic shape: per model `escrowsPerModel` escrows take chat concurrently, each with
 * about `inFlight` requests in flight (started, then finished — 2% fail — in random order). An
 * escrow reaching the routing stop is stopped, drained, finalized, settled and replaced by a new
 * one created through a creation intent. Nonces are reserved in blocks as the gateway reserves
 * them (NoncesReserved when half of the block is used; gateway/write/nonce-lease.ts). A few settings events are sprinkled in. Yields exactly
 * `events` events (streamed, so a multi-million-event SQLite log need not sit in memory).
 */
export function* generateEvents(events: number, opts: GenerateOptions = {}): Generator<GeneratedEvent, { escrows: number }> {
  const models = opts.models ?? 2;
  const perModel = opts.escrowsPerModel ?? 2;
  const window = opts.inFlight ?? 16;
  const requestIdOf = opts.requestId ?? ((n: number) => `req-${n}`);
  const keyId = opts.keyId ?? 'key-1';
  const rand = prng(7);
  let escrowCount = 0;
  let requests = 0;
  let emitted = 0;
  const out: GeneratedEvent[] = [];

  const push = (streamId: string, event: CatalogEvent, metadata: EventMetadata = { actor: { kind: 'admin' } }): void => {
    out.push({ streamId, event, metadata });
  };

  const createEscrow = (model: string): Lane => {
    const n = ++escrowCount;
    const escrowId = `${1000 + n}`;
    const intentId = `intent-${n}`;
    const actor = { actor: { kind: 'rotation-task' as const } };
    push(createIntentStream(intentId), {
      type: 'EscrowCreateRequested',
      data: { intentId, model, amount: DEPOSIT, creator: 'gonka1creator', keySource: { kind: 'env', name: 'KEY' }, role: 'regular', epoch: 7, register: true, origin: 'rotation', txHash: `TX${n}` },
    }, actor);
    push(escrowStream(escrowId), {
      type: 'EscrowCreated',
      data: { escrowId, intentId, txHash: `TX${n}`, height: 10 + n, epoch: 7, creator: 'gonka1creator', amount: DEPOSIT, model, role: 'regular', slots: [{ slotId: 0, host: 'h0', url: 'http://h0' }] },
    }, actor);
    push(escrowStream(escrowId), { type: 'EscrowRegistered', data: { escrowId, model } }, actor);
    return { escrowId, model, nonce: 0, reserved: 0, inFlight: [] };
  };

  const finish = (lane: Lane, index: number): void => {
    const [r] = lane.inFlight.splice(index, 1);
    const meta = { actor: { kind: 'client' as const, keyId }, requestId: r!.requestId, correlationId: r!.requestId };
    if (rand() < 0.02) {
      push(escrowStream(lane.escrowId), { type: 'InferenceFailed', data: { requestId: r!.requestId, nonce: r!.nonce, reason: 'upstream 502', usage, cost: '0' } }, meta);
    } else {
      push(escrowStream(lane.escrowId), { type: 'InferenceFinished', data: { requestId: r!.requestId, nonce: r!.nonce, usage, cost: String(40_000 + Math.floor(rand() * 10_000)) } }, meta);
    }
  };

  const retire = (lane: Lane): void => {
    const stream = escrowStream(lane.escrowId);
    const actor = { actor: { kind: 'rotation-task' as const } };
    push(stream, { type: 'EscrowRoutingStopped', data: { nonce: lane.nonce, routingStop: ROUTING_STOP_NONCE } }, actor);
    push(stream, {
      type: 'EscrowFinalized',
      data: { settlement: { escrowId: lane.escrowId, nonce: lane.nonce, stateRoot: 'ab', restHash: 'cd', hostStats: [], signatures: [], fees: '10', version: 1 } },
    }, actor);
    push(stream, { type: 'EscrowSettleDeferred', data: { inFlight: lane.inFlight.length, origin: 'rotation' } }, actor);
    while (lane.inFlight.length) finish(lane, 0);
    push(stream, { type: 'EscrowSettleRequested', data: { txHash: `ST${lane.escrowId}`, keySource: { kind: 'env', name: 'KEY' }, origin: 'rotation' } }, actor);
    push(stream, { type: 'EscrowSettled', data: { txHash: `ST${lane.escrowId}`, height: 100, refund: '1' } }, actor);
  };

  const lanes: Lane[] = [];
  for (let m = 0; m < models; m++) {
    const model = `model-${m}`;
    push(settingsStream, { type: 'ModelAccessModeChanged', data: { model, mode: 'api_key', previous: 'admin_only' } });
    for (let k = 0; k < perModel; k++) lanes.push(createEscrow(model));
  }

  let tick = 0;
  for (;;) {
    for (const e of out) {
      if (emitted >= events) return { escrows: escrowCount };
      emitted++;
      yield e;
    }
    out.length = 0;
    if (emitted >= events) return { escrows: escrowCount };
    const i = tick++ % lanes.length;
    const lane = lanes[i]!;
    if (lane.nonce + 1 >= ROUTING_STOP_NONCE) {
      retire(lane);
      lanes[i] = createEscrow(lane.model);
      continue;
    }
    if (lane.inFlight.length >= window) finish(lane, Math.floor(rand() * lane.inFlight.length));
    const requestId = requestIdOf(++requests);
    const meta: EventMetadata = { actor: { kind: 'client', keyId }, requestId, correlationId: requestId };
    lane.nonce += 1;
    if (lane.reserved - lane.nonce < NONCE_BLOCK / 2) {
      // As NonceLeases.ensure: the next block, recorded with the metadata of the request that needed it.
      const upTo = Math.min(Math.max(lane.reserved, lane.nonce - 1) + NONCE_BLOCK, ROUTING_STOP_NONCE - 1);
      if (upTo > lane.reserved) push(escrowStream(lane.escrowId), { type: 'NoncesReserved', data: { upTo } }, meta);
      lane.reserved = upTo;
    }
    lane.inFlight.push({ requestId, nonce: lane.nonce });
    push(escrowStream(lane.escrowId), {
      type: 'InferenceStarted',
      data: { requestId, nonce: lane.nonce, clientKeyId: keyId, reservedCost: '100000', inputTokens: 512, maxTokens: 1024 },
    }, meta);
    if (tick % 100_000 === 0) push(settingsStream, { type: 'ModelAccessModeChanged', data: { model: lane.model, mode: 'api_key', previous: 'api_key' } });
  }
}

/** `generateEvents` as an in-memory log of recorded events (positions 1.., no hashes). */
export function generateLog(events: number, opts: GenerateOptions = {}): { records: RecordedEvent[]; escrows: number } {
  const records: RecordedEvent[] = [];
  const versions = new Map<string, number>();
  const t0 = Date.UTC(2026, 0, 1);
  const it = generateEvents(events, opts);
  for (;;) {
    const next = it.next();
    if (next.done) return { records, escrows: next.value.escrows };
    const { streamId, event, metadata } = next.value;
    const v = (versions.get(streamId) ?? -1) + 1;
    versions.set(streamId, v);
    const position = records.length + 1;
    records.push({
      position,
      streamId,
      streamVersion: v,
      type: event.type,
      schemaVersion: 1,
      data: event.data,
      metadata,
      time: new Date(t0 + position).toISOString(),
      prevHash: '',
      hash: '',
    });
  }
}

const now = () => process.hrtime.bigint();

/** µs per event folding `events` through `fold`, best of `repeats`. */
function timeFold(events: CatalogEvent[], fold: (s: EscrowSnapshot, e: CatalogEvent) => { snapshot: EscrowSnapshot; accepted: boolean }, repeats: number): number {
  let best = Infinity;
  for (let r = 0; r < repeats; r++) {
    let s = initialSnapshot(escrowMachine, { routingStop: Number.MAX_SAFE_INTEGER });
    let refused = 0;
    const t = now();
    for (const e of events) {
      const next = fold(s, e);
      if (!next.accepted) refused++;
      s = next.snapshot;
    }
    const us = Number(now() - t) / 1e3 / events.length;
    if (refused > 0) throw new Error(`fold bench: ${refused} events refused`);
    best = Math.min(best, us);
  }
  return best;
}

/** One escrow's life with `n` inference events, `window` requests in flight. */
function foldEvents(n: number, window: number): CatalogEvent[] {
  const rand = prng(11);
  const events: CatalogEvent[] = [
    { type: 'EscrowCreated', data: { escrowId: 'e1', txHash: 'T', height: 1, epoch: 7, creator: 'c', amount: DEPOSIT, model: 'm', role: 'regular', slots: [] } },
    { type: 'EscrowRegistered', data: { escrowId: 'e1', model: 'm' } },
  ];
  const inFlight: { requestId: string; nonce: number }[] = [];
  let nonce = 0;
  while (events.length < n) {
    if (inFlight.length >= window) {
      const [r] = inFlight.splice(Math.floor(rand() * inFlight.length), 1);
      events.push({ type: 'InferenceFinished', data: { requestId: r!.requestId, nonce: r!.nonce, usage, cost: '45000' } });
    }
    nonce += 1;
    inFlight.push({ requestId: `req-${nonce}`, nonce });
    events.push({ type: 'InferenceStarted', data: { requestId: `req-${nonce}`, nonce, clientKeyId: 'k', reservedCost: '100000', inputTokens: 512, maxTokens: 1024 } });
  }
  return events;
}

export function benchFold(n = 200_000, window = 16, log: (line: string) => void = () => {}): FoldResult {
  const events = foldEvents(n, window);
  const slow = (s: EscrowSnapshot, e: CatalogEvent) => step(escrowMachine, s, e as never);
  const fast = (s: EscrowSnapshot, e: CatalogEvent) => stepEscrowFast(s, e as never);
  // Warm both paths up before timing (JIT).
  timeFold(events.slice(0, 20_000), slow, 1);
  timeFold(events.slice(0, 20_000), fast, 1);
  const slowEvents = events.slice(0, Math.min(events.length, 100_000));
  const xstateUsPerEvent = timeFold(slowEvents, slow, 2);
  const fastUsPerEvent = timeFold(events, fast, 3);
  const result = { events: events.length, xstateUsPerEvent, fastUsPerEvent, speedup: Math.round((xstateUsPerEvent / fastUsPerEvent) * 10) / 10 };
  log(`escrow fold (${window} in flight): xstate transition ${xstateUsPerEvent.toFixed(2)} µs/event, fast path ${fastUsPerEvent.toFixed(3)} µs/event (${result.speedup}x)`);
  return result;
}

export function benchRebuild(records: RecordedEvent[], escrows: number, repeats = 3, log: (line: string) => void = () => {}): RebuildResult {
  let best: RebuildResult | undefined;
  for (let r = 0; r < repeats; r++) {
    const cpu0 = process.cpuUsage();
    const t = now();
    const projections = Projections.rebuild(records);
    const seconds = Number(now() - t) / 1e9;
    const cpu = process.cpuUsage(cpu0);
    if (projections.position !== records.length) throw new Error('rebuild did not reach the end of the log');
    const tp = now();
    const pool = new EscrowPoolProjection();
    let refused = 0;
    for (const record of records) if (pool.apply(record)?.accepted === false) refused++;
    const poolOnlyEventsPerSec = Math.round(records.length / (Number(now() - tp) / 1e9));
    const result: RebuildResult = {
      poolOnlyEventsPerSec,
      events: records.length,
      seconds,
      eventsPerSec: Math.round(records.length / seconds),
      cpuEventsPerSec: Math.round(records.length / ((cpu.user + cpu.system) / 1e6)),
      escrows,
      refused,
    };
    if (!best || result.eventsPerSec > best.eventsPerSec) best = result;
  }
  log(
    `Projections.rebuild: ${best!.eventsPerSec.toLocaleString('en')} events/s (${best!.cpuEventsPerSec.toLocaleString('en')} per CPU-second) over ` +
      `${best!.events.toLocaleString('en')} events, ${escrows} escrow lifecycles, ${best!.refused} refused`,
  );
  log(`  of which the escrow pool alone: ${best!.poolOnlyEventsPerSec.toLocaleString('en')} events/s (the rest is settings, rotation debug)`);
  return best!;
}

/** Fold micro-benchmark, then rebuild of every projection over a generated log. */
export function benchProjections(opts: ProjectionsBenchOptions = {}): ProjectionsBenchResult {
  const log = opts.log ?? (() => {});
  const fold = benchFold(opts.foldEvents ?? 200_000, opts.inFlight ?? 16, log);
  const t = now();
  const { records, escrows } = generateLog(opts.events ?? 1_000_000, opts);
  log(`generated ${records.length.toLocaleString('en')} events in ${(Number(now() - t) / 1e9).toFixed(1)} s`);
  const rebuild = benchRebuild(records, escrows, opts.repeats ?? 3, log);
  return { fold, rebuild, targets: { rebuildEventsPerSec: TARGET_REBUILD, met: rebuild.eventsPerSec >= TARGET_REBUILD } };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = benchProjections({ log: (line) => console.log(line) });
  console.log(JSON.stringify(result, null, 2));
  if (!result.targets.met) process.exitCode = 1;
}
