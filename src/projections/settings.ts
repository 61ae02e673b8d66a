/**
 * Effective settings: the last SettingsChanged `effective` document, with access modes and the
 * kill switch taken from their statecharts (ModelAccessModeChanged, GatewayDisabled/Enabled in
 * the same `settings` stream), which are authoritative for those two members.
 *
 * The max-tokens members: what the operator set by POST (a member in a SettingsChanged `patch`),
 * else the configured default (SettingsDefaultsConfigured, recorded at a start from
 * GATEWAY_DEFAULT_MAX_TOKENS / GATEWAY_MAX_TOKENS_CAP), else the reference value. The default shown
 * and applied is clamped to the cap; the value set is kept, so raising the cap brings it back.
 */
import { DEFAULT_SETTINGS, settingsStream, upcast, type AccessMode, type GatewaySettings, type MaxTokensDefaults } from '../events/catalog.js';
import type { RecordedEvent } from '../events/envelope.js';
import {
  accessModeMachine,
  disabledMachine,
  initialSnapshot,
  persistState,
  restoreState,
  step,
  type AccessModeSnapshot,
  type DisabledSnapshot,
  type PersistedMachineState,
} from '../machines/index.js';

export interface SettingsState {
  /** As set (the default not clamped). */
  base: GatewaySettings;
  /** The last recorded configured defaults. */
  configured: MaxTokensDefaults;
  /** Max-tokens members the operator has set by POST (configured defaults no longer replace them). */
  operatorSet: (keyof MaxTokensDefaults)[];
  access: Record<string, PersistedMachineState>;
  disabled: PersistedMachineState;
}

const MAX_TOKENS_KEYS = ['default_request_max_tokens', 'request_max_tokens_cap'] as const;
const referenceDefaults = (): MaxTokensDefaults => ({
  default_request_max_tokens: DEFAULT_SETTINGS.default_request_max_tokens,
  request_max_tokens_cap: DEFAULT_SETTINGS.request_max_tokens_cap,
});

const clone = <T>(v: T): T => structuredClone(v);

function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object') {
    for (const child of Object.values(v)) deepFreeze(child);
    Object.freeze(v);
  }
  return v;
}

/** The effective-settings projection. */
export class SettingsProjection {
  private base: GatewaySettings = clone(DEFAULT_SETTINGS);
  private configured: MaxTokensDefaults = referenceDefaults();
  private readonly operatorSet = new Set<keyof MaxTokensDefaults>();
  private readonly access = new Map<string, AccessModeSnapshot>();
  private disabledSnap: DisabledSnapshot = initialSnapshot(disabledMachine);
  /** The effective document, computed once per change (hot-path reads share it, frozen). */
  private cached: Readonly<GatewaySettings> | undefined;

  /** Folds one committed record (records of other streams are ignored). */
  apply(record: RecordedEvent): void {
    if (record.streamId !== settingsStream) return;
    this.cached = undefined;
    const event = upcast(record);
    if (!event) return;
    switch (event.type) {
      case 'SettingsChanged':
        this.base = clone(event.data.effective);
        for (const key of MAX_TOKENS_KEYS) if (event.data.patch[key] !== undefined) this.operatorSet.add(key);
        // A removed model_limits entry: its access mode is the default again (no entry).
        for (const l of event.data.patch.model_limits ?? []) if (l.access_mode === null) this.access.delete(l.model_id);
        return;
      case 'SettingsDefaultsConfigured':
        this.configured = { default_request_max_tokens: event.data.default_request_max_tokens, request_max_tokens_cap: event.data.request_max_tokens_cap };
        for (const key of MAX_TOKENS_KEYS) if (!this.operatorSet.has(key)) this.base[key] = event.data[key];
        return;
      case 'ModelAccessModeChanged': {
        const model = event.data.model;
        const before = this.access.get(model) ?? initialSnapshot(accessModeMachine, { model });
        this.access.set(model, step(accessModeMachine, before, event).snapshot);
        return;
      }
      case 'GatewayDisabled':
      case 'GatewayEnabled':
        this.disabledSnap = step(disabledMachine, this.disabledSnap, event).snapshot;
        return;
    }
  }

  /** A model's access mode (`admin_only` unless switched). */
  accessMode(model: string): AccessMode {
    return (this.access.get(model)?.value as AccessMode | undefined) ?? 'admin_only';
  }

  /** The access-mode statechart snapshot of a model (ask `.can` before appending a change). */
  accessModeSnapshot(model: string): AccessModeSnapshot {
    return this.access.get(model) ?? initialSnapshot(accessModeMachine, { model });
  }

  /** The kill-switch statechart snapshot. */
  disabledSnapshot(): DisabledSnapshot {
    return this.disabledSnap;
  }

  /** Models with an access mode set at some point. */
  accessModels(): string[] {
    return [...this.access.keys()].sort();
  }

  /** The effective settings document (GET-able); a copy the caller may change. */
  effective(): GatewaySettings {
    return clone(this.current());
  }

  /** The settings as set, the default not clamped to the cap: the merge base of the next POST. */
  asSet(): GatewaySettings {
    return this.compute();
  }

  /** The configured max-tokens defaults the log last recorded (reference values before any). */
  configuredDefaults(): MaxTokensDefaults {
    return { ...this.configured };
  }

  /**
   * The effective settings as a shared, deeply frozen document: for per-request reads (kill
   * switch, max_tokens defaults, served models), which must not pay a deep copy each time.
   */
  current(): Readonly<GatewaySettings> {
    if (this.cached) return this.cached;
    const s = this.compute();
    s.default_request_max_tokens = Math.min(s.default_request_max_tokens, s.request_max_tokens_cap);
    return (this.cached = deepFreeze(s));
  }

  private compute(): GatewaySettings {
    const s = clone(this.base);
    const modes = new Map(s.model_limits.map((l) => [l.model_id, l.access_mode] as const));
    for (const [model, snap] of this.access) modes.set(model, snap.value as AccessMode);
    s.model_limits = [...modes].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([model_id, access_mode]) => ({ model_id, access_mode }));
    const on = this.disabledSnap.value === 'on';
    s.disabled = on
      ? { enabled: true, message: this.disabledSnap.context.message, new_url: this.disabledSnap.context.newUrl }
      : { ...s.disabled, enabled: false };
    return s;
  }

  /** JSON-safe state. */
  snapshot(): SettingsState {
    return {
      base: clone(this.base),
      configured: { ...this.configured },
      operatorSet: MAX_TOKENS_KEYS.filter((k) => this.operatorSet.has(k)),
      access: Object.fromEntries([...this.access].map(([m, s]) => [m, persistState(s)])),
      disabled: persistState(this.disabledSnap),
    };
  }

  restore(state: SettingsState): void {
    this.cached = undefined;
    this.base = clone(state.base);
    this.configured = { ...state.configured };
    this.operatorSet.clear();
    for (const k of state.operatorSet) this.operatorSet.add(k);
    this.access.clear();
    for (const [m, p] of Object.entries(state.access)) this.access.set(m, restoreState(accessModeMachine, p));
    this.disabledSnap = restoreState(disabledMachine, state.disabled);
  }
}
