/**
 * An escrow stream as one gateway exports it and another reads it back. On import the events are
 * evidence, never log entries: the target appends only its own EscrowImported (its own position,
 * version and hash), with the nonce, spend and per-slot tally read here.
 *
 * The HTTP schema (src/http/schemas/import.ts) has checked each event's shape. Here, the stream as
 * a whole: versions 0..n-1 in order (the whole stream, nothing dropped), positions increasing, each
 * hash recomputing over its content and this escrow's stream id (an edited event, or one of another
 * escrow, shows), prev_hash linking where positions are adjacent (other streams' events sit between
 * the others), and each event accepted in turn by the escrow statechart. Any refusal is a 400 naming
 * `events[i]`; nothing is appended.
 */
import type { RecordedEvent } from '../../events/envelope.js';
import { canonicalJson } from '../../events/canonical-json.js';
import { escrowStream, type SlotTally } from '../../events/catalog.js';
import { eventHash } from '../../events/hash.js';
import { GatewayError, refuse } from '../errors.js';
import { stepEscrowFast } from '../../machines/escrow-fast.js';
import { escrowMachine, initialSnapshot, stateName, type EscrowSnapshot } from '../../machines/index.js';
import { slotTally } from './settlement.js';

/** One stored event as GET /v1/admin/devshards/{id}/export writes it. */
export interface ExportedEvent {
  position: number;
  stream_version: number;
  type: string;
  schema_version: number;
  data: Record<string, unknown>;
  metadata: Record<string, unknown>;
  time: string;
  prev_hash: string;
  hash: string;
}

export function toExportedEvent(r: RecordedEvent): ExportedEvent {
  return {
    position: r.position,
    stream_version: r.streamVersion,
    type: r.type,
    schema_version: r.schemaVersion,
    data: r.data as Record<string, unknown>,
    metadata: r.metadata as unknown as Record<string, unknown>,
    time: r.time,
    prev_hash: r.prevHash,
    hash: r.hash,
  };
}

export interface ReadStream {
  /** The escrow's state at the source's last exported event. */
  snapshot: EscrowSnapshot;
  /** What each slot served there (settlements made by the target pay it too). */
  hostStats: SlotTally[];
}

/** Checks an exported stream of escrow `escrowId` and folds it; throws a 400 naming the first bad event. */
export function readExportedStream(escrowId: string, events: readonly ExportedEvent[]): ReadStream {
  const streamId = escrowStream(escrowId);
  let snapshot = initialSnapshot(escrowMachine);
  events.forEach((e, i) => {
    const bad = (member: string, why: string) => refuse.invalid(`events[${i}].${member} ${why}`, `events[${i}].${member}`);
    const prev = events[i - 1];
    if (e.stream_version !== i) throw bad('stream_version', `is ${e.stream_version}, expected ${i}: an export holds the escrow's whole stream, in order.`);
    if (prev && e.position <= prev.position) throw bad('position', `(${e.position}) does not follow events[${i - 1}].position (${prev.position}).`);
    if (prev && e.position === prev.position + 1 && e.prev_hash !== prev.hash) throw bad('prev_hash', `does not match events[${i - 1}].hash: the exported stream was altered.`);
    try {
      const content = { position: e.position, streamId, streamVersion: e.stream_version, type: e.type, schemaVersion: e.schema_version, time: e.time };
      if (eventHash(e.prev_hash, { ...content, dataJson: canonicalJson(e.data), metadataJson: canonicalJson(e.metadata) }) !== e.hash) {
        throw bad('hash', `does not match the event's content: the event was altered, or it is not of escrow ${escrowId}.`);
      }
      const next = stepEscrowFast(snapshot, { type: e.type, data: e.data } as never);
      if (!next.accepted) throw bad('type', `${e.type} is refused by the escrow statechart in state ${stateName(snapshot.value)} (e.g. a reused nonce, or a cost beyond the balance): the events are not a consistent escrow history.`);
      snapshot = next.snapshot;
    } catch (err) {
      // The schema should leave nothing for the fold to trip on; if it still does, it is this event's fault.
      if (err instanceof GatewayError) throw err;
      throw refuse.invalid(`events[${i}] could not be applied: ${err instanceof Error ? err.message : String(err)}`, `events[${i}]`);
    }
  });
  const hostStats = slotTally(events, snapshot.context.slots).map((s) => ({ slotId: s.slotId, cost: s.cost.toString(), requests: s.requests }));
  return { snapshot, hostStats };
}
