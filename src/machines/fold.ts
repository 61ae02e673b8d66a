/**
 * State is a fold of the log: `initialTransition` then `transition` per recorded event. No actions
 * run (they are pure values here), so replaying never repeats a side effect.
 */
import { initialTransition, transition, type AnyStateMachine, type EventFromLogic, type InputFrom, type SnapshotFrom } from 'xstate';
import type { RecordedEvent } from '../events/envelope.js';

/** `{ type, data }` of anything that looks like an event (a recorded one or a machine event). */
export const asMachineEvent = (event: { type: string; data: unknown }): { type: string; data: unknown } => ({ type: event.type, data: event.data });

/** The machine's initial snapshot. */
export function initialSnapshot<M extends AnyStateMachine>(machine: M, input?: InputFrom<M>): SnapshotFrom<M> {
  return (initialTransition as (m: AnyStateMachine, i?: unknown) => [unknown, unknown])(machine, input)[0] as SnapshotFrom<M>;
}

/**
 * Applies one event. `accepted` is false when the machine ignores it (no enabled transition):
 * xstate then hands back the very same snapshot object.
 */
export function step<M extends AnyStateMachine>(
  machine: M,
  snapshot: SnapshotFrom<M>,
  event: EventFromLogic<M> | RecordedEvent,
): { snapshot: SnapshotFrom<M>; accepted: boolean } {
  const next = transition(machine, snapshot as never, asMachineEvent(event as { type: string; data: unknown }) as never)[0] as SnapshotFrom<M>;
  return { snapshot: next, accepted: next !== snapshot };
}

/** Folds events through a machine from its initial state; ignored events leave the state as is. */
export function foldMachine<M extends AnyStateMachine>(
  machine: M,
  events: Iterable<EventFromLogic<M> | RecordedEvent>,
  input?: InputFrom<M>,
): SnapshotFrom<M> {
  let snapshot = initialSnapshot(machine, input);
  for (const event of events) snapshot = step(machine, snapshot, event).snapshot;
  return snapshot;
}

/** What a checkpoint keeps of a snapshot. */
export interface PersistedMachineState {
  value: unknown;
  context: unknown;
}

/** A JSON-safe copy of a snapshot's value and context. */
export function persistState(snapshot: { value: unknown; context: unknown }): PersistedMachineState {
  return { value: snapshot.value, context: snapshot.context };
}

/** Rebuilds a snapshot from `persistState` output (no events replayed, no actions run). */
export function restoreState<M extends AnyStateMachine>(machine: M, persisted: PersistedMachineState): SnapshotFrom<M> {
  return machine.resolveState(persisted as never) as SnapshotFrom<M>;
}

/** Dotted state value ("phase1.promoting") for display and comparisons. */
export function stateName(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object') {
    const [key, child] = Object.entries(value)[0] ?? [];
    return key === undefined ? '' : child === undefined || (typeof child === 'object' && child && Object.keys(child).length === 0) ? key : `${key}.${stateName(child)}`;
  }
  return String(value);
}
