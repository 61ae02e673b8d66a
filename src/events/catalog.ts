/**
 * The event catalog: every event the gateway records, its data shape and its schema version.
 *
 * Stream layout (one aggregate = one stream, so one expected-version check guards it):
 *  - `escrow-create-<uuid>`  a creation intent before the chain has named the escrow:
 *                            EscrowCreateRequested, then EscrowCreateFailed on failure.
 *  - `escrow-<chainId>`      one escrow's whole life, starting at EscrowCreated (which links back
 *                            with `intentId`) or EscrowImported: registration, every inference,
 *                            depletion, finalize, settle, deactivate, remove.
 *  - `settings`              SettingsChanged, ModelAccessModeChanged, GatewayDisabled/Enabled:
 *                            one settings POST is one atomic append; SettingsDefaultsConfigured.
 *  - `rotation-<model>`      rotation decisions and depletion replacements of one model.
 *  - `devshard-session-<chainId>`  the diffs sent over the real devshard host protocol
 *                            (DevshardDiffSent), the devshard protocol's diffs, the host txs taken
 *                            from answers (DevshardHostTxsReceived), how far each host applied them
 *                            and what it refused (DevshardHostAcknowledged, DevshardHostRefused), the facts each run bound the
 *                            session to (DevshardSessionOpened), a v5 session's height seed
 *                            (DevshardHeightSeeded).
 *
 * Amounts are decimal strings (see catalog/common.ts). Data of an older schema version is brought
 * forward by `upcast` before anything folds it.
 */
import type { EventMetadata, NewEvent, RecordedEvent } from './envelope.js';
import type { EscrowEventData } from './catalog/escrow.js';
import type { SettingsEventData } from './catalog/settings.js';
import type { RotationEventData } from './catalog/rotation.js';
import type { DevshardEventData } from './catalog/devshard.js';

export type * from './catalog/common.js';
export type * from './catalog/escrow.js';
export type * from './catalog/rotation.js';
export type * from './catalog/devshard.js';
export type { AccessMode, GatewaySettings, MaxTokensDefaults, RotationModelSettings, SettingsPatch } from './catalog/settings.js';
export { DEFAULT_SETTINGS } from './catalog/settings.js';
export { settlementTag } from './catalog/common.js';

/** Event type → data shape, for every catalog event. */
export interface EventDataMap extends EscrowEventData, SettingsEventData, RotationEventData, DevshardEventData {}

export type EventType = keyof EventDataMap;

/** Current schema version per event type; bump it and add an upcaster when a shape changes. */
export const SCHEMA_VERSIONS: { readonly [K in EventType]: number } = {
  EscrowCreateRequested: 1,
  EscrowCreated: 1,
  EscrowCreateFailed: 1,
  EscrowRegistered: 1,
  EscrowImported: 1,
  EscrowActivated: 1,
  NoncesReserved: 1,
  NoncesSkipped: 1,
  NoncesReleased: 1,
  UsageRecovered: 1,
  InferenceStarted: 1,
  InferenceFinished: 1,
  InferenceFailed: 1,
  InferencesRecorded: 1,
  EscrowDepleted: 1,
  EscrowRoutingStopped: 1,
  EscrowFinalized: 1,
  EscrowSettleRequested: 1,
  EscrowSettleDeferred: 1,
  EscrowSettled: 1,
  EscrowSettleFailed: 1,
  EscrowDeactivated: 1,
  EscrowRemoved: 1,
  SettingsChanged: 1,
  SettingsDefaultsConfigured: 1,
  ModelAccessModeChanged: 1,
  GatewayDisabled: 1,
  GatewayEnabled: 1,
  RotationPhaseStarted: 1,
  RotationPhaseCompleted: 1,
  RotationCreateDecided: 1,
  RotationCreateSuppressed: 1,
  RotationPromoted: 1,
  RotationSettleDecided: 1,
  RotationFailed: 1,
  DepletionReplacementDecided: 1,
  DepletionReplacementFailed: 1,
  DevshardSessionOpened: 1,
  DevshardDiffSent: 1,
  DevshardHostTxsReceived: 1,
  DevshardHostAcknowledged: 1,
  DevshardHostRefused: 1,
  DevshardHeightSeeded: 1,
};

/** All catalog event types, in catalog order. */
export const EVENT_TYPES = Object.keys(SCHEMA_VERSIONS) as EventType[];

/** `{ type, data }` of one catalog event: what the statecharts consume. */
export type CatalogEvent = { [K in EventType]: { type: K; data: EventDataMap[K] } }[EventType];

/** A catalog event of one type. */
export type CatalogEventOf<K extends EventType> = Extract<CatalogEvent, { type: K }>;

/** A catalog event ready to append. */
export type NewCatalogEvent<K extends EventType = EventType> = { [T in K]: NewEvent<T, EventDataMap[T]> }[K];

/** A recorded catalog event (after `upcast`). */
export type RecordedCatalogEvent<K extends EventType = EventType> = {
  [T in K]: RecordedEvent<T, EventDataMap[T]>;
}[K];

/**
 * Builds an event to append, type-checked against the catalog and stamped with its schema version.
 * @example newEvent('EscrowActivated', { escrowId }, { actor: { kind: 'admin' } })
 */
export function newEvent<K extends EventType>(type: K, data: EventDataMap[K], metadata: EventMetadata): NewEvent<K, EventDataMap[K]> {
  return { type, schemaVersion: SCHEMA_VERSIONS[type], data, metadata };
}

/** True when `type` names a catalog event. */
export function isCatalogType(type: string): type is EventType {
  return Object.prototype.hasOwnProperty.call(SCHEMA_VERSIONS, type);
}

/** Upcasters keyed by `${type}@${fromVersion}`; each returns the data one version newer. */
const upcasters: Record<string, (data: unknown) => unknown> = {};

/**
 * Brings a recorded event's data to the current schema version. Returns null for a type the
 * catalog does not know (a newer gateway's event): folds skip it instead of failing.
 */
export function upcast(record: RecordedEvent): RecordedCatalogEvent | null {
  if (!isCatalogType(record.type)) return null;
  const current = SCHEMA_VERSIONS[record.type];
  let { data, schemaVersion } = record;
  while (schemaVersion < current) {
    const up = upcasters[`${record.type}@${schemaVersion}`];
    if (!up) throw new Error(`no upcaster for ${record.type} v${schemaVersion}`);
    data = up(data);
    schemaVersion += 1;
  }
  return (schemaVersion === record.schemaVersion ? record : { ...record, data, schemaVersion }) as RecordedCatalogEvent;
}

/** `{ type, data }` of a record, for feeding a machine. */
export function toMachineEvent(record: RecordedCatalogEvent): CatalogEvent {
  return { type: record.type, data: record.data } as CatalogEvent;
}

// ---- stream ids -------------------------------------------------------------------------------

/** Prefix of escrow streams (`escrow-<chainId>`). */
export const ESCROW_STREAM_PREFIX = 'escrow-';
/** Prefix of creation-intent streams (`escrow-create-<uuid>`). */
export const CREATE_INTENT_STREAM_PREFIX = 'escrow-create-';
/** Prefix of rotation streams (`rotation-<model>`). */
export const ROTATION_STREAM_PREFIX = 'rotation-';

/** Stream of one escrow, from EscrowCreated / EscrowImported to EscrowRemoved. */
export const escrowStream = (escrowId: string): string => `${ESCROW_STREAM_PREFIX}${escrowId}`;
/** Stream of one creation intent (before the chain id is known). */
export const createIntentStream = (intentId: string): string => `${CREATE_INTENT_STREAM_PREFIX}${intentId}`;
/** The settings stream (settings, access modes, kill switch). */
export const settingsStream = 'settings';
/** The kill switch lives in the settings stream so a settings POST stays one atomic append. */
export const gatewayStream = settingsStream;
/** The devshard protocol session of one escrow (its diffs). Not `escrow-`: the escrow fold does not read it. */
export const devshardSessionStream = (escrowId: string): string => `devshard-session-${escrowId}`;
/** Rotation decisions of one model. */
export const rotationStream = (model: string): string => `${ROTATION_STREAM_PREFIX}${model}`;

/** What a stream id names. Intent streams are tested first: they share the `escrow-` prefix. */
export function parseStreamId(
  streamId: string,
): { kind: 'create-intent'; id: string } | { kind: 'escrow'; id: string } | { kind: 'settings' } | { kind: 'rotation'; model: string } | { kind: 'other' } {
  if (streamId.startsWith(CREATE_INTENT_STREAM_PREFIX)) return { kind: 'create-intent', id: streamId.slice(CREATE_INTENT_STREAM_PREFIX.length) };
  if (streamId.startsWith(ESCROW_STREAM_PREFIX)) return { kind: 'escrow', id: streamId.slice(ESCROW_STREAM_PREFIX.length) };
  if (streamId === settingsStream) return { kind: 'settings' };
  if (streamId.startsWith(ROTATION_STREAM_PREFIX)) return { kind: 'rotation', model: streamId.slice(ROTATION_STREAM_PREFIX.length) };
  return { kind: 'other' };
}
