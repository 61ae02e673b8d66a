/**
 * POST /v1/admin/settings: a partial merge into the effective settings, recorded as one atomic
 * append to the `settings` stream: SettingsChanged plus the ModelAccessModeChanged and
 * GatewayDisabled/Enabled events it implies (access modes and the kill switch are statecharts).
 *
 * Merge rules: scalars replace; `model_limits` merge by model_id (`access_mode: null` removes the
 * entry: the model is back to the default, admin_only); `escrow_rotation.models` replaces the list
 * when given; `disabled` members merge. The answer shows
 * `default_request_max_tokens` clamped to `request_max_tokens_cap` (what requests get).
 */
import { newEvent, settingsStream, type GatewaySettings, type SettingsPatch } from '../../events/catalog.js';
import type { EventMetadata, NewEvent } from '../../events/envelope.js';
import { GatewayError, refuse } from '../errors.js';
import { DEVSHARD_TEXT } from '../../chain/devshard-errors.js';
import { step } from '../../machines/index.js';
import { accessModeMachine } from '../../machines/access-mode.js';
import { disabledMachine } from '../../machines/disabled.js';
import type { GatewayContext } from '../context.js';
import { isPrivateKeyHex } from '../../config/private-key.js';
import { envValue } from '../keyring.js';
import { clip } from '../errors.js';

export function mergeSettings(base: GatewaySettings, patch: SettingsPatch): GatewaySettings {
  const limits = new Map(base.model_limits.map((l) => [l.model_id, l.access_mode]));
  for (const l of patch.model_limits ?? []) {
    if (l.access_mode === null) limits.delete(l.model_id);
    else limits.set(l.model_id, l.access_mode);
  }
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
    // A removal: the settings projection forgets the model's access mode (admin_only again).
    if (l.access_mode === null) continue;
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

/** How long the settings check waits for the chain's devshard_escrow_params. */
const PARAMS_TIMEOUT_MS = 5_000;

/** What the operator's settings check reads (the key's env variable, the chain's amount range). */
type CheckContext = Pick<GatewayContext, 'engine' | 'projections' | 'config' | 'chain'>;

/**
 * POST /v1/admin/settings: checks the patch against what the gateway can act on, then applies it
 * (one change at a time, so the check sees the settings the change merges into). Refused with a
 * 400 naming the member, nothing recorded:
 * - `model_limits[i].model_id` not served here (`model_not_served`): a model the gateway has no
 *   escrow of and does not rotate would be listed by GET /v1/models and answer 503 forever;
 *   `access_mode: null` (a removal) is always accepted, so stale entries can be removed;
 * - `escrow_rotation.models[i].private_key_env` unset or not a 64-hex private key
 *   (`private_key_env_unusable`; the value is never echoed);
 * - `escrow_rotation.models[i].amount` outside the chain's [min_amount, max_amount]
 *   (`amount_out_of_range`). When the chain cannot be read the change is refused with 503
 *   (`chain_unreadable`): the range cannot be checked.
 */
export function changeSettingsChecked(ctx: CheckContext, patch: SettingsPatch, metadata: EventMetadata): Promise<GatewaySettings> {
  return ctx.engine.serial(settingsStream, async () => {
    await checkPatch(ctx, patch);
    return applyChange(ctx, patch, metadata);
  });
}

/** The operator's change (POST /v1/admin/settings): checked and recorded, then the gateway reconfigures itself. */
export async function operatorChangeSettings(ctx: GatewayContext, patch: SettingsPatch, metadata: EventMetadata): Promise<GatewaySettings> {
  const effective = await changeSettingsChecked(ctx, patch, metadata);
  ctx.onSettingsChanged?.();
  return effective;
}

/** Models the gateway can serve after `effective`: configured, with an escrow here, or rotated. */
function servableModels(ctx: CheckContext, effective: GatewaySettings): string[] {
  return [...new Set([ctx.config.model, ...ctx.projections.pool.models(), ...effective.escrow_rotation.models.map((m) => m.model_id)])].filter(Boolean).sort();
}

async function checkPatch(ctx: CheckContext, patch: SettingsPatch): Promise<void> {
  const effective = mergeSettings(ctx.projections.settings.asSet(), patch);
  const servable = servableModels(ctx, effective);
  patch.model_limits?.forEach((l, i) => {
    if (l.access_mode === null || servable.includes(l.model_id)) return;
    throw new GatewayError('invalid', 'model_not_served', `Invalid 'model_limits[${i}].model_id': this gateway does not serve model '${clip(l.model_id)}' (served: ${servable.join(', ')}).`, {
      param: `model_limits[${i}].model_id`,
      remedy: 'Create an escrow of the model first (POST /v1/admin/escrows) or add it to escrow_rotation.models in the same request; remove a stale entry with access_mode null.',
    });
  });
  const models = patch.escrow_rotation?.models;
  if (!models || models.length === 0) return;
  models.forEach((m, i) => {
    const problem = envKeyProblem(ctx.config.env, m.private_key_env);
    if (!problem) return;
    throw new GatewayError('invalid', 'private_key_env_unusable', `Invalid 'escrow_rotation.models[${i}].private_key_env': the environment variable ${m.private_key_env} ${problem}, so rotation could not sign its creates and settles.`, {
      param: `escrow_rotation.models[${i}].private_key_env`,
      remedy: `Set ${m.private_key_env} to the creator's private key (64 hex digits) in the gateway's environment and restart it, or name a variable that holds one.`,
    });
  });
  let params: Awaited<ReturnType<GatewayContext['chain']['params']>>;
  try {
    params = await withTimeout(ctx.chain.params(), PARAMS_TIMEOUT_MS);
  } catch {
    throw new GatewayError('unavailable', 'chain_unreadable', `The chain's devshard_escrow_params could not be read, so escrow_rotation.models[].amount cannot be checked against min_amount/max_amount; nothing was changed.`, {
      remedy: 'Retry once the chain answers (GET /v1/status shows the chain).',
      retryAfterSeconds: 5,
    });
  }
  models.forEach((m, i) => {
    const amount = BigInt(m.amount);
    if (amount >= params.minAmount && amount <= params.maxAmount) return;
    throw new GatewayError('invalid', 'amount_out_of_range', `Invalid 'escrow_rotation.models[${i}].amount': ${DEVSHARD_TEXT.amountOutOfRange(amount, params.minAmount, params.maxAmount)} (devshard_escrow_params min_amount/max_amount); the chain would refuse every create.`, {
      param: `escrow_rotation.models[${i}].amount`,
      remedy: 'Choose an amount in that range.',
    });
  });
}

/**
 * Why env variable `name` cannot give rotation a key, or undefined when it can: unset, or not a
 * usable 64-hex private key. Never the value.
 */
export function envKeyProblem(env: Record<string, string | undefined>, name: string): string | undefined {
  const value = envValue(env, name)?.trim();
  if (!value) return 'is unset';
  if (!isPrivateKeyHex(value)) return 'does not hold a usable private key (64 hex digits)';
  return undefined;
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)))]).finally(() => clearTimeout(timer));
}
