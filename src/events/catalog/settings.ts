/**
 * Settings events. All live in the single `settings` stream so that one POST /v1/admin/settings is
 * one atomic append (SettingsChanged plus the ModelAccessModeChanged / GatewayDisabled it implies).
 * SettingsDefaultsConfigured records the max-tokens defaults of the configuration at a start, so
 * the settings fold needs the log alone (a rebuild equals the live projection without the config).
 */
import type { Amount } from './common.js';

export type AccessMode = 'admin_only' | 'api_key';

/** One rotated model (spec "escrow_rotation.models[]"); amount as a decimal string. */
export interface RotationModelSettings {
  model_id: string;
  temp_count: number;
  target_count: number;
  amount: Amount;
  private_key_env: string;
}

/** The effective gateway settings document (spec field names). */
export interface GatewaySettings {
  default_request_max_tokens: number;
  request_max_tokens_cap: number;
  model_limits: { model_id: string; access_mode: AccessMode }[];
  disabled: { enabled: boolean; message: string; new_url: string };
  escrow_rotation: { enabled: boolean; pre_poc_blocks: number; models: RotationModelSettings[] };
}

/** A POST /v1/admin/settings body: every member optional. */
export interface SettingsPatch {
  default_request_max_tokens?: number;
  request_max_tokens_cap?: number;
  /** `access_mode: null` removes the model's entry (its access mode is the default again). */
  model_limits?: { model_id: string; access_mode: AccessMode | null }[];
  disabled?: Partial<GatewaySettings['disabled']>;
  escrow_rotation?: Partial<GatewaySettings['escrow_rotation']>;
}

/**
 * Reference defaults (spec "Limits"); every model starts admin_only. The two max-tokens members are
 * the base until a SettingsDefaultsConfigured records the configured ones.
 */
export const DEFAULT_SETTINGS: GatewaySettings = Object.freeze({
  default_request_max_tokens: 3072,
  request_max_tokens_cap: 4096,
  model_limits: [],
  disabled: { enabled: false, message: '', new_url: '' },
  escrow_rotation: { enabled: false, pre_poc_blocks: 300, models: [] },
}) as GatewaySettings;

/** The two settings GATEWAY_DEFAULT_MAX_TOKENS and GATEWAY_MAX_TOKENS_CAP configure. */
export type MaxTokensDefaults = Pick<GatewaySettings, 'default_request_max_tokens' | 'request_max_tokens_cap'>;

export interface SettingsEventData {
  /**
   * `patch` as posted; `effective` the merged result as set (the settings projection shows it with
   * the default clamped to the cap). A max-tokens member in `patch` is the operator's from then on:
   * configured defaults no longer replace it.
   */
  SettingsChanged: { patch: SettingsPatch; effective: GatewaySettings };
  /**
   * GATEWAY_DEFAULT_MAX_TOKENS / GATEWAY_MAX_TOKENS_CAP of a start, recorded when they differ from
   * the last recorded ones: they apply to each member the operator has not set by POST.
   */
  SettingsDefaultsConfigured: MaxTokensDefaults;
  ModelAccessModeChanged: { model: string; mode: AccessMode; previous: AccessMode };
  /** Kill switch on: non-admin requests get 308 to `newUrl`. */
  GatewayDisabled: { message: string; newUrl: string };
  GatewayEnabled: Record<string, never>;
}
