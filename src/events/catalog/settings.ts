/**
 * Settings events. All live in the single `settings` stream so that one POST /v1/admin/settings is
 * one atomic append (SettingsChanged plus the ModelAccessModeChanged / GatewayDisabled it implies).
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
  model_limits?: { model_id: string; access_mode: AccessMode }[];
  disabled?: Partial<GatewaySettings['disabled']>;
  escrow_rotation?: Partial<GatewaySettings['escrow_rotation']>;
}

/** Reference defaults (spec "Limits"); every model starts admin_only. */
export const DEFAULT_SETTINGS: GatewaySettings = Object.freeze({
  default_request_max_tokens: 3072,
  request_max_tokens_cap: 4096,
  model_limits: [],
  disabled: { enabled: false, message: '', new_url: '' },
  escrow_rotation: { enabled: false, pre_poc_blocks: 300, models: [] },
}) as GatewaySettings;

export interface SettingsEventData {
  /** `patch` as posted; `effective` the merged result (what the settings projection shows). */
  SettingsChanged: { patch: SettingsPatch; effective: GatewaySettings };
  ModelAccessModeChanged: { model: string; mode: AccessMode; previous: AccessMode };
  /** Kill switch on: non-admin requests get 308 to `newUrl`. */
  GatewayDisabled: { message: string; newUrl: string };
  GatewayEnabled: Record<string, never>;
}
