/**
 * Moving an escrow between gateways (the spec's hot-swap procedure). Export answers the escrow's
 * state, its whole stream as stored (with hashes), its devshard session (every diff sent and the
 * host txs not yet in a diff, as plain event data) and where it came from; import takes exactly
 * that document, reads the stream as evidence (exported-stream.ts), replays the session's diffs
 * against the chain's facts (devshard-session-import.ts: every signature and root, a 400 naming the
 * first nonce that does not replay), records them as its own session events, then one
 * EscrowImported (inactive) from the chain's facts plus the stream's spend and per-slot tally and
 * the last diff's nonce; the operator then registers or activates it, and the first chat there
 * sends the hosts the recorded diffs as catch-up (they skip what they hold). Export changes
 * nothing: take it once the source's active_requests is 0, and stop (or deactivate) the source
 * before activating the import.
 */
import { escrowStream, newEvent, type EventDataMap, type ProtocolData, type SlotInfo } from '../../events/catalog.js';
import { LEGACY_PROTOCOL, rulesOf } from '../../protocol/versions.js';
import { protocolData } from './protocol.js';
import type { EventMetadata } from '../../events/envelope.js';
import { refuse } from '../errors.js';
import { stateName } from '../../machines/index.js';
import type { GatewayContext } from '../context.js';
import { chainRefusal } from './chain-errors.js';
import { readExportedStream, toExportedEvent, type ExportedEvent } from './exported-stream.js';
import { decided, escrowOr404 } from './decide.js';
import { settleWindowClosed } from './pruned.js';
import { boundSessionEscrow, diffsOfData, exportedSession, hostTxsOfData, recordImportedSession, replayAgainstFacts } from '../session/import.js';
import { devshardView, type DevshardView } from './view.js';

/** What export answers (and import takes: ImportBody). */
export interface ExportDocument {
  escrow: DevshardView & { active: false };
  /** The escrow's stream as stored, with its hashes. */
  events: ExportedEvent[];
  devshard_session: { diffs: EventDataMap['DevshardDiffSent'][]; host_txs: EventDataMap['DevshardHostTxsReceived'][] };
  exported_at: string;
  /** The exporting gateway's instance name. */
  source: string;
}

export async function exportEscrow(ctx: GatewayContext, escrowId: string): Promise<ExportDocument> {
  escrowOr404(ctx, escrowId);
  return {
    escrow: { ...(await devshardView(ctx, escrowId)), active: false as const },
    events: (await ctx.engine.store.readStream(escrowStream(escrowId))).map(toExportedEvent),
    // The replica the hosts hold: without its diffs the importing gateway's session would start at nonce 0.
    devshard_session: await exportedSession(ctx, escrowId),
    exported_at: new Date().toISOString(),
    source: ctx.config.server.instanceName,
  };
}

/** What export answers (the HTTP schema, src/http/schemas/import.ts, has checked its shape). */
export interface ImportBody {
  escrow: { escrow_id: string | number; model_id?: string | null; nonce?: number; spent?: string; [k: string]: unknown };
  events: ExportedEvent[];
  /** The escrow's devshard session (exportedSession); absent in an export of a gateway before it. */
  devshard_session?: { diffs: EventDataMap['DevshardDiffSent'][]; host_txs?: EventDataMap['DevshardHostTxsReceived'][] };
  exported_at?: string;
  source?: string;
}

/** Source states in which a settle is under way or done: the escrow cannot move any more. */
const SETTLING = new Set(['settleDeferred', 'settling', 'settled', 'removed']);

/** Imports `body` as escrow `escrowId` (body.escrow.escrow_id in canonical form). */
export async function importEscrow(ctx: GatewayContext, escrowId: string, body: ImportBody, metadata: EventMetadata): Promise<DevshardView> {
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
  // The session the hosts hold: its diffs replayed against the chain's facts, the ones our session will bind.
  const sessionData = body.devshard_session ?? { diffs: [] };
  const diffs = diffsOfData(escrowId, sessionData.diffs, (i) => `devshard_session.diffs[${i}]`);
  const hostTxs = hostTxsOfData(escrowId, sessionData.host_txs ?? [], (i) => `devshard_session.host_txs[${i}]`);
  // Over the devshard protocol the hosts hold every diff from nonce 1 and take only the next one:
  // a used escrow imported without its diffs (an export made before it carried devshard_session,
  // or from a source in upstream mode) could never send another.
  const overProtocol = ctx.network.finalize !== undefined;
  if (overProtocol && diffs.length === 0 && c.nonce > 0) {
    throw refuse.invalid(
      `The export carries no devshard_session diffs, but devshard ${escrowId} used ${c.nonce} nonce(s) at the source; this gateway serves it over the devshard protocol, where the hosts would refuse every diff it sends. Export again from a source of this version (its export carries devshard_session), or finalize and settle the escrow at the source.`,
      'devshard_session',
      'devshard_session_missing',
    );
  }
  // The protocol the source's session speaks, from its first event (none recorded: v2, legacy route).
  const first = body.events[0]!;
  const brought = (first.data as { protocol?: ProtocolData }).protocol;
  const protocol = brought ? { ...brought } : LEGACY_PROTOCOL;
  try {
    rulesOf(protocol);
  } catch (err) {
    throw refuse.invalid(`events[0].data.protocol: ${(err as Error).message}; import it into a gateway that speaks ${protocol.version}.`, 'events[0].data.protocol', 'unsupported_protocol_version');
  }
  const facts = await boundSessionEscrow(ctx, escrowId, { creator: onChain.creator, amount: onChain.amount, slots }, onChain, protocol).catch((err) => {
    throw chainRefusal(err, 'Reading the chain params');
  });
  const replayed = replayAgainstFacts(facts, diffs, { whose: "The export's", param: (i) => `devshard_session.diffs[${i}]`, hint: 'Export again from the source gateway, unedited.' });
  const lastDiff = Number(replayed.replica.latestNonce);
  const last = body.events.at(-1)!;
  const provenance = { source: body.source, exportedAt: body.exported_at, lastPosition: last.position, lastHash: last.hash };
  // B's own session events first: a chat after activation rebuilds the session from them.
  await recordImportedSession(ctx, facts, replayed.diffs, hostTxs, metadata);
  await decided(() =>
    ctx.engine.decideEscrow('escrow', escrowId, [
      newEvent(
        'EscrowImported',
        {
          ...importedFromChain(escrowId, onChain),
          role: c.role,
          // Over the protocol the log knows which nonces left: the next one follows the last diff (a
          // nonce reserved or started at the source without a diff never reached a host). Without a
          // session: over the protocol an unused escrow (refused above otherwise), from nonce 1; in
          // upstream mode past every nonce the source reserved.
          nonce: diffs.length > 0 ? lastDiff : overProtocol ? 0 : Math.max(c.nonce, c.nonceReserved ?? 0),
          spent: c.spent,
          slots,
          active: false,
          hostStats,
          provenance,
          ...(brought ? { protocol: protocolData(protocol) } : {}),
        },
        metadata,
      ),
    ]),
  );
  return devshardView(ctx, escrowId);
}

/** What an EscrowImported takes from the chain's record of the escrow (as the target read it). */
export function importedFromChain(escrowId: string, onChain: { modelId: string; creator: string; amount: bigint; epochIndex: number }) {
  return { escrowId, model: onChain.modelId, creator: onChain.creator, amount: onChain.amount.toString(), epoch: onChain.epochIndex };
}

/** Makes an imported (or deactivated, unsettled) escrow routable again. */
export async function activateEscrow(ctx: GatewayContext, escrowId: string, metadata: EventMetadata): Promise<DevshardView> {
  const s = escrowOr404(ctx, escrowId);
  if (s.context.creator && !ctx.keyring.has(s.context.creator)) {
    throw refuse.invalid(`This gateway does not hold the key of creator ${s.context.creator}; set DEVSHARD_PRIVATE_KEY to it first.`, null, 'creator_key_unavailable');
  }
  // An escrow the chain pruned is gone (k/devshard_pruning.go): it could neither serve nor settle.
  const closed = await settleWindowClosed(ctx, escrowId);
  if (closed) throw refuse.conflict(`${closed.message} It cannot be activated; create a new escrow (POST /v1/admin/escrows).`, 'escrow_pruned');
  await decided(() => ctx.engine.decideEscrow('escrow', escrowId, [newEvent('EscrowActivated', { escrowId }, metadata)]));
  return devshardView(ctx, escrowId);
}
