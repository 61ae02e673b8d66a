/**
 * Moving an escrow between gateways (the spec's hot-swap procedure). Export answers the escrow's
 * state and its whole stream with hashes; import records EscrowImported (inactive) on the target
 * from the chain's facts plus the exported nonce and spend, and the operator then registers or
 * activates it. Export changes nothing: deactivate the source once its in-flight reaches zero.
 */
import { escrowStream, newEvent, type SlotInfo } from '../../events/catalog.js';
import type { EventMetadata } from '../../events/envelope.js';
import { errors } from '../../http/errors.js';
import { foldEscrow, stateName } from '../../machines/index.js';
import type { GatewayContext } from '../context.js';
import { chainApiError } from './chain-errors.js';
import { decided, devshardView, escrowOr404 } from './lifecycle.js';

export function exportEscrow(ctx: GatewayContext, escrowId: string) {
  escrowOr404(ctx, escrowId);
  const view = devshardView(ctx, escrowId);
  const events = ctx.engine.store.readStream(escrowStream(escrowId)).map((r) => ({
    position: r.position,
    stream_version: r.streamVersion,
    type: r.type,
    schema_version: r.schemaVersion,
    data: r.data,
    time: r.time,
    prev_hash: r.prevHash,
    hash: r.hash,
  }));
  return {
    escrow: { ...view, active: false as const },
    events,
    exported_at: new Date().toISOString(),
    source: ctx.config.server.instanceName,
  };
}

interface ImportBody {
  escrow: { escrow_id: string | number; model_id?: string; nonce?: number; spent?: string; role?: string; [k: string]: unknown };
  events?: { type: string; data: Record<string, unknown>; hash?: string; prev_hash?: string }[];
}

export async function importEscrow(ctx: GatewayContext, body: ImportBody, metadata: EventMetadata) {
  const escrowId = String(body.escrow.escrow_id);
  const known = ctx.engine.escrow(escrowId);
  if (known) throw errors.conflict(`Devshard ${escrowId} is already known here (state ${stateName(known.value)}).`, 'already_registered');
  const onChain = await ctx.chain.escrow(escrowId).catch((err) => {
    throw chainApiError(err, 'Reading the escrow');
  });
  if (!onChain) throw errors.notFound(`Escrow ${escrowId} does not exist on chain.`, 'escrow_not_found');
  if (onChain.settled) throw errors.conflict(`Escrow ${escrowId} is already settled on chain; there is nothing to import.`, 'already_settled');
  if (body.escrow.model_id !== undefined && body.escrow.model_id !== onChain.modelId) {
    throw errors.badRequest(`escrow.model_id '${body.escrow.model_id}' differs from the chain's '${onChain.modelId}'.`, 'escrow.model_id');
  }
  let nonce: number;
  let spent: string;
  if (body.events && body.events.length > 0) {
    // The exported stream is the evidence: its hashes must link, and its fold gives nonce and spend.
    for (let i = 1; i < body.events.length; i++) {
      const prev = body.events[i - 1]!.hash;
      const cur = body.events[i]!.prev_hash;
      if (prev !== undefined && cur !== undefined && prev !== cur) {
        throw errors.badRequest(`events[${i}].prev_hash does not match events[${i - 1}].hash: the exported stream was altered.`, `events[${i}].prev_hash`);
      }
    }
    const folded = foldEscrow(body.events.map((e) => ({ type: e.type, data: e.data })) as never);
    // Nonces the source reserved may have been used there without a recorded start: continue past them.
    nonce = Math.max(folded.context.nonce, folded.context.nonceReserved ?? 0);
    spent = folded.context.spent;
  } else {
    if (!Number.isSafeInteger(body.escrow.nonce) || (body.escrow.nonce as number) < 0) {
      throw errors.badRequest('escrow.nonce (the last used nonce) is required when no events are given.', 'escrow.nonce');
    }
    if (typeof body.escrow.spent !== 'string' || !/^[0-9]{1,40}$/.test(body.escrow.spent)) {
      throw errors.badRequest('escrow.spent (decimal string) is required when no events are given.', 'escrow.spent');
    }
    nonce = body.escrow.nonce as number;
    spent = body.escrow.spent;
  }
  if (BigInt(spent) > onChain.amount) throw errors.badRequest(`escrow.spent ${spent} exceeds the deposit ${onChain.amount}.`, 'escrow.spent');
  const slots: SlotInfo[] = onChain.slots.map((s) => ({ slotId: s.slotId, host: s.host, url: s.url }));
  const role = body.escrow.role === 'temporary' ? 'temporary' : 'regular';
  await decided(() =>
    ctx.engine.decideEscrow('escrow', escrowId, [
      newEvent(
        'EscrowImported',
        { escrowId, model: onChain.modelId, creator: onChain.creator, amount: onChain.amount.toString(), epoch: onChain.epochIndex, role, nonce, spent, slots, active: false },
        metadata,
      ),
    ]),
  );
  return devshardView(ctx, escrowId);
}

/** Makes an imported (or deactivated, unsettled) escrow routable again. */
export async function activateEscrow(ctx: GatewayContext, escrowId: string, metadata: EventMetadata) {
  const s = escrowOr404(ctx, escrowId);
  if (s.context.creator && !ctx.keyring.has(s.context.creator)) {
    throw errors.badRequest(`This gateway does not hold the key of creator ${s.context.creator}; set DEVSHARD_PRIVATE_KEY to it first.`, null, 'creator_key_unavailable');
  }
  await decided(() => ctx.engine.decideEscrow('escrow', escrowId, [newEvent('EscrowActivated', { escrowId }, metadata)]));
  return devshardView(ctx, escrowId);
}
