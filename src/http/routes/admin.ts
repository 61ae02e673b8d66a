/**
 * Operator routes (admin key): escrow creation, devshard registry and lifecycle, settings,
 * finalize. Response bodies the spec leaves open are documented in the README.
 */
import { doc } from '../openapi.js';
import { isPrivateKeyHex, PRIVATE_KEY_RULE } from '../../chain/private-key.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { EventMetadata } from '../../events/envelope.js';
import type { GatewayContext } from '../../gateway/context.js';
import { chainApiError } from '../../gateway/escrows/chain-errors.js';
import { createEscrow } from '../../gateway/escrows/create.js';
import {
  deactivateEscrow,
  devshardView,
  escrowOr404,
  finalizeEscrow,
  registerEscrow,
  removeEscrow,
  settleEscrow,
} from '../../gateway/escrows/lifecycle.js';
import { activateEscrow, exportEscrow, importEscrow, type ImportBody } from '../../gateway/escrows/transfer.js';
import { changeSettings, toPatch } from '../../gateway/settings.js';
import { escrowStream } from '../../events/catalog.js';
import { readEscrowTimeline } from '../../projections/timeline.js';
import type { Authenticator } from '../auth.js';
import { errors, sendEmptyNotFound } from '../errors.js';
import {
  createEscrowBodySchema,
  escrowIdParamsSchema,
  parseAmount,
  parseEscrowId,
  registerBodySchema,
  settingsBodySchema,
  settleBodySchema,
  type CreateEscrowBody,
  type SettingsBody,
} from '../schemas/admin.js';
import { IMPORT_BODY_LIMIT, importBodySchema } from '../schemas/import.js';

type IdParams = { id: string };

const meta = (request: FastifyRequest): EventMetadata => ({ actor: { kind: 'admin' }, requestId: request.id, correlationId: request.id });

export function registerAdminRoutes(app: FastifyInstance, ctx: GatewayContext, auth: Authenticator): void {
  const admin = { onRequest: auth.requireAdmin, config: { auth: 'admin' as const } };
  const perEscrow = <T>(id: string, f: () => Promise<T>) => ctx.engine.serial(escrowStream(id), f);

  app.post('/v1/admin/escrows', { ...admin, schema: doc({ body: createEscrowBodySchema, summary: 'Create an escrow on chain (and register it)' }) }, async (request, reply) => {
    const body = request.body as CreateEscrowBody;
    const amount = parseAmount(body.amount);
    // The schema checks the 64-hex shape; a zero key or one at/above the curve order passes it and
    // used to throw in key derivation (a 500). The message never contains the key.
    if (!isPrivateKeyHex(body.private_key)) throw errors.badRequest(`Invalid value for 'private_key': ${PRIVATE_KEY_RULE}.`, 'private_key');
    const chainId = body.chain_id ?? ctx.config.chain.chainId;
    if (chainId !== ctx.config.chain.chainId) {
      throw errors.badRequest(`chain_id '${chainId.slice(0, 128)}' is not this gateway's chain ('${ctx.config.chain.chainId}').`, 'chain_id', 'wrong_chain_id');
    }
    // The chain's rules (allowlist, amount range, balance) are pre-checked by the use case.
    const register = body.register === true;
    const r = await createEscrow(ctx, {
      privateKeyHex: body.private_key,
      keySource: { kind: 'request' },
      amount,
      model: body.model_id,
      role: 'regular',
      register,
      origin: 'admin',
      metadata: meta(request),
    });
    if (r.ok) {
      request.logFields.escrow_id = r.escrowId;
      return {
        escrow_id: r.escrowId,
        tx_hash: r.txHash,
        height: r.height,
        creator: r.creator,
        epoch_index: r.epoch,
        model_id: r.escrow.modelId,
        amount: r.escrow.amount.toString(),
        registered: register,
        state: register ? 'active' : 'created',
        slots: r.escrow.slots.map((s) => ({ slot_id: s.slotId, host: s.host, url: s.url })),
      };
    }
    if (r.pending) {
      return reply.code(202).send({ status: 'pending', intent_id: r.intentId, tx_hash: r.txHash, message: 'The chain did not confirm the transaction yet; it is reconciled by hash.' });
    }
    throw chainApiError(r.error, 'Escrow creation');
  });

  app.get('/v1/admin/devshards', { ...admin, schema: doc({ summary: 'List registered devshards' }) }, async () => ({
    object: 'list',
    data: ctx.projections.pool
      .all()
      .filter((e) => e.state !== 'removed')
      .map((e) => devshardView(ctx, e.escrowId)),
  }));

  app.post('/v1/admin/devshards', { ...admin, schema: doc({ body: registerBodySchema, summary: 'Register an on-chain escrow for routing' }) }, async (request) => {
    const body = request.body as { escrow_id: string | number; model_id?: string };
    const id = parseEscrowId(body.escrow_id);
    return perEscrow(id, () => registerEscrow(ctx, id, meta(request), body.model_id));
  });

  const importDoc = doc({ body: importBodySchema, summary: 'Import an escrow exported by another gateway (inactive)' });
  app.post('/v1/admin/devshards/import', { ...admin, bodyLimit: IMPORT_BODY_LIMIT, schema: importDoc }, async (request) => {
    const body = request.body as ImportBody;
    const id = parseEscrowId(body.escrow.escrow_id, 'escrow.escrow_id');
    return perEscrow(id, () => importEscrow(ctx, id, body, meta(request)));
  });

  app.get('/v1/admin/devshards/:id', { ...admin, schema: doc({ params: escrowIdParamsSchema }) }, async (request) => {
    const { id } = request.params as IdParams;
    escrowOr404(ctx, id);
    return devshardView(ctx, id);
  });

  app.get('/v1/admin/devshards/:id/export', { ...admin, schema: doc({ params: escrowIdParamsSchema, summary: 'Export an escrow for import elsewhere' }) }, async (request) => {
    const { id } = request.params as IdParams;
    return exportEscrow(ctx, id);
  });

  app.get('/v1/admin/devshards/:id/timeline', { ...admin, schema: doc({ params: escrowIdParamsSchema, summary: "An escrow's timeline from the log" }) }, async (request) => {
    const { id } = request.params as IdParams;
    escrowOr404(ctx, id);
    return { escrow_id: id, ...(await readEscrowTimeline((stream, from, limit) => ctx.engine.store.readStream(stream, from, limit), id)) };
  });

  app.post('/v1/admin/devshards/:id/activate', { ...admin, schema: doc({ params: escrowIdParamsSchema, summary: 'Activate an imported or deactivated devshard' }) }, async (request) => {
    const { id } = request.params as IdParams;
    return perEscrow(id, () => activateEscrow(ctx, id, meta(request)));
  });

  app.post('/v1/admin/devshards/:id/settle', { ...admin, schema: doc({ params: escrowIdParamsSchema, body: settleBodySchema, summary: 'Settle a finalized devshard on chain' }) }, async (request, reply) => {
    const { id } = request.params as IdParams;
    const name = (request.body as { private_key_env?: string } | null | undefined)?.private_key_env ?? 'DEVSHARD_PRIVATE_KEY';
    const answer = await perEscrow(id, () => settleEscrow(ctx, id, { keySource: { kind: 'env', name }, origin: 'admin', metadata: meta(request) }));
    return reply.code(answer.status === 'settled' ? 200 : 202).send(answer);
  });

  app.post('/v1/admin/devshards/:id/deactivate', { ...admin, schema: doc({ params: escrowIdParamsSchema, summary: 'Stop routing new chat to a devshard' }) }, async (request) => {
    const { id } = request.params as IdParams;
    return perEscrow(id, () => deactivateEscrow(ctx, id, meta(request)));
  });

  app.delete('/v1/admin/devshards/:id', { ...admin, schema: doc({ params: escrowIdParamsSchema, summary: 'Remove a settled devshard from the gateway' }) }, async (request) => {
    const { id } = request.params as IdParams;
    return perEscrow(id, () => removeEscrow(ctx, id, meta(request)));
  });

  // The spec's empty-id case answers 404 with no body (a route of its own: the router would
  // otherwise hand '' to the :id route, whose schema would answer 400).
  app.post('/devshard//v1/finalize', { ...admin, schema: doc({ hide: true }) as object }, async (_request, reply) => sendEmptyNotFound(reply));

  app.post('/devshard/:id/v1/finalize', { ...admin, schema: doc({ params: escrowIdParamsSchema, summary: 'Finalize a devshard: settlement data' }) }, async (request) => {
    const { id } = request.params as IdParams;
    return perEscrow(id, () => finalizeEscrow(ctx, id, meta(request)));
  });

  app.post('/v1/finalize', { ...admin, schema: doc({ summary: 'Finalize the only configured devshard' }) }, async (request) => {
    const live = ctx.projections.pool.all().filter((e) => e.state !== 'removed');
    if (live.length !== 1) {
      throw errors.conflict(`POST /v1/finalize works only with exactly one configured devshard (this gateway has ${live.length}); use POST /devshard/{id}/v1/finalize.`, 'not_single_escrow');
    }
    const id = live[0]!.escrowId;
    return perEscrow(id, () => finalizeEscrow(ctx, id, meta(request)));
  });

  app.get('/v1/admin/settings', { ...admin, schema: doc({ summary: 'Effective gateway settings' }) }, async () => ctx.projections.settings.effective());

  app.post('/v1/admin/settings', { ...admin, schema: doc({ body: settingsBodySchema, summary: 'Change gateway settings (partial merge)' }) }, async (request) => {
    const effective = await changeSettings(ctx, toPatch((request.body ?? {}) as SettingsBody), meta(request));
    ctx.onSettingsChanged?.();
    return effective;
  });
}
