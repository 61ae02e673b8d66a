/**
 * Start-up seeding: DEVSHARDS_JSON's initial escrows (pool mode) or DEVSHARD_ESCROW_ID (single
 * mode) are registered if the log does not know them yet; and for the quick start on the embedded
 * devnet, a first escrow is created so chat works at once.
 */
import type { GatewayContext } from './context.js';
import { createEscrow } from './escrows/create.js';
import { registerEscrow } from './escrows/lifecycle.js';

export async function bootstrap(ctx: GatewayContext, opts: { quickStartEscrow: boolean }): Promise<void> {
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
    if (r.ok) ctx.logger.info({ escrow_id: r.escrowId, amount: amount.toString(), model: ctx.config.model }, 'quick start: created and registered a first escrow on the embedded devnet');
    else ctx.logger.error({ err: { message: (r.error as Error).message } }, 'quick start: could not create the first escrow');
  }
}
