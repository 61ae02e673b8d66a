/**
 * Migration from devshardctl: adopt a live escrow devshardctl served, from its escrow state store
 * (devshardctl-store.ts). Its diffs are replayed through the pure protocol replica against the
 * chain's facts for the escrow (devshard-session-import.ts: each user signature recovered to the
 * creator, each post_state_root compared), so the state adopted is the one the hosts signed: the
 * balance, the fees, the per-slot cost and the last nonce. The diffs are recorded as this
 * gateway's own DevshardDiffSent events (the session continues from devshardctl's last nonce), then
 * one EscrowImported records the escrow (inactive unless `active: true`), with what was adopted;
 * the next request uses the next nonce. Never a private key in an answer or an event.
 */
import { newEvent, type SlotInfo, type SlotTally } from '../../events/catalog.js';
import type { EventMetadata } from '../../events/envelope.js';
import { toHex } from '../../protocol/bytes.js';
import { InferenceStatus } from '../../protocol/inference-record.js';
import { Phase } from '../../protocol/hashes.js';
import { boundSessionEscrow, recordImportedSession, replayAgainstFacts } from '../session/import.js';
import { parseProtocolVersion } from '../../protocol/versions.js';
import { chooseEscrowProtocol, protocolChoiceOf, protocolData } from '../escrows/protocol.js';
import { holdRequestKey } from '../escrows/operator-key.js';
import { stateName } from '../../machines/index.js';
import type { GatewayContext } from '../context.js';
import { clip, refuse } from '../errors.js';
import { chainRefusal } from '../escrows/chain-errors.js';
import { readDevshardctlStore } from './store.js';
import { activateEscrow, importedFromChain } from '../escrows/transfer.js';
import { decided } from '../escrows/decide.js';
import { devshardView, type DevshardView } from '../escrows/view.js';

/** devshardctl's import body (gateway.go adminImportDevshardRequest). */
export interface DevshardctlImportBody {
  id: string | number;
  storage_path: string;
  private_key_env?: string;
  private_key?: string;
  model?: string;
  protocol_version?: string;
  route_prefix?: string;
  state_root_version?: string;
  active?: boolean;
  perf_path?: string;
}

/** devshardctl's import answer (gateway.go handleAdminImportDevshard), what was adopted, and our view. */
export interface DevshardctlImportAnswer extends DevshardView {
  id: string;
  active: boolean;
  model: string;
  storage_path: string;
  perf_path: string;
  accounting_records_imported: number;
  accounting_attempts_imported: number;
  adopted: {
    diffs: number;
    last_nonce: number;
    next_nonce: number;
    state_root: string;
    balance: string;
    fees: string;
    protocol_version: string;
    state_root_version: string;
    route_prefix: string;
    open_inferences: number;
  };
}

export async function importFromDevshardctl(ctx: GatewayContext, escrowId: string, body: DevshardctlImportBody, metadata: EventMetadata): Promise<DevshardctlImportAnswer> {
  const known = ctx.engine.escrow(escrowId);
  if (known) throw refuse.conflict(`Devshard ${escrowId} is already known here (state ${stateName(known.value)}).`, 'already_registered');
  if (body.private_key === undefined && body.private_key_env === undefined) {
    throw refuse.invalid('private_key or private_key_env is required for import: this gateway must hold the creator key to serve and settle the escrow.', 'private_key_env', 'creator_key_required');
  }
  if (body.private_key !== undefined && body.private_key_env !== undefined) throw refuse.invalid('Give either private_key or private_key_env, not both.', 'private_key_env', 'ambiguous_key');

  const store = readDevshardctlStore(body.storage_path, escrowId, ctx.config.server.importDir);
  const { session } = store;
  if (session.status !== 'active') {
    throw refuse.conflict(`devshardctl's session for escrow ${escrowId} is ${clip(session.status)}; only an active session can be adopted (finish its settlement with devshardctl).`, 'settle_under_way');
  }

  const onChain = await ctx.chain.escrow(escrowId).catch((err) => {
    throw chainRefusal(err, 'Reading the escrow');
  });
  if (!onChain) throw refuse.notFound(`Escrow ${escrowId} does not exist on chain.`, 'escrow_not_found');
  if (onChain.settled) throw refuse.conflict(`Escrow ${escrowId} is already settled on chain; there is nothing to import.`, 'already_settled');
  if (body.model !== undefined && body.model !== onChain.modelId) {
    throw refuse.invalid(`model '${clip(body.model)}' differs from the chain's '${onChain.modelId}' for escrow ${escrowId}.`, 'model', 'model_mismatch');
  }
  const slots = onChain.slots.map((s) => s.host);
  const checks: [string, string, string][] = [
    ['creator', session.creator, onChain.creator],
    ['initial_balance (the deposit)', session.initialBalance.toString(), onChain.amount.toString()],
    ['group (slot addresses)', session.group.join(','), slots.join(',')],
  ];
  for (const [what, stored, chain] of checks) {
    if (stored !== chain) throw refuse.invalid(`The store's ${what} for escrow ${escrowId} differs from the chain's (${clip(stored, 120)} vs ${clip(chain, 120)}): it is another escrow's store.`, 'storage_path', 'escrow_id_mismatch');
  }

  // The creator key: checked against the chain's creator, then held, before anything is recorded
  // (a request's key is held only once it is the creator's: holdRequestKey).
  if (body.private_key !== undefined) await holdRequestKey(ctx, body.private_key, escrowId, onChain.creator, 'wrong_creator_key');
  const address = body.private_key !== undefined ? onChain.creator : (await ctx.keyring.fromEnv(body.private_key_env!))?.address;
  if (address === undefined) throw refuse.invalid(`private_key_env: environment variable ${body.private_key_env} is unset or not a 64-hex key.`, 'private_key_env', 'creator_key_unavailable');
  if (address !== onChain.creator) {
    throw refuse.invalid(`The key given is for ${address}, not escrow ${escrowId}'s creator ${onChain.creator}.`, body.private_key !== undefined ? 'private_key' : 'private_key_env', 'wrong_creator_key');
  }

  // The protocol: the body's, else the store's session version (devshardctl binds each session to
  // its version), else the gateway's settings and the chain's approved versions.
  const params = await ctx.chain.params().catch((err) => {
    throw chainRefusal(err, 'Reading the chain params');
  });
  const choice = protocolChoiceOf(body);
  if (choice.version === undefined && choice.route === undefined && session.version) {
    try {
      choice.version = parseProtocolVersion(session.version);
    } catch {
      // Not a version name we read: the settings decide.
    }
  }
  const protocol = chooseEscrowProtocol(ctx, choice, params.approvedVersions);
  const protocolVersion = protocol.tag;
  const slotInfo: SlotInfo[] = onChain.slots.map((s) => ({ slotId: s.slotId, host: s.host, url: s.url }));
  // Replayed against the chain's facts, the ones our session binds (and the hosts bound): what is
  // recorded below is then exactly what the session rebuilds when the escrow is first used here.
  const facts = await boundSessionEscrow(ctx, escrowId, { creator: onChain.creator, amount: onChain.amount, slots: slotInfo }, onChain, protocol).catch((err) => {
    throw chainRefusal(err, 'Reading the chain params');
  });
  const { replica, diffs } = replayAgainstFacts(
    facts,
    store.diffs,
    {
      whose: "devshardctl's",
      param: () => 'protocol_version',
      hint: `The store does not rebuild the state the hosts signed (a different protocol version or state-root tag, now ${protocol.version} with the tag '${clip(protocolVersion, 64)}': set protocol_version / state_root_version; a session config other than the chain's; or a corrupt store).`,
    },
  );
  if (replica.phase !== Phase.Active) {
    throw refuse.conflict(`Escrow ${escrowId} was finalized by devshardctl (its last diff leaves it in phase ${Phase[replica.phase]}); settle it with devshardctl.`, 'settle_under_way');
  }
  // Started but not finished in any diff: a request's finish rides on a later diff, so the last
  // requests devshardctl served are open here. Their worst-case cost stays reserved in the balance
  // (as the hosts signed it) until a finish or timeout for them is applied.
  const open = replica.liveRecords().filter((r) => r.status === InferenceStatus.Pending || r.status === InferenceStatus.Started).length;

  const requests = new Map<number, number>();
  for (const d of store.diffs) {
    for (const t of d.txs) {
      if (t.tx.case === 'finishInference') requests.set(t.tx.value.executorSlot, (requests.get(t.tx.value.executorSlot) ?? 0) + 1);
    }
  }
  const hostStats: SlotTally[] = replica.hostStats().map((h) => ({ slotId: h.slotId, cost: h.cost.toString(), requests: requests.get(h.slotId) ?? 0 }));
  const lastNonce = Number(replica.latestNonce);
  const spent = (onChain.amount - replica.balance).toString();
  // The session's diffs first, as this gateway's own (with the warm-key bindings the replay made):
  // the first chat rebuilds the session from them and sends the hosts any they lack as catch-up.
  await recordImportedSession(ctx, facts, diffs, [], metadata);
  await decided(() =>
    ctx.engine.decideEscrow('escrow', escrowId, [
      newEvent(
        'EscrowImported',
        {
          ...importedFromChain(escrowId, onChain),
          role: 'regular',
          nonce: lastNonce,
          // Our balance is deposit − spent: the replica's balance exactly (costs, fees, seals).
          spent,
          slots: slotInfo,
          active: false,
          hostStats,
          protocol: protocolData(protocol),
          adopted: {
            from: 'devshardctl',
            storagePath: store.dir,
            diffs: store.diffs.length,
            lastNonce,
            stateRoot: toHex(replica.stateRoot()),
            balance: replica.balance.toString(),
            fees: replica.fees.toString(),
            protocolVersion,
            sessionStatus: session.status,
            openInferences: open,
          },
        },
        metadata,
      ),
    ]),
  );
  const view = body.active === true ? await activateEscrow(ctx, escrowId, metadata) : await devshardView(ctx, escrowId);
  return {
    // devshardctl's answer (gateway.go handleAdminImportDevshard).
    id: escrowId,
    active: view.state === 'active',
    model: onChain.modelId,
    storage_path: store.dir,
    perf_path: body.perf_path ?? '',
    accounting_records_imported: 0,
    accounting_attempts_imported: 0,
    // What was adopted, and our view.
    adopted: {
      diffs: store.diffs.length,
      last_nonce: lastNonce,
      next_nonce: lastNonce + 1,
      state_root: toHex(replica.stateRoot()),
      balance: replica.balance.toString(),
      fees: replica.fees.toString(),
      protocol_version: protocol.version,
      state_root_version: protocol.tag,
      route_prefix: protocol.route,
      open_inferences: open,
    },
    ...view,
  };
}
