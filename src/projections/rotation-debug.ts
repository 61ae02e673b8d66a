/**
 * Rotation debug (GET /v1/debug/rotation `latest`): each model's rotation statechart folded from
 * `rotation-<model>`, plus the outcome of the settles it decided (EscrowSettled / SettleFailed in
 * the escrow streams), and the last 100 entries in log order.
 */
import { parseStreamId, upcast, type ChainErrorInfo, type EscrowRole } from '../events/catalog.js';
import type { RecordedEvent } from '../events/envelope.js';
import type { StreamRef } from './escrow-pool.js';
import {
  initialSnapshot,
  persistState,
  restoreState,
  rotationMachine,
  stateName,
  step,
  type PersistedMachineState,
  type RotationSnapshot,
} from '../machines/index.js';

/** How many entries `latest` keeps. */
export const ROTATION_LATEST_LIMIT = 100;

export interface RotationDebugEntry {
  model: string;
  position: number;
  time: string;
  event: string;
  /** Rotation statechart state after the event ("phase1.promoting"). */
  stage: string;
  epoch: number | null;
  role: EscrowRole | null;
  counts: { target: number; existing: number; created: number; promoted: number; settled: number; settle_failed: number };
  last_error: ChainErrorInfo | null;
  /** False when the statechart refused the event (recorded anyway, for diagnosis). */
  accepted: boolean;
}

export interface RotationDebugState {
  machines: Record<string, PersistedMachineState>;
  /** Escrow id → model, for settles decided by rotation. */
  settling: Record<string, string>;
  outcomes: Record<string, { settled: number; settleFailed: number }>;
  latest: RotationDebugEntry[];
}

/** The rotation-debug projection. */
export class RotationDebugProjection {
  private readonly machines = new Map<string, RotationSnapshot>();
  private settling: Record<string, string> = {};
  private outcomes: Record<string, { settled: number; settleFailed: number }> = {};
  private latest: RotationDebugEntry[] = [];

  apply(record: RecordedEvent, stream: StreamRef = parseStreamId(record.streamId)): void {
    // Most records are inference events of escrow streams: leave before upcasting them
    // (upcasting keeps the type, so testing the record's type first is the same test).
    if (stream.kind === 'escrow') {
      if (record.type !== 'EscrowSettled' && record.type !== 'EscrowSettleFailed') return;
      if (this.settling[stream.id] === undefined) return;
    } else if (stream.kind !== 'rotation') return;
    const event = upcast(record);
    if (!event) return;
    if (stream.kind === 'escrow' && (event.type === 'EscrowSettled' || event.type === 'EscrowSettleFailed')) {
      const model = this.settling[stream.id]!;
      const o = (this.outcomes[model] ??= { settled: 0, settleFailed: 0 });
      if (event.type === 'EscrowSettled') {
        o.settled += 1;
        delete this.settling[stream.id];
      } else o.settleFailed += 1;
      this.push(model, record, this.state(model), null, true);
      return;
    }
    if (stream.kind !== 'rotation') return;
    const model = stream.model;
    const { snapshot, accepted } = step(rotationMachine, this.state(model), event);
    this.machines.set(model, snapshot);
    if (accepted && event.type === 'RotationSettleDecided') {
      for (const id of event.data.escrowIds) this.settling[id] = model;
    }
    const role = 'role' in event.data ? (event.data.role ?? null) : null;
    this.push(model, record, snapshot, role, accepted);
  }

  private state(model: string): RotationSnapshot {
    return this.machines.get(model) ?? initialSnapshot(rotationMachine, { model });
  }

  private push(model: string, record: RecordedEvent, s: RotationSnapshot, role: EscrowRole | null, accepted: boolean): void {
    const c = s.context;
    const o = this.outcomes[model] ?? { settled: 0, settleFailed: 0 };
    this.latest.push({
      model,
      position: record.position,
      time: record.time,
      event: record.type,
      stage: stateName(s.value),
      epoch: c.epoch,
      role,
      counts: { target: c.target, existing: c.existing, created: c.created, promoted: c.promoted, settled: o.settled, settle_failed: o.settleFailed + c.settleFailed },
      last_error: c.lastError,
      accepted,
    });
    if (this.latest.length > ROTATION_LATEST_LIMIT) this.latest.splice(0, this.latest.length - ROTATION_LATEST_LIMIT);
  }

  /** The rotation statechart snapshot of a model (ask `.can` before appending a decision). */
  rotation(model: string): RotationSnapshot {
    return this.state(model);
  }

  /** Latest entry per model. */
  perModel(): Record<string, RotationDebugEntry> {
    const out: Record<string, RotationDebugEntry> = {};
    for (const e of this.latest) out[e.model] = e;
    return out;
  }

  /** The last 100 entries, oldest first. */
  entries(): RotationDebugEntry[] {
    return this.latest.map((e) => structuredClone(e));
  }

  snapshot(): RotationDebugState {
    return structuredClone({
      machines: Object.fromEntries([...this.machines].map(([m, s]) => [m, persistState(s)])),
      settling: this.settling,
      outcomes: this.outcomes,
      latest: this.latest,
    });
  }

  restore(state: RotationDebugState): void {
    const s = structuredClone(state);
    this.machines.clear();
    for (const [m, p] of Object.entries(s.machines)) this.machines.set(m, restoreState(rotationMachine, p));
    this.settling = s.settling;
    this.outcomes = s.outcomes;
    this.latest = s.latest;
  }
}
