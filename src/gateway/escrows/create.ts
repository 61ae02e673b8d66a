/**
 * Creating an escrow on chain, write-ahead: sign offline (the tx hash is known), record the intent
 * with that hash, broadcast, record the outcome. A crash in between is reconciled on start by
 * asking the chain for the hash (reconcile.ts), never by guessing.
 */
import { randomUUID } from 'node:crypto';
import { createIntentStream, newEvent, type CreateOrigin, type EscrowRole, type KeySource, type ProtocolData, type SlotInfo } from '../../events/catalog.js';
import type { EventMetadata } from '../../events/envelope.js';
import type { ChainEscrow, TxFeeOverride, TxOutcome } from '../../chain/port.js';
import type { GatewayContext } from '../context.js';
import { DENOM } from '../../chain/keys.js';
import { createRefusal, feeRefusal, versionRefusal } from '../../chain/prechecks.js';
import { broadcastByHash } from './broadcast.js';
import { chainErrorInfo, outcomeUnknown } from './chain-errors.js';
import { recordedTxOutcome } from './broadcast.js';
import { chooseEscrowProtocol, protocolData } from './protocol.js';
import type { ProtocolChoice } from '../../protocol/versions.js';

export interface CreateEscrowCommand {
  privateKeyHex: string;
  keySource: KeySource;
  amount: bigint;
  model: string;
  role: EscrowRole;
  register: boolean;
  origin: CreateOrigin;
  metadata: EventMetadata;
  /** A create decided earlier (rotation) names its intent id in advance; default: a fresh one. */
  intentId?: string;
  /** The epoch the decision was made in; default: the chain's current epoch. */
  epoch?: number;
  /** This tx's fee and gas instead of the configured ones (the admin body's fee_denom, fee_amount, gas_limit). */
  txFee?: TxFeeOverride;
  /** The body's protocol_version / route_prefix / state_root_version; unnamed: the settings, then the chain (escrow-protocol.ts). */
  protocol?: ProtocolChoice;
}

export type CreateEscrowOutcome =
  | { ok: true; escrowId: string; txHash: string; height: number; epoch: number; creator: string; intentId: string; escrow: ChainEscrow }
  | { ok: false; intentId: string; txHash?: string; error: unknown; pending: boolean };

export async function createEscrow(ctx: GatewayContext, cmd: CreateEscrowCommand): Promise<CreateEscrowOutcome> {
  const creator = await ctx.keyring.add(cmd.privateKeyHex);
  const intentId = cmd.intentId ?? randomUUID();
  const epoch = cmd.epoch ?? (await ctx.chain.epoch()).epochIndex;
  let prepared;
  let protocol;
  try {
    // The chain's own rules first, so no fee is spent on a tx it must refuse.
    const [params, balance] = await Promise.all([ctx.chain.params(), ctx.chain.balance(creator)]);
    // The version the escrow will speak, and the tag its settlement will name: both must be listed
    // (the keeper refuses a settlement whose tag is not), or the deposit could never be settled.
    protocol = chooseEscrowProtocol(ctx, cmd.protocol ?? {}, params.approvedVersions);
    const unlisted = versionRefusal(params.approvedVersions, protocol.version) ?? versionRefusal(params.approvedVersions, protocol.tag);
    if (unlisted) throw unlisted;
    const fee = ctx.chain.txFee?.(cmd.txFee);
    const refusal = createRefusal(params, { creator, amount: cmd.amount, balance, fee, denom: DENOM });
    if (refusal) throw refusal;
    // A fee in another denom than the deposit's is paid from that denom's balance.
    if (fee && fee.denom !== DENOM) {
      const feeShort = feeRefusal({ payer: creator, balance: await ctx.chain.balance(creator, fee.denom), fee });
      if (feeShort) throw feeShort;
    }
    prepared = await ctx.chain.prepareCreateEscrow(cmd.privateKeyHex, cmd.amount, cmd.model, cmd.txFee);
  } catch (error) {
    return { ok: false, intentId, error, pending: false };
  }
  await ctx.engine.decideEscrow('intent', intentId, [
    newEvent(
      'EscrowCreateRequested',
      {
        intentId,
        model: cmd.model,
        amount: cmd.amount.toString(),
        creator,
        keySource: cmd.keySource,
        role: cmd.role,
        epoch,
        register: cmd.register,
        origin: cmd.origin,
        txHash: prepared.txHash,
        txBytes: prepared.txBytes,
        protocol: protocolData(protocol),
      },
      cmd.metadata,
    ),
  ]);
  let outcome: TxOutcome;
  try {
    outcome = await broadcastByHash(ctx, prepared);
  } catch (error) {
    if (outcomeUnknown(error)) return { ok: false, intentId, txHash: prepared.txHash, error, pending: true };
    await recordCreateFailed(ctx, intentId, error, prepared.txHash, cmd.metadata);
    return { ok: false, intentId, txHash: prepared.txHash, error, pending: false };
  }
  return resolveCreate(ctx, intentId, outcome, cmd.metadata);
}

/** Records what the chain did with a create tx (used after broadcast and by the reconciler). */
export async function resolveCreate(ctx: GatewayContext, intentId: string, outcome: TxOutcome, metadata: EventMetadata): Promise<CreateEscrowOutcome> {
  if (outcome.code !== 0) {
    const error = ctx.chain.errorOf(outcome);
    await recordCreateFailed(ctx, intentId, error, outcome.txHash, metadata);
    return { ok: false, intentId, txHash: outcome.txHash, error, pending: false };
  }
  const intent = ctx.engine.intent(intentId)!.context;
  const escrowId = ctx.chain.createdEscrowId(outcome);
  const escrow = (await ctx.chain.escrow(escrowId))!;
  const slots: SlotInfo[] = escrow.slots.map((s) => ({ slotId: s.slotId, host: s.host, url: s.url }));
  const created = newEvent(
    'EscrowCreated',
    {
      escrowId,
      intentId,
      txHash: outcome.txHash,
      height: outcome.height,
      epoch: escrow.epochIndex,
      creator: escrow.creator,
      amount: escrow.amount.toString(),
      model: escrow.modelId,
      role: intent.role,
      slots,
      ...(await intentProtocol(ctx, intentId)),
    },
    metadata,
  );
  const register = await registerWanted(ctx, intentId);
  const events = register ? [created, newEvent('EscrowRegistered', { escrowId, model: escrow.modelId }, metadata)] : [created];
  // Instances sharing a log: the new escrow's lease first (its first event is written under it).
  await ctx.ownership.claim(escrowId);
  await ctx.engine.decideEscrow('escrow', escrowId, events, ctx.engine.intent(intentId));
  return { ok: true, escrowId, txHash: outcome.txHash, height: outcome.height, epoch: escrow.epochIndex, creator: escrow.creator, intentId, escrow };
}

/** The intent's register flag, read from its first event (the machine context does not keep it). */
async function registerWanted(ctx: GatewayContext, intentId: string): Promise<boolean> {
  const first = (await ctx.engine.readStream(`escrow-create-${intentId}`))[0];
  return first?.type === 'EscrowCreateRequested' ? first.data.register : true;
}

/** The protocol the intent chose (absent in an intent recorded before versions were: v2, legacy). */
async function intentProtocol(ctx: GatewayContext, intentId: string): Promise<{ protocol?: ProtocolData }> {
  const first = (await ctx.engine.readStream(`escrow-create-${intentId}`))[0];
  const p = first?.type === 'EscrowCreateRequested' ? first.data.protocol : undefined;
  return p ? { protocol: { ...p } } : {};
}

/** Records a create intent's failure with the chain's reason. */
export async function recordCreateFailed(ctx: GatewayContext, intentId: string, error: unknown, txHash: string | undefined, metadata: EventMetadata): Promise<void> {
  // Idempotent: an intent whose outcome is already recorded (or that was never recorded) is left as is.
  const snapshot = ctx.engine.intent(intentId);
  if (!snapshot || snapshot.value !== 'creating') return;
  const intent = snapshot.context;
  await ctx.engine.decideEscrow('intent', intentId, [
    newEvent(
      'EscrowCreateFailed',
      {
        intentId,
        model: intent.model ?? '',
        role: intent.role,
        epoch: intent.epoch ?? 0,
        error: chainErrorInfo(error),
        ...(txHash ? { txHash } : {}),
      },
      metadata,
    ),
  ]);
}

/**
 * A create intent whose outcome is not recorded yet (crash, lost answer): its outcome from the
 * chain by hash (or a re-broadcast of the recorded bytes), then recorded. Undefined while unknown.
 */
export async function resolvePendingCreate(ctx: GatewayContext, intentId: string, metadata: EventMetadata): Promise<CreateEscrowOutcome | undefined> {
  const first = (await ctx.engine.readStream(createIntentStream(intentId)))[0];
  if (first?.type !== 'EscrowCreateRequested' || ctx.engine.intent(intentId)?.value !== 'creating') return undefined;
  const { txHash, txBytes, creator } = first.data;
  const outcome = await recordedTxOutcome(ctx, { txHash, txBytes: txBytes ?? '', creator });
  if (outcome === 'unknown') return undefined;
  if ('error' in outcome) {
    await recordCreateFailed(ctx, intentId, outcome.error, txHash, metadata);
    return { ok: false, intentId, txHash, error: outcome.error, pending: false };
  }
  return resolveCreate(ctx, intentId, outcome, metadata);
}
