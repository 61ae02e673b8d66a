/**
 * The statecharts and their folds. Commands ask `snapshot.can(event)` before appending; state is
 * always `foldX(events)` (or a projection applying `step` per committed record).
 */
import type { SnapshotFrom } from 'xstate';
import type { RecordedEvent } from '../events/envelope.js';
import { accessModeMachine, type AccessModeEvent } from './access-mode.js';
import { devshardSessionPhaseMachine } from './devshard-session-phase.js';
import { disabledMachine, type DisabledEvent } from './disabled.js';
import { escrowMachine, type EscrowEvent, type EscrowInput } from './escrow.js';
import { foldMachine } from './fold.js';
import { rotationMachine, type RotationEvent } from './rotation.js';

export * from './access-mode.js';
export * from './devshard-session-phase.js';
export * from './disabled.js';
export * from './escrow.js';
export * from './escrow-decide.js';
export * from './escrow-rules.js';
export * from './rotation.js';
export * from './fold.js';

/** Every statechart by name: diagrams, coverage tests and replay iterate over it. */
export const machines = {
  escrow: escrowMachine,
  accessMode: accessModeMachine,
  disabled: disabledMachine,
  rotation: rotationMachine,
  devshardSessionPhase: devshardSessionPhaseMachine,
} as const;

export type MachineName = keyof typeof machines;

export type EscrowSnapshot = SnapshotFrom<typeof escrowMachine>;
export type AccessModeSnapshot = SnapshotFrom<typeof accessModeMachine>;
export type DisabledSnapshot = SnapshotFrom<typeof disabledMachine>;
export type RotationSnapshot = SnapshotFrom<typeof rotationMachine>;

/** One escrow's state from its events (intent stream then `escrow-<id>`, in log order). */
export const foldEscrow = (events: Iterable<EscrowEvent | RecordedEvent>, input?: EscrowInput): EscrowSnapshot =>
  foldMachine(escrowMachine, events, input);

/** One model's access mode from the settings stream (events of other models are skipped). */
export const foldAccessMode = (model: string, events: Iterable<AccessModeEvent | RecordedEvent>): AccessModeSnapshot =>
  foldMachine(accessModeMachine, [...events].filter((e) => e.type === 'ModelAccessModeChanged' && (e.data as AccessModeEvent['data']).model === model), { model });

/** The kill switch from the settings stream. */
export const foldDisabled = (events: Iterable<DisabledEvent | RecordedEvent>): DisabledSnapshot => foldMachine(disabledMachine, events);

/** One model's rotation state from `rotation-<model>`. */
export const foldRotation = (model: string, events: Iterable<RotationEvent | RecordedEvent>): RotationSnapshot =>
  foldMachine(rotationMachine, events, { model });
