/**
 * POST /v1/admin/devshards: an escrow that exists on chain becomes one this gateway routes to
 * (registered), or a deactivated one here is routable again (re-activated).
 */
import { versionRefusal } from '../../chain/prechecks.js';
import { newEvent, type SlotInfo } from '../../events/catalog.js';
import type { EventMetadata } from '../../events/envelope.js';
import { stateName } from '../../machines/index.js';
import type { ProtocolChoice } from '../../protocol/versions.js';
import type { GatewayContext } from '../context.js';
import { clip, refuse } from '../errors.js';
import { chainRefusal } from './chain-errors.js';
import { decided } from './decide.js';
import { holdRequestKey, oneKeyOf, type OperatorKey } from './operator-key.js';
import { chooseEscrowProtocol, escrowProtocol, protocolData } from './protocol.js';
import { activateEscrow } from './transfer.js';
import { devshardView, type DevshardView } from './view.js';

/**
 * devshardctl's POST /v1/admin/devshards: registers an on-chain escrow (registerEscrow), or
 * re-activates a deactivated one, whose model (`expectedModel`) and creator key (`key`) must match.
 */
export async function registerOrReactivate(ctx: GatewayContext, id: string, metadata: EventMetadata, expectedModel: string | undefined, key: OperatorKey, protocol: ProtocolChoice): Promise<DevshardView> {
  oneKeyOf(key.privateKey, key.keyEnv);
  const known = ctx.engine.escrow(id);
  if (known?.value === 'deactivated') {
    if (expectedModel !== undefined && known.context.model !== expectedModel) {
      throw refuse.invalid(`Devshard ${id} serves model '${known.context.model}', not '${expectedModel.slice(0, 256)}'.`, 'model', 'model_mismatch');
    }
    if (key.privateKey !== undefined) await holdRequestKey(ctx, key.privateKey, id, known.context.creator, 'wrong_creator_key');
    if (key.keyEnv !== undefined) await ctx.keyring.fromEnv(key.keyEnv);
    return activateEscrow(ctx, id, metadata);
  }
  return registerEscrow(ctx, id, metadata, expectedModel, key.keyEnv, key.privateKey, protocol);
}

/**
 * Registers an escrow that exists on chain (created elsewhere or with register false). With
 * `expectedModel` (the register body's optional model_id), an escrow serving another model on chain
 * is refused before anything is recorded (it used to be registered, routed, and only logged).
 */
export async function registerEscrow(ctx: GatewayContext, escrowId: string, metadata: EventMetadata, expectedModel?: string, keyEnv?: string, privateKey?: string, choice: ProtocolChoice = {}): Promise<DevshardView> {
  const known = ctx.engine.escrow(escrowId);
  // devshardctl's 409 (gateway.go handleAdminAddDevshard); a deactivated one is re-activated (registerOrReactivate).
  if (known?.value === 'active') throw refuse.conflict(`devshard already active: devshard ${escrowId} is already registered and routable here.`, 'already_active');
  if (known && known.value !== 'created' && known.value !== 'imported') {
    throw refuse.conflict(`Devshard ${escrowId} is already known here (state ${stateName(known.value)}).`, 'already_registered');
  }
  const onChain = await ctx.chain.escrow(escrowId).catch((err) => {
    throw chainRefusal(err, 'Reading the escrow');
  });
  if (!onChain) throw refuse.notFound(`Escrow ${escrowId} does not exist on chain.`, 'escrow_not_found');
  if (onChain.settled) throw refuse.conflict(`Escrow ${escrowId} is already settled on chain; it cannot take traffic.`, 'already_settled');
  if (expectedModel !== undefined && onChain.modelId !== expectedModel) {
    throw refuse.invalid(`Escrow ${escrowId} serves model '${onChain.modelId}' on chain, not '${clip(expectedModel)}'.`, 'model_id', 'model_mismatch');
  }
  if (privateKey !== undefined) await holdRequestKey(ctx, privateKey, escrowId, onChain.creator, 'wrong_creator_key');
  if (keyEnv !== undefined && !(await ctx.keyring.fromEnv(keyEnv))) {
    throw refuse.invalid(`private_key_env: environment variable ${keyEnv} is unset or not a 64-hex key.`, 'private_key_env', 'creator_key_unavailable');
  }
  if (!ctx.keyring.has(onChain.creator)) {
    throw refuse.invalid(`Escrow ${escrowId} was created by ${onChain.creator}, whose key this gateway does not hold; set DEVSHARD_PRIVATE_KEY (or the variable named by private_key_env) to that creator's key.`, null, 'creator_key_unavailable');
  }
  const registered = newEvent('EscrowRegistered', { escrowId, model: onChain.modelId }, metadata);
  // The protocol: an escrow already recorded keeps its own; a new one is chosen as a create's is.
  const params = await ctx.chain.params().catch((err) => {
    throw chainRefusal(err, 'Reading the chain params');
  });
  const protocol = known ? escrowProtocol(ctx.engine, escrowId) : chooseEscrowProtocol(ctx, choice, params.approvedVersions);
  if (known && Object.keys(choice).length > 0) {
    const asked = chooseEscrowProtocol(ctx, choice, params.approvedVersions);
    if (asked.version !== protocol.version || asked.route !== protocol.route || asked.tag !== protocol.tag) {
      throw refuse.invalid(`Devshard ${escrowId} already speaks ${protocol.version} on ${protocol.route} (tag ${JSON.stringify(protocol.tag)}), recorded when it was created; its session cannot change version. Register it without protocol_version/route_prefix/state_root_version.`, 'protocol_version', 'protocol_version_fixed');
    }
  }
  const unlisted = versionRefusal(params.approvedVersions, protocol.version) ?? versionRefusal(params.approvedVersions, protocol.tag);
  if (unlisted) throw chainRefusal(unlisted, 'Registering the escrow');
  if (known) {
    await decided(() => ctx.engine.decideEscrow('escrow', escrowId, [registered]));
  } else {
    const slots: SlotInfo[] = onChain.slots.map((s) => ({ slotId: s.slotId, host: s.host, url: s.url }));
    const created = newEvent(
      'EscrowCreated',
      { escrowId, txHash: '', height: 0, epoch: onChain.epochIndex, creator: onChain.creator, amount: onChain.amount.toString(), model: onChain.modelId, role: 'regular', slots, protocol: protocolData(protocol) },
      metadata,
    );
    await decided(() => ctx.engine.decideEscrow('escrow', escrowId, [created, registered]));
  }
  return devshardView(ctx, escrowId);
}
