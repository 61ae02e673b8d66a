/**
 * Operator routes (admin key): escrow creation, devshard registry and lifecycle, settings,
 * finalize. Response bodies the spec leaves open are documented in the README.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { EventMetadata } from '../../events/envelope.js';
import type { DevshardctlImportBody, GatewayPort, ImportBody } from '../../gateway/port.js';
import type { Authenticator } from '../auth.js';
import { protocolChoiceOf } from '../../gateway/escrows/protocol.js';
import { ApiError } from '../api-error.js';
import { sendEmptyNotFound } from '../errors.js';
import { doc } from '../openapi.js';
import {
  createEscrowBodySchema,
  escrowIdParamsSchema,
  parseAmount,
  parseEscrowId,
  registerBodySchema,
  settingsBodySchema,
  settleBodySchema,
  txOptionsOf,
  type CreateEscrowBody,
  type RegisterBody,
  type SettingsBody,
  type SettleBody,
} from '../schemas/admin.js';
import { IMPORT_BODY_LIMIT, importBodySchema } from '../schemas/import.js';
import { toPatch } from '../schemas/settings-patch.js';

type IdParams = { id: string };

const meta = (request: FastifyRequest): EventMetadata => ({ actor: { kind: 'admin' }, requestId: request.id, correlationId: request.id });

export function registerAdminRoutes(app: FastifyInstance, gateway: GatewayPort, auth: Authenticator): void {
  const admin = { onRequest: auth.requireAdmin, config: { auth: 'admin' as const } };

  app.post('/v1/admin/escrows', { ...admin, schema: doc({
        body: createEscrowBodySchema,
        summary: 'Create an escrow on chain (and register it)',
        answers: {
          ok: {
            200: { description: 'Created (and registered unless `register: false`)', body: 'EscrowCreated' },
            202: { description: 'Sent, not yet included: do not resend', body: 'EscrowCreatePending' },
          },
          errors: {
            400: 'Invalid body, or a pre-check before signing: `amount_out_of_range`, `insufficient_funds`, `wrong_chain_id`, `fee_denom_not_accepted`, `unsupported_protocol_version`, `version_not_approved`, key errors.',
            403: 'The creator is not on the chain\'s allowlist (`not_allowlisted`); nothing signed.',
            422: 'The chain refused the create tx (`epoch_limit`, ...).',
            502: 'The chain could not be reached or answered badly.',
            503: 'No hosts or chain data to create the escrow with right now.',
          },
        },
      }) }, async (request, reply) => {
    const body = request.body as CreateEscrowBody;
    // devshardctl's default (gateway.go handleAdminEscrows): register unless told not to.
    const register = body.register !== false;
    const { chainId, ...fee } = txOptionsOf(body);
    const r = await gateway.createEscrow({
      privateKey: body.private_key,
      keyEnv: body.private_key_env,
      amount: parseAmount(body.amount),
      model: body.model_id,
      chainId,
      fee,
      register,
      protocol: protocolChoiceOf(body),
      metadata: meta(request),
    });
    if (r.ok) {
      request.logFields.escrow_id = r.escrowId;
      return {
        // devshardctl's fields: escrow_id a number, id its decimal string, model, storage_path.
        escrow_id: Number(r.escrowId),
        tx_hash: r.txHash,
        creator: r.creator,
        registered: register,
        id: r.escrowId,
        model: r.escrow.modelId,
        storage_path: r.storagePath,
        // Ours.
        height: r.height,
        epoch_index: r.epoch,
        model_id: r.escrow.modelId,
        amount: r.escrow.amount.toString(),
        state: register ? 'active' : 'created',
        slots: r.escrow.slots.map((s) => ({ slot_id: s.slotId, host: s.host, url: s.url })),
      };
    }
    // devshardctl answers 502 when inclusion takes longer than it waits, although the tx may still
    // land: a script that retries then creates a second escrow and locks a second deposit.
    return reply.code(202).send({
      status: 'pending',
      intent_id: r.intentId,
      tx_hash: r.txHash ?? null,
      escrow_id: null,
      registered: false,
      message:
        'The chain has not included the create transaction yet; this gateway follows it by its hash and records the escrow (and registers it, if asked) once it lands. Do not send the create again: that would lock a second deposit. Watch GET /v1/admin/devshards.',
    });
  });

  app.get('/v1/admin/devshards', { ...admin, schema: doc({ summary: 'List registered devshards', answers: { ok: { 200: { description: "devshardctl's admin state beside our views", body: 'DevshardList' } } } }) }, async () => gateway.devshardList());

  app.post('/v1/admin/devshards', { ...admin, schema: doc({
        body: registerBodySchema,
        summary: 'Register an on-chain escrow for routing, or re-activate a deactivated one',
        answers: {
          ok: { 200: { description: 'Registered (or re-activated)', body: 'DevshardRegistered' } },
          errors: {
            400: 'Invalid body, `model_mismatch`, `protocol_version_fixed`, key errors (`ambiguous_key`, `wrong_creator_key`).',
            404: 'The escrow does not exist on chain (`escrow_not_found`).',
            409: 'Already active (`already_active`), already known (`already_registered`) or settled (`already_settled`).',
            502: 'The chain could not be reached or answered badly.',
          },
        },
      }) }, async (request) => {
    const body = request.body as RegisterBody;
    const id = body.escrow_id !== undefined ? parseEscrowId(body.escrow_id) : parseEscrowId(body.id, 'id');
    if (body.escrow_id !== undefined && body.id !== undefined && parseEscrowId(body.id, 'id') !== id) {
      throw new ApiError(400, "Invalid value for 'id': it differs from escrow_id; give one of them.", { param: 'id', code: 'invalid_value' });
    }
    const view = await gateway.registerEscrow(id, meta(request), body.model_id ?? body.model, { privateKey: body.private_key, keyEnv: body.private_key_env }, protocolChoiceOf(body));
    // devshardctl's {id, active, model, storage_path} (gateway.go handleAdminAddDevshard) beside our view.
    return { id, active: view.state === 'active', model: view.model_id, storage_path: gateway.storagePath(), ...view };
  });

  const importDoc = doc({
    body: importBodySchema,
    summary: 'Import an escrow exported by another gateway (inactive)',
    answers: {
      ok: { 200: { description: 'Imported (inactive until activated)', body: 'DevshardImported' } },
      errors: {
        400: "Invalid body, a stream that does not check out, or devshardctl's store refusals (`store_not_found`, `nonce_gap`, `replay_diverged`, ...).",
        404: 'The escrow does not exist on chain (`escrow_not_found`).',
        409: 'Already registered here (`already_registered`), settle under way or already settled.',
        413: 'Body over the route\'s limit (64 MiB, `request_too_large`).',
        502: 'The chain could not be reached or answered badly.',
      },
    },
  });
  app.post('/v1/admin/devshards/import', { ...admin, bodyLimit: IMPORT_BODY_LIMIT, schema: importDoc }, async (request) => {
    if (typeof (request.body as { storage_path?: unknown }).storage_path === 'string') {
      // devshardctl's import body: adopt the escrow from its state store (migration).
      const body = request.body as DevshardctlImportBody;
      return gateway.importFromDevshardctl(parseEscrowId(body.id, 'id'), body, meta(request));
    }
    const body = request.body as ImportBody;
    const id = parseEscrowId(body.escrow.escrow_id, 'escrow.escrow_id');
    return gateway.importEscrow(id, body, meta(request));
  });

  app.get('/v1/admin/devshards/:id', { ...admin, schema: doc({ params: escrowIdParamsSchema, summary: 'One devshard', answers: { ok: { 200: { description: 'The devshard view', body: 'DevshardView' } } } }) }, async (request) => {
    const { id } = request.params as IdParams;
    return gateway.devshard(id);
  });

  app.get('/v1/admin/devshards/:id/export', { ...admin, schema: doc({ params: escrowIdParamsSchema, summary: 'Export an escrow for import elsewhere', answers: { ok: { 200: { description: 'The export (what import takes back)', body: 'ExportedEscrow' } } } }) }, async (request) => {
    const { id } = request.params as IdParams;
    return gateway.exportEscrow(id);
  });

  app.get('/v1/admin/devshards/:id/timeline', { ...admin, schema: doc({ params: escrowIdParamsSchema, summary: "An escrow's timeline from the log", answers: { ok: { 200: { description: 'The timeline', body: 'Timeline' } } } }) }, async (request) => {
    const { id } = request.params as IdParams;
    return gateway.timeline(id);
  });

  app.post('/v1/admin/devshards/:id/activate', { ...admin, schema: doc({ params: escrowIdParamsSchema, summary: 'Activate an imported or deactivated devshard', answers: { ok: { 200: { description: 'The devshard view', body: 'DevshardView' } }, errors: { 400: 'This gateway does not hold the creator\'s key (`creator_key_unavailable`).', 409: 'Pruned by the chain (`escrow_pruned`) or not in a state that can be activated (`invalid_state`).', 502: 'The chain could not be reached or answered badly.' } } }) }, async (request) => {
    const { id } = request.params as IdParams;
    return gateway.activateEscrow(id, meta(request));
  });

  app.post('/v1/admin/devshards/:id/settle', { ...admin, schema: doc({
        params: escrowIdParamsSchema,
        body: settleBodySchema,
        summary: 'Settle a finalized devshard on chain',
        answers: {
          ok: {
            200: { description: 'Settled on chain', body: 'SettleAnswer' },
            202: { description: 'Deferred until requests in flight end, or sent and waiting for inclusion', body: 'SettleAnswer' },
          },
          errors: {
            400: 'Invalid body, key errors (`ambiguous_key`, `wrong_settler`), `wrong_chain_id`, `insufficient_funds`.',
            409: 'Requests in flight on a devshard not yet finalized (`devshard_busy`), or a state that cannot be settled.',
            422: 'The chain refused the settle tx.',
            502: 'The hosts did not sign the settlement, or the chain could not be reached.',
          },
        },
      }) }, async (request, reply) => {
    const { id } = request.params as IdParams;
    const body = (request.body ?? {}) as SettleBody;
    const answer = await gateway.settleEscrow(id, { privateKey: body.private_key, keyEnv: body.private_key_env }, meta(request), txOptionsOf(body));
    // 202 while the settle waits for requests in flight (the drain reactor sends it) or for inclusion.
    return reply.code(answer.status === 'settled' ? 200 : 202).send(answer);
  });

  app.post('/v1/admin/devshards/:id/deactivate', { ...admin, schema: doc({ params: escrowIdParamsSchema, summary: 'Stop routing new chat to a devshard', answers: { ok: { 200: { description: 'The devshard view', body: 'DevshardView' } }, errors: { 409: 'Not in a state that can be deactivated.' } } }) }, async (request) => {
    const { id } = request.params as IdParams;
    return gateway.deactivateEscrow(id, meta(request));
  });

  app.delete('/v1/admin/devshards/:id', { ...admin, schema: doc({ params: escrowIdParamsSchema, summary: 'Remove a settled devshard from the gateway', answers: { ok: { 200: { description: 'Removed', body: 'DevshardRemoved' } }, errors: { 409: 'Not settled yet (`not_settled`): settle it first.' } } }) }, async (request) => {
    const { id } = request.params as IdParams;
    return gateway.removeEscrow(id, meta(request));
  });

  // The spec's empty-id case answers 404 with no body (a route of its own: the router would
  // otherwise hand '' to the :id route, whose schema would answer 400).
  app.post('/devshard//v1/finalize', { ...admin, schema: doc({ hide: true }) as object }, async (_request, reply) => sendEmptyNotFound(reply));

  app.post('/devshard/:id/v1/finalize', { ...admin, schema: doc({ params: escrowIdParamsSchema, summary: 'Finalize a devshard: settlement data', answers: { ok: { 200: { description: 'The settlement file', body: 'SettlementDocument' } }, errors: { 409: 'The devshard can no longer be finalized (`invalid_state`).', 502: 'The hosts did not sign the settlement, or finalizing over the protocol failed.' } } }) }, async (request) => {
    const { id } = request.params as IdParams;
    return gateway.finalizeEscrow(id, meta(request));
  });

  app.get('/devshard/:id/v1/finalize', { ...admin, schema: doc({ params: escrowIdParamsSchema, summary: "A finalized devshard's settlement data (409 before finalize)", answers: { ok: { 200: { description: 'The settlement file', body: 'SettlementDocument' } }, errors: { 409: 'Not finalized yet (`not_finalized`).' } } }) }, async (request) => {
    const { id } = request.params as IdParams;
    return gateway.finalizedEscrow(id);
  });

  app.post('/v1/finalize', { ...admin, schema: doc({ summary: 'Finalize the only configured devshard', answers: { ok: { 200: { description: 'The settlement file', body: 'SettlementDocument' } }, errors: { 400: 'Other than exactly one devshard (`not_single_escrow`), or invalid JSON.', 409: 'The devshard can no longer be finalized (`invalid_state`).', 502: 'The hosts did not sign the settlement, or finalizing over the protocol failed.' } } }) }, async (request) => gateway.finalizeOnlyEscrow(meta(request)));

  app.get('/v1/finalize', { ...admin, schema: doc({ summary: "The only configured devshard's settlement data (409 before finalize)", answers: { ok: { 200: { description: 'The settlement file', body: 'SettlementDocument' } }, errors: { 400: 'Other than exactly one devshard (`not_single_escrow`).', 409: 'Not finalized yet (`not_finalized`).' } } }) }, async () => gateway.finalizedOnlyEscrow());

  app.get('/v1/admin/settings', { ...admin, schema: doc({ summary: 'Effective gateway settings', answers: { ok: { 200: { description: 'The effective settings', body: 'Settings' } } } }) }, async () => gateway.settings());

  app.post('/v1/admin/settings', { ...admin, schema: doc({ body: settingsBodySchema, summary: 'Change gateway settings (partial merge)', answers: { ok: { 200: { description: 'The effective settings after the change', body: 'Settings' } }, errors: { 400: 'Invalid body, an unknown member, or a member refused by its rule (e.g. the kill switch without `new_url`, an unknown model, a bad rotation key).' } } }) }, async (request) =>
    gateway.changeSettings(toPatch((request.body ?? {}) as SettingsBody), meta(request)),
  );
}
