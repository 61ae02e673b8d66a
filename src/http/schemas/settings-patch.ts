/**
 * The body of POST /v1/admin/settings as a settings patch (the gateway's SettingsPatch, merged by
 * src/gateway/settings/settings.ts): snake_case members kept, amounts parsed, duplicate models refused.
 */
import type { SettingsPatch } from '../../events/catalog.js';
import { errors } from '../api-error.js';
import { parseAmount, type SettingsBody } from './admin.js';

/**
 * A model named twice in one list is ambiguous: in model_limits the merged settings kept the last
 * entry while the access-mode statechart took the first (the log then disagreed with itself), and
 * in escrow_rotation.models the rotator would run the model twice per tick. Refused as a 400.
 */
function refuseDuplicateModels(list: readonly { model_id: string }[] | undefined, param: string): void {
  const seen = new Set<string>();
  list?.forEach((item, i) => {
    if (seen.has(item.model_id)) throw errors.badRequest(`Invalid '${param}': model '${item.model_id.slice(0, 256)}' is listed more than once.`, `${param}[${i}].model_id`, 'duplicate_model');
    seen.add(item.model_id);
  });
}

export function toPatch(body: SettingsBody): SettingsPatch {
  refuseDuplicateModels(body.model_limits, 'model_limits');
  refuseDuplicateModels(body.escrow_rotation?.models, 'escrow_rotation.models');
  const patch: SettingsPatch = {};
  if (body.default_request_max_tokens !== undefined) patch.default_request_max_tokens = body.default_request_max_tokens;
  if (body.request_max_tokens_cap !== undefined) patch.request_max_tokens_cap = body.request_max_tokens_cap;
  if (body.model_limits !== undefined) patch.model_limits = body.model_limits.map((l) => ({ model_id: l.model_id, access_mode: l.access_mode }));
  if (body.disabled !== undefined) patch.disabled = { ...body.disabled };
  if (body.escrow_rotation !== undefined) {
    const r = body.escrow_rotation;
    patch.escrow_rotation = {
      ...(r.enabled !== undefined ? { enabled: r.enabled } : {}),
      ...(r.pre_poc_blocks !== undefined ? { pre_poc_blocks: r.pre_poc_blocks } : {}),
      ...(r.models !== undefined
        ? {
            models: r.models.map((m, i) => ({
              model_id: m.model_id,
              temp_count: m.temp_count,
              target_count: m.target_count,
              amount: parseAmount(m.amount, `escrow_rotation.models[${i}].amount`).toString(),
              private_key_env: m.private_key_env,
            })),
          }
        : {}),
    };
  }
  return patch;
}

