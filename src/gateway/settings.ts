/**
 * POST /v1/admin/settings: a partial merge into the effective settings, recorded as one atomic
 * append to the `settings` stream: SettingsChanged plus the ModelAccessModeChanged and
 * GatewayDisabled/Enabled events it implies (access modes and the kill switch are statecharts).
 *
 * Merge rules: scalars replace; `model_limits` merge by model_id; `escrow_rotation.models`
 * replaces the list when given; `disabled` members merge. The answer shows
 * `default_request_max_tokens` clamped to `request_max_tokens_cap` (what requests get).
 */
import { newEvent, settingsStream, type GatewaySettings, type SettingsPatch } from '../events/catalog.js';
import type { EventMetadata, NewEvent } from '../events/envelope.js';
import { refuse } from './errors.js';
import { step } from '../machines/index.js';
import { accessModeMachine } from '../machines/access-mode.js';
import { disabledMachine } from '../machines/disabled.js';
import type { GatewayContext } from './context.js';

export function mergeSettings(base: GatewaySettings, patch: SettingsPatch): GatewaySettings {
  const limits = new Map(base.model_limits.map((l) => [l.model_id, l.access_mode]));
  for (const l of patch.model_limits ?? []) limits.set(l.model_id, l.access_mode);
  return {
    default_request_max_tokens: patch.default_request_max_tokens ?? base.default_request_max_tokens,
    request_max_tokens_cap: patch.request_max_tokens_cap ?? base.request_max_tokens_cap,
    model_limits: [...limits].map(([model_id, access_mode]) => ({ model_id, access_mode })).sort((a, b) => a.model_id.localeCompare(b.model_id)),
    disabled: { ...base.disabled, ...patch.disabled },
    escrow_rotation: {
      enabled: patch.escrow_rotation?.enabled ?? base.escrow_rotation.enabled,
      pre_poc_blocks: patch.escrow_rotation?.pre_poc_blocks ?? base.escrow_rotation.pre_poc_blocks,
      models: patch.escrow_rotation?.models ?? base.escrow_rotation.models,
    },
  };
}

/** What a settings change needs (the start-up bootstrap has no full context yet). */
type SettingsContext = Pick<GatewayContext, 'engine' | 'projections'>;

/** Decides and appends a settings change; answers the effective settings once durable. */
export function changeSettings(ctx: SettingsContext, patch: SettingsPatch, metadata: EventMetadata): Promise<GatewaySettings> {
  // One change at a time: each merges into the effective settings the previous one left.
  return ctx.engine.serial(settingsStream, () => applyChange(ctx, patch, metadata));
}

async function applyChange(ctx: SettingsContext, patch: SettingsPatch, metadata: EventMetadata): Promise<GatewaySettings> {
  const settings = ctx.projections.settings;
  // Merged into the settings as set: a default above the cap is kept (and clamped where it is read,
  // like GATEWAY_DEFAULT_MAX_TOKENS and a request's max_tokens), so lowering only the cap is accepted
  // and raising it again brings the default back.
  const effective = mergeSettings(settings.asSet(), patch);
  if (effective.disabled.enabled && !effective.disabled.new_url) {
    throw refuse.invalid('disabled.new_url is required when disabled.enabled is true: clients are redirected there.', 'disabled.new_url');
  }
  const events: NewEvent[] = [newEvent('SettingsChanged', { patch, effective }, metadata)];
  for (const l of patch.model_limits ?? []) {
    const snap = settings.accessModeSnapshot(l.model_id);
    const e = newEvent('ModelAccessModeChanged', { model: l.model_id, mode: l.access_mode, previous: settings.accessMode(l.model_id) }, metadata);
    if (step(accessModeMachine, snap, e as never).accepted) events.push(e);
  }
  if (patch.disabled) {
    const snap = settings.disabledSnapshot();
    const e = effective.disabled.enabled
      ? newEvent('GatewayDisabled', { message: effective.disabled.message, newUrl: effective.disabled.new_url }, metadata)
      : newEvent('GatewayEnabled', {}, metadata);
    if (step(disabledMachine, snap, e as never).accepted) events.push(e);
  }
  await ctx.engine.append(settingsStream, events);
  return settings.effective();
}
