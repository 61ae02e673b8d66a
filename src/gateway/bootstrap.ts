/**
 * Start-up seeding: DEVSHARDS_JSON's initial escrows (pool mode) or DEVSHARD_ESCROW_ID (single
 * mode) are registered if the log does not know them yet; and for the quick start on the embedded
 * devnet, a first escrow is created so chat works at once.
 */
import type { GatewayContext } from './context.js';
import { createEscrow } from './escrows/create.js';
import { registerEscrow } from './escrows/register.js';
import { changeSettings } from './settings/settings.js';

/** The quick start's first escrow and what happens to it (the banner says it). */
export interface QuickStart {
  escrowId: string;
  /** Its epoch: the chain prunes it unsettled at epoch + 2. */
  epoch: number;
  /** Rotation is on for its model: settled and replaced before its settle window closes. */
  rotation: boolean;
}

export async function bootstrap(ctx: GatewayContext, opts: { quickStartEscrow: boolean; quickStartRotation?: boolean }): Promise<QuickStart | undefined> {
  const metadata = { actor: { kind: 'startup' as const } };
  const mode = ctx.config.mode;
  const wanted = mode.kind === 'single' ? [mode.escrowId] : mode.initialEscrows.map((e) => e.escrowId);
  for (const id of wanted) {
    if (ctx.engine.escrow(id)) continue;
    try {
      await registerEscrow(ctx, id, metadata);
      ctx.logger.info({ escrow_id: id }, 'registered initial escrow');
    } catch (err) {
      ctx.logger.error({ escrow_id: id, err: { message: (err as Error).message } }, 'could not register initial escrow');
    }
  }
  if (opts.quickStartEscrow && ctx.config.keys.creatorPrivateKey) {
    const amount = ctx.chainInfo.params.minAmount * 10n;
    const r = await createEscrow(ctx, {
      privateKeyHex: ctx.config.keys.creatorPrivateKey,
      keySource: { kind: 'env', name: 'DEVSHARD_PRIVATE_KEY' },
      amount,
      model: ctx.config.model,
      role: 'regular',
      register: true,
      origin: 'admin',
      metadata,
    });
    if (!r.ok) {
      ctx.logger.error({ err: { message: (r.error as Error).message } }, 'quick start: could not create the first escrow');
      return undefined;
    }
    ctx.logger.info({ escrow_id: r.escrowId, amount: amount.toString(), model: ctx.config.model }, 'quick start: created and registered a first escrow on the embedded devnet');
    if (opts.quickStartRotation) {
      // Without it the first escrow is pruned two epochs on (about 20 minutes on the devnet's
      // defaults) and every chat fails: rotation settles it before the epoch switch and replaces it
      // (a bridge escrow through the PoC window, then a new regular one), with the same key.
      await changeSettings(
        ctx,
        { escrow_rotation: { enabled: true, models: [{ model_id: ctx.config.model, temp_count: 1, target_count: 1, amount: amount.toString(), private_key_env: 'DEVSHARD_PRIVATE_KEY' }] } },
        metadata,
      );
      ctx.logger.info({ model: ctx.config.model }, 'quick start: escrow rotation is on for the model (POST /v1/admin/settings escrow_rotation.enabled false turns it off)');
    }
    return { escrowId: r.escrowId, epoch: r.epoch, rotation: opts.quickStartRotation === true };
  }
  return undefined;
}
