/**
 * Moving an escrow between gateways (the spec's hot-swap procedure). Export answers the escrow's
 * state, its whole stream as stored (with hashes) and where it came from; import takes exactly that
 * document, reads the stream as evidence (exported-stream.ts) and records one EscrowImported
 * (inactive) from the chain's facts plus the stream's nonce, spend and per-slot tally; the operator
 * then registers or activates it. Export changes nothing: take it once the source's
 * active_requests is 0, and stop (or deactivate) the source before activating the import.
 */
import { escrowStream, newEvent, type SlotInfo } from '../../events/catalog.js';
import type { EventMetadata } from '../../events/envelope.js';
import { refuse } from '../errors.js';
import { stateName } from '../../machines/index.js';
import type { GatewayContext } from '../context.js';
import { chainRefusal } from './chain-errors.js';
import { readExportedStream, toExportedEvent, type ExportedEvent } from './exported-stream.js';
import { decided, devshardView, escrowOr404 } from './lifecycle.js';

export function exportEscrow(ctx: GatewayContext, escrowId: string) {
  escrowOr404(ctx, escrowId);
  return {
    escrow: { ...devshardView(ctx, escrowId), active: false as const },
    events: ctx.engine.store.readStream(escrowStream(escrowId)).map(toExportedEvent),
    exported_at: new Date().toISOString(),
    source: ctx.config.server.instanceName,
  };
}

/** What export answers (the HTTP schema, src/http/schemas/import.ts, has checked its shape). */
export interface ImportBody {
  escrow: { escrow_id: string | number; model_id?: string | null; nonce?: number; spent?: string; [k: string]: unknown };
  events: ExportedEvent[];
  exported_at?: string;
  source?: string;
}

/** Source states in which a settle is under way or done: the escrow cannot move any more. */
const SETTLING = new Set(['settleDeferred', 'settling', 'settled', 'removed']);

/** Imports `body` as escrow `escrowId` (body.escrow.escrow_id in canonical form). */
export async function importEscrow(ctx: GatewayContext, escrowId: string, body: ImportBody, metadata: EventMetadata) {
  const known = ctx.engine.escrow(escrowId);
  if (known) throw refuse.conflict(`Devshard ${escrowId} is already known here (state ${stateName(known.value)}).`, 'already_registered');
  const { snapshot, hostStats } = readExportedStream(escrowId, body.events);
  const c = snapshot.context;
  if (c.escrowId !== escrowId) throw refuse.invalid(`events[0].data.escrowId '${c.escrowId}' is not escrow.escrow_id '${escrowId}'.`, 'events[0].data.escrowId');
  for (const [member, given, folded] of [['nonce', body.escrow.nonce, c.nonce], ['spent', body.escrow.spent, c.spent]] as const) {
    // They differ when the document was edited, or exported while requests were being recorded.
    if (given !== undefined && given !== folded) {
      throw refuse.invalid(`escrow.${member} ${given} differs from the events' ${folded}; export again once the source's active_requests is 0.`, `escrow.${member}`);
    }
  }
  const state = stateName(snapshot.value);
  if (SETTLING.has(state)) throw refuse.conflict(`Devshard ${escrowId} is ${state} at the source; finish its settlement there.`, 'settle_under_way');
  // What those requests cost is not in the export: importing now would let it be spent twice.
  if (c.inFlight > 0) {
    throw refuse.conflict(`${c.inFlight} request(s) were in flight on devshard ${escrowId} when it was exported; wait until the source's active_requests is 0 and export again.`, 'requests_in_flight');
  }
  const onChain = await ctx.chain.escrow(escrowId).catch((err) => {
    throw chainRefusal(err, 'Reading the escrow');
  });
  if (!onChain) throw refuse.notFound(`Escrow ${escrowId} does not exist on chain.`, 'escrow_not_found');
  if (onChain.settled) throw refuse.conflict(`Escrow ${escrowId} is already settled on chain; there is nothing to import.`, 'already_settled');
  if (body.escrow.model_id != null && body.escrow.model_id !== onChain.modelId) {
    throw refuse.invalid(`escrow.model_id '${body.escrow.model_id}' differs from the chain's '${onChain.modelId}'.`, 'escrow.model_id');
  }
  for (const [member, folded, chain] of [['model', c.model, onChain.modelId], ['creator', c.creator, onChain.creator], ['amount', c.deposit, onChain.amount.toString()]] as const) {
    if (folded !== chain) throw refuse.invalid(`The events' ${member} '${folded}' differs from the chain's '${chain}'.`, `events[0].data.${member}`);
  }
  const slots: SlotInfo[] = onChain.slots.map((s) => ({ slotId: s.slotId, host: s.host, url: s.url }));
  const last = body.events.at(-1)!;
  const provenance = { source: body.source, exportedAt: body.exported_at, lastPosition: last.position, lastHash: last.hash };
  await decided(() =>
    ctx.engine.decideEscrow('escrow', escrowId, [
      newEvent(
        'EscrowImported',
        {
          escrowId,
          model: onChain.modelId,
          creator: onChain.creator,
          amount: onChain.amount.toString(),
          epoch: onChain.epochIndex,
          role: c.role,
          // Nonces the source reserved may have been used there without a recorded start: continue past them.
          nonce: Math.max(c.nonce, c.nonceReserved ?? 0),
          spent: c.spent,
          slots,
          active: false,
          hostStats,
          provenance,
        },
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
    throw refuse.invalid(`This gateway does not hold the key of creator ${s.context.creator}; set DEVSHARD_PRIVATE_KEY to it first.`, null, 'creator_key_unavailable');
  }
  await decided(() => ctx.engine.decideEscrow('escrow', escrowId, [newEvent('EscrowActivated', { escrowId }, metadata)]));
  return devshardView(ctx, escrowId);
}
