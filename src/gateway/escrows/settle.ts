/**
 * Settle: the settlement goes on chain, now, or once the requests in flight drain (the wish is
 * recorded, and the drain reactor completes it). Each step asks the escrow statechart first
 * (decideSettle); a refusal is a 409 naming the state.
 */
import { feeRefusal, settleRefusal } from '../../chain/prechecks.js';
import { newEvent, settlementTag, type CreateOrigin, type KeySource } from '../../events/catalog.js';
import type { EventMetadata } from '../../events/envelope.js';
import type { ChainError, TxFeeOverride, TxOutcome } from '../../chain/port.js';
import { decideSettle, type SettleDeferral } from '../../machines/index.js';
import type { GatewayContext } from '../context.js';
import { refuse } from '../errors.js';
import { drainedFailureFields, type DrainedAttempt, type OwnerAttempt } from '../workers/rotation/settle-retry.js';
import { broadcastByHash } from './broadcast.js';
import { chainRefusal, chainErrorInfo, outcomeUnknown } from './chain-errors.js';
import { decided, escrowOr404 } from './decide.js';
import { finalizeEscrow } from './finalize.js';
import { settleErrorOf, settleWindowClosed } from './pruned.js';
import { buildSettlement, protocolSettlementRefusal, settlementStale, toChainSettlement } from './settlement.js';

export interface SettleCommand {
  keySource: KeySource;
  origin: CreateOrigin;
  metadata: EventMetadata;
  /**
   * A drained settle's attempt (the drain reactor): recorded with its tx (EscrowSettleRequested),
   * and a failure of that tx adds it to the chain's reason (settle-retry.ts drainedFailureFields).
   */
  drained?: DrainedAttempt;
  /**
   * The rotation's or depletion check's attempt at a settle it sends itself: recorded with its tx
   * only (a failure found later is recorded by the reconciler in `rotation-<model>`).
   */
  owner?: OwnerAttempt;
  /**
   * The settle tx's fee and gas instead of the configured ones (the admin body's fee_denom,
   * fee_amount, gas_limit); kept with a deferral, so the drained settle signs with them too.
   */
  txFee?: TxFeeOverride;
}

export type SettleAnswer =
  | {
      status: 'settled';
      escrow_id: string;
      settled: true;
      tx_hash: string;
      height: number;
      refund: string;
      already: boolean;
      /** From the keeper's event: host costs plus fee shares; deposit = total_payout + refund (null when not read). */
      total_payout: string | null;
      fees: string | null;
      deposit: string | null;
    }
  | { status: 'deferred'; escrow_id: string; settled: false; in_flight: number }
  | { status: 'settling'; escrow_id: string; settled: false; tx_hash: string };


/** Settles now, or records the wish when requests are in flight (the drain reactor completes it). */
export async function settleEscrow(ctx: GatewayContext, escrowId: string, cmd: SettleCommand): Promise<SettleAnswer> {
  const deferral: SettleDeferral = { origin: cmd.origin, keySource: cmd.keySource, ...(cmd.txFee ? { txFee: recordedTxFee(cmd.txFee) } : {}) };
  // The answers that need no key first; the rest is decided again after the key and fee checks.
  const early = decideSettle(escrowOr404(ctx, escrowId), deferral);
  if (early.kind === 'answer_settled') return settledAnswer(ctx, escrowId, true);
  if (early.kind === 'answer_settling') return { status: 'settling', escrow_id: escrowId, settled: false, tx_hash: (await lastSettleTx(ctx, escrowId)) ?? '' };
  const creator = escrowOr404(ctx, escrowId).context.creator;
  const key = await ctx.keyring.resolve(cmd.keySource, creator ?? '');
  if (!key) {
    const where = cmd.keySource.kind === 'env' ? `environment variable ${cmd.keySource.name} is unset or not a 64-hex key` : 'the creator key is not held by this process';
    throw refuse.invalid(`Cannot sign the settlement: ${where}.`, cmd.keySource.kind === 'env' ? 'private_key_env' : null, 'creator_key_unavailable');
  }
  if ((await ctx.keyring.add(key)) !== creator) {
    throw refuse.invalid(`The key in ${cmd.keySource.kind === 'env' ? cmd.keySource.name : 'the request'} is not the creator of devshard ${escrowId} (${creator}).`, 'private_key_env', 'wrong_settler');
  }
  if (cmd.txFee) {
    // An operator's fee the settler cannot pay is refused before the settle finalizes, defers or
    // signs anything (the configured fee is checked just before signing, as every settle's).
    const short = await settleFeeRefusal(ctx, creator ?? '', cmd.txFee).catch((err: unknown) => {
      throw chainRefusal(err, 'Reading the settler balance');
    });
    if (short) throw chainRefusal(short, 'Settlement');
  }
  let d = decideSettle(escrowOr404(ctx, escrowId), deferral);
  if (d.kind === 'refuse' || d.kind === 'finalize_then_settle') {
    // Not finalized: a pruned escrow is refused with its closed window before anything else.
    await refuseIfPruned(ctx, escrowId, cmd.metadata);
    d = decideSettle(escrowOr404(ctx, escrowId), deferral);
  }
  switch (d.kind) {
    case 'answer_settled':
      return settledAnswer(ctx, escrowId, true);
    case 'answer_settling':
      return { status: 'settling', escrow_id: escrowId, settled: false, tx_hash: (await lastSettleTx(ctx, escrowId)) ?? '' };
    case 'refuse':
      // devshardctl's settle finalizes first (escrow_rotator.go settleDevshardOnChain), and refuses
      // while the devshard has requests in flight rather than finalizing under them.
      if (d.code === 'devshard_busy') {
        throw refuse.conflict(`devshard ${escrowId} has active requests (${d.inFlight}); settle again once its active_requests is 0, or finalize it now and the settle waits for them.`, 'devshard_busy');
      }
      throw refuse.conflict(`Devshard ${escrowId} is ${d.state}; it cannot be finalized, so it cannot be settled.`, 'not_finalized');
    case 'finalize_then_settle':
      await finalizeEscrow(ctx, escrowId, cmd.metadata);
      return broadcastSettle(ctx, escrowId, key, cmd);
    case 'defer':
      await decided(() => ctx.engine.decideEscrow('escrow', escrowId, [newEvent(d.event.type, d.event.data, cmd.metadata)]));
      return { status: 'deferred', escrow_id: escrowId, settled: false, in_flight: d.inFlight };
    case 'still_deferred':
      return { status: 'deferred', escrow_id: escrowId, settled: false, in_flight: d.inFlight };
    case 'settle':
      return broadcastSettle(ctx, escrowId, key, cmd);
  }
}

/**
 * An escrow not yet finalized that the chain has pruned (its epoch ≥ the escrow's + 2): it is gone
 * from the chain (k/devshard_pruning.go paid its deposit to its hosts) and its hosts answer
 * `escrow N not found`, so it can never be finalized (no host signs a settlement) nor settled. It
 * stops taking chat (EscrowDeactivated, naming the prune: nothing routes to it, and neither the
 * depletion check nor the rotation picks it up again), and the settle is refused with the closed
 * window (wrong_epoch, not retried), before anything is asked of the hosts or a fee is spent.
 * Returns while the window is open, or when an epoch is unknown (then the chain judges).
 */
export async function refuseIfPruned(ctx: GatewayContext, escrowId: string, metadata: EventMetadata): Promise<void> {
  const closed = await settleWindowClosed(ctx, escrowId);
  if (!closed) return;
  const deactivated = newEvent('EscrowDeactivated', { reason: closed.message }, metadata);
  if (ctx.engine.canEscrow(escrowId, deactivated)) {
    await ctx.engine.decideEscrow('escrow', escrowId, [deactivated]);
    ctx.logger.warn({ escrow_id: escrowId, reason: closed.message }, 'escrow_pruned_deactivated: the chain pruned this unsettled escrow; it takes no more chat and cannot be settled');
  }
  throw chainRefusal(closed, 'Settlement');
}

async function broadcastSettle(ctx: GatewayContext, escrowId: string, key: string, cmd: SettleCommand): Promise<SettleAnswer> {
  // Pruned by the chain (its epoch ≥ the escrow's + 2): nothing to sign or send.
  const closed = await settleWindowClosed(ctx, escrowId);
  if (closed) throw chainRefusal(closed, 'Settlement');
  let c = ctx.engine.escrow(escrowId)!.context;
  // No settlement yet, or one the chain cannot take, or too few signatures: finalize (again).
  const required = Math.floor((2 * c.slots.length) / 3) + 1;
  if (settlementStale(c.settlement) || (c.settlement?.signatures.length ?? 0) < required) {
    const built = await buildSettlement(ctx, escrowId);
    await decided(() => ctx.engine.decideEscrow('escrow', escrowId, [newEvent('EscrowFinalized', { settlement: built.settlement }, cmd.metadata)]));
    c = ctx.engine.escrow(escrowId)!.context;
    if (built.settlement.signatures.length < required) {
      const why = built.failures.map((f) => `slot ${f.slotId}: ${f.message}`).join('; ');
      throw refuse.upstream(`Only ${built.settlement.signatures.length} of ${c.slots.length} hosts signed the settlement (${required} needed): ${why}`, 'host_signatures_missing');
    }
  }
  let prepared;
  try {
    const settlement = toChainSettlement(c.settlement!);
    // The chain checks the settler's allowlist and the version tag; check them before any fee is spent.
    const refusal = settleRefusal(await ctx.chain.params(), { settler: c.creator ?? '', version: settlementTag(settlement) });
    if (refusal) throw refusal;
    // The keeper's proof checks too (root, signatures, quorum), on what the log holds.
    const proof = protocolSettlementRefusal(c.settlement!, c.slots);
    if (proof) throw proof;
    // The settler pays the fee (the configured one, or this settle's override): the ante handler refuses a tx it cannot pay.
    const short = await settleFeeRefusal(ctx, c.creator ?? '', cmd.txFee);
    if (short) throw short;
    prepared = await ctx.chain.prepareSettleEscrow(key, settlement, cmd.txFee);
  } catch (err) {
    throw chainRefusal(err, 'Preparing the settlement');
  }
  await decided(() =>
    ctx.engine.decideEscrow('escrow', escrowId, [
      newEvent('EscrowSettleRequested', { txHash: prepared.txHash, keySource: cmd.keySource, txBytes: prepared.txBytes, origin: cmd.origin, ...cmd.drained, ...cmd.owner }, cmd.metadata),
    ]),
  );
  let failure: ChainError | undefined;
  try {
    const outcome = await broadcastByHash(ctx, prepared);
    failure = await resolveSettle(ctx, escrowId, outcome, cmd.metadata, cmd.drained);
  } catch (err) {
    if (outcomeUnknown(err)) return { status: 'settling', escrow_id: escrowId, settled: false, tx_hash: prepared.txHash };
    if (ctx.engine.escrow(escrowId)?.value === 'settling') await recordSettleFailure(ctx, escrowId, prepared.txHash, err, cmd.metadata, cmd.drained);
    throw chainRefusal(await settleErrorOf(ctx, escrowId, err), 'Settlement');
  }
  if (failure) throw chainRefusal(failure, 'Settlement');
  return settledAnswer(ctx, escrowId, false);
}

/**
 * Records a settle tx's outcome (after broadcast, and by the reconciler); answers the chain's
 * refusal, recorded with the `drained` attempt that sent the tx, if one did.
 */
export async function resolveSettle(
  ctx: GatewayContext,
  escrowId: string,
  outcome: TxOutcome,
  metadata: EventMetadata,
  drained?: DrainedAttempt,
): Promise<ChainError | undefined> {
  if (outcome.code === 0) {
    const refund = ctx.chain.settledRefund(outcome).toString();
    const money = ctx.chain.settledAmounts?.(outcome);
    const amounts = money ? { totalPayout: money.totalPayout.toString(), fees: money.fees.toString() } : {};
    await ctx.engine.decideEscrow('escrow', escrowId, [newEvent('EscrowSettled', { txHash: outcome.txHash, height: outcome.height, refund, ...amounts }, metadata)]);
    return undefined;
  } else {
    const error = await settleErrorOf(ctx, escrowId, ctx.chain.errorOf(outcome));
    await recordSettleFailure(ctx, escrowId, outcome.txHash, error, metadata, drained);
    return error;
  }
}

/**
 * Records that settle tx `txHash` failed with `err`. A drained attempt's failure carries the
 * attempt and, when transient, its retry (the escrow then stays deferred), whoever found it.
 */
export async function recordSettleFailure(ctx: GatewayContext, escrowId: string, txHash: string, err: unknown, metadata: EventMetadata, drained?: DrainedAttempt): Promise<void> {
  err = await settleErrorOf(ctx, escrowId, err);
  const error = chainErrorInfo(err);
  const retry = drained ? drainedFailureFields(drained, err) : {};
  await ctx.engine.decideEscrow('escrow', escrowId, [newEvent('EscrowSettleFailed', { reason: error.message, error, txHash, ...retry }, metadata)]);
}

/** The settle tx's fee (configured, or `txFee`) when the settler's balance in its denom cannot pay it. */
async function settleFeeRefusal(ctx: GatewayContext, settler: string, txFee: TxFeeOverride | undefined): Promise<ChainError | undefined> {
  const fee = ctx.chain.txFee?.(txFee);
  if (!fee) return undefined;
  return feeRefusal({ payer: settler, balance: await ctx.chain.balance(settler, fee.denom), fee });
}

/** A fee override as an event records it (amounts as decimal strings). */
export function recordedTxFee(fee: TxFeeOverride): { denom?: string; amount?: string; gasLimit?: string } {
  return {
    ...(fee.denom !== undefined ? { denom: fee.denom } : {}),
    ...(fee.amount !== undefined ? { amount: fee.amount.toString() } : {}),
    ...(fee.gasLimit !== undefined ? { gasLimit: fee.gasLimit.toString() } : {}),
  };
}

/** The fee override a recorded deferral carries back, if any. */
export function txFeeOfRecord(fee: { denom?: string; amount?: string; gasLimit?: string } | undefined): TxFeeOverride | undefined {
  if (!fee) return undefined;
  return {
    ...(fee.denom !== undefined ? { denom: fee.denom } : {}),
    ...(fee.amount !== undefined ? { amount: BigInt(fee.amount) } : {}),
    ...(fee.gasLimit !== undefined ? { gasLimit: BigInt(fee.gasLimit) } : {}),
  };
}

async function lastSettleTx(ctx: GatewayContext, escrowId: string): Promise<string | undefined> {
  const recs = await ctx.engine.readStream(`escrow-${escrowId}`);
  for (let i = recs.length - 1; i >= 0; i--) {
    const r = recs[i]!;
    if (r.type === 'EscrowSettleRequested') return r.data.txHash;
  }
  return undefined;
}

async function settledAnswer(ctx: GatewayContext, escrowId: string, already: boolean): Promise<SettleAnswer> {
  const recs = await ctx.engine.readStream(`escrow-${escrowId}`);
  const settled = [...recs].reverse().find((r) => r.type === 'EscrowSettled');
  const d: { txHash: string; height: number; refund: string; totalPayout?: string; fees?: string } = settled?.type === 'EscrowSettled' ? settled.data : { txHash: '', height: 0, refund: '0' };
  const money =
    d.totalPayout !== undefined ? { total_payout: d.totalPayout, fees: d.fees ?? null, deposit: (BigInt(d.totalPayout) + BigInt(d.refund)).toString() } : { total_payout: null, fees: null, deposit: null };
  return { status: 'settled', escrow_id: escrowId, settled: true, tx_hash: d.txHash, height: d.height, refund: d.refund, already, ...money };
}
