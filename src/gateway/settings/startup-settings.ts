/**
 * The settings the configuration contributes at a start, recorded in the log (never applied from
 * the config beside it), so a projection rebuilt from the log alone equals the live one:
 *
 *  - GATEWAY_DEFAULT_MAX_TOKENS / GATEWAY_MAX_TOKENS_CAP: a SettingsDefaultsConfigured whenever
 *    they differ from the last recorded ones; they apply to each member the operator has not set
 *    by POST /v1/admin/settings (src/projections/settings.ts).
 *  - DEVSHARD_GATEWAY_DISABLED*: on the first start only (the spec: until the gateway database
 *    exists), as the settings POST that turns the kill switch on would record it.
 */
import type { Logger } from 'pino';
import { ConfigError, type GatewayConfig } from '../../config/index.js';
import { newEvent, settingsStream, type MaxTokensDefaults } from '../../events/catalog.js';
import type { GatewayContext } from '../context.js';
import { changeSettings } from './settings.js';

const metadata = { actor: { kind: 'startup' as const } };

export async function recordStartupSettings(
  ctx: Pick<GatewayContext, 'engine' | 'projections'>,
  config: GatewayConfig,
  opts: { firstStart: boolean; logger: Logger },
): Promise<void> {
  await recordConfiguredDefaults(ctx, config, opts.logger);
  if (opts.firstStart) await bootstrapDisabled(ctx, config, opts.logger);
}

async function recordConfiguredDefaults(ctx: Pick<GatewayContext, 'engine' | 'projections'>, config: GatewayConfig, logger: Logger): Promise<void> {
  const configured: MaxTokensDefaults = { default_request_max_tokens: config.limits.defaultMaxTokens, request_max_tokens_cap: config.limits.maxTokensCap };
  const recorded = ctx.projections.settings.configuredDefaults();
  if (configured.default_request_max_tokens === recorded.default_request_max_tokens && configured.request_max_tokens_cap === recorded.request_max_tokens_cap) return;
  await ctx.engine.serial(settingsStream, () => ctx.engine.append(settingsStream, [newEvent('SettingsDefaultsConfigured', configured, metadata)]));
  logger.info({ configured, previous: recorded }, 'recorded the configured max_tokens defaults (settings set by POST /v1/admin/settings keep precedence)');
}

/**
 * The settings POST's rule for the bootstrap: a kill switch names where clients go. Refused rather
 * than ignored, so a gateway meant to start disabled never serves traffic instead; checked only
 * where the variables apply (the first start, before the database is created), so a later start,
 * where they have no effect, is not refused over them.
 */
export function disabledBootstrapRefusal(config: GatewayConfig, firstStart: boolean): ConfigError | undefined {
  const b = config.disabledBootstrap;
  if (!firstStart || !b.enabled || b.newUrl !== undefined) return undefined;
  return new ConfigError([
    {
      variable: 'DEVSHARD_GATEWAY_DISABLED_NEW_URL',
      message:
        'DEVSHARD_GATEWAY_DISABLED_NEW_URL is required when DEVSHARD_GATEWAY_DISABLED is on at the first start: the 308 answers name the URL clients should use instead (POST /v1/admin/settings has the same rule)',
    },
  ]);
}

async function bootstrapDisabled(ctx: Pick<GatewayContext, 'engine' | 'projections'>, config: GatewayConfig, logger: Logger): Promise<void> {
  const b = config.disabledBootstrap;
  // startGateway has refused a first start without the URL (disabledBootstrapRefusal).
  if (!b.enabled || b.newUrl === undefined) return;
  await changeSettings(ctx, { disabled: { enabled: true, message: b.message ?? '', new_url: b.newUrl } }, metadata);
  logger.info({ new_url: b.newUrl }, 'first start: the gateway starts disabled (DEVSHARD_GATEWAY_DISABLED)');
}
