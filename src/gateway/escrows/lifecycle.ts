/**
 * The operator's escrow commands after creation: register, finalize, settle (deferred while
 * requests are in flight, completed when they drain), deactivate, remove. Each asks the escrow
 * statechart first; a refusal is a 409 naming the state.
 */
import { feeRefusal, settleRefusal, versionRefusal } from '../../chain/prechecks.js';
import type { ProtocolChoice } from '../../protocol/versions.js';
import { chooseEscrowProtocol, escrowProtocol, protocolData } from './protocol.js';
import { escrowStream, newEvent, settlementTag, type CreateOrigin, type KeySource, type SlotInfo } from '../../events/catalog.js';
import { settledMoney, type SettledMoney } from '../session/billing.js';
import type { EventMetadata } from '../../events/envelope.js';
import { clip, refuse } from '../errors.js';
import type { ChainError, TxFeeOverride, TxOutcome } from '../../chain/port.js';
import { decideFinalize, decideSettle, stateName, type SettleDeferral } from '../../machines/index.js';
import type { GatewayContext } from '../context.js';
import { TransitionRefused } from '../write/engine.js';
import { drainedFailureFields, type DrainedAttempt, type OwnerAttempt } from '../workers/rotation/settle-retry.js';
import { broadcastByHash } from './broadcast.js';
import { chainRefusal, chainErrorInfo, outcomeUnknown } from './chain-errors.js';
import { holdForFinalize } from './finalize-hold.js';
import { settleWindowClosedAt } from '../workers/prune-watch.js';
import { holdRequestKey } from './operator-key.js';
import { settleErrorOf, settleWindowClosed } from './pruned.js';
import { buildSettlement, protocolSettlementRefusal, settlementDocument, settlementStale, toChainSettlement } from './settlement.js';

export function escrowOr404(ctx: GatewayContext, escrowId: string) {
  const s = ctx.engine.escrow(escrowId);
  if (!s || s.value === 'removed') throw refuse.notFound(`No devshard ${escrowId} is registered on this gateway.`, 'devshard_not_found');
  return s;
}

/** Runs a decision; a statechart refusal becomes a 409 the operator can act on. */
export async function decided<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    if (err instanceof TransitionRefused) {
      throw refuse.conflict(`Devshard ${err.escrowId} is ${err.state}; ${err.eventType.replace(/^Escrow/, '').toLowerCase()} is not possible in that state.`, 'invalid_state');
    }
    throw err;
  }
}

/**
 * Registers an escrow that exists on chain (created elsewhere or with register false). With
 * `expectedModel` (the register body's optional model_id), an escrow serving another model on chain
 * is refused before anything is recorded (it used to be registered, routed, and only logged).
 */
export async function registerEscrow(ctx: GatewayContext, escrowId: string, metadata: EventMetadata, expectedModel?: string, keyEnv?: string, privateKey?: string, choice: ProtocolChoice = {}) {
  const known = ctx.engine.escrow(escrowId);
  // devshardctl's 409 (gateway.go handleAdminAddDevshard); a deactivated one is re-activated (port.ts).
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

export async function finalizeEscrow(ctx: GatewayContext, escrowId: string, metadata: EventMetadata) {
  const d = decideFinalize(escrowOr404(ctx, escrowId));
  if (d.kind === 'refuse' || !ctx.engine.canEscrow(escrowId, { type: 'EscrowFinalized', data: { settlement: null } } as never)) {
    // (canEscrow also refuses an escrow whose stream can take no event until a restart: engine.ts.)
    throw refuse.conflict(`Devshard ${escrowId} is ${stateName(escrowOr404(ctx, escrowId).value)}; it can no longer be finalized.`, 'invalid_state');
  }
  // No new chat on it, and the requests under way end first (finalize-hold.ts says why).
  const hold = await holdForFinalize(ctx, escrowId, ctx.config.limits.finalizeDrainMs);
  let built: Awaited<ReturnType<typeof buildSettlement>>;
  try {
    if (hold.stillInFlight > 0) {
      ctx.logger.warn({ escrow_id: escrowId, in_flight: hold.stillInFlight }, 'finalizing with requests still in flight: what they cost is billed by the log but not in the settlement');
    }
    built = await buildSettlement(ctx, escrowId);
    // How far each host applied the diffs goes into the log before the settlement it signed.
    await ctx.hostAcks?.flush();
    await decided(() => ctx.engine.decideEscrow('escrow', escrowId, [newEvent('EscrowFinalized', { settlement: built.settlement }, metadata)]));
  } finally {
    hold.release();
  }
  if (built.failures.length > 0) {
    ctx.logger.warn({ escrow_id: escrowId, failures: built.failures }, 'some hosts did not sign the settlement; settle collects them again');
  }
  return settlementDocument(built.settlement);
}

/**
 * GET finalize: the settlement document of a finalized escrow; before finalize devshardctl's 409
 * `session not yet finalized` (proxy.go handleGetFinalize).
 */
export function finalizedDocument(ctx: GatewayContext, escrowId: string) {
  const s = escrowOr404(ctx, escrowId);
  if (!s.context.settlement) {
    throw refuse.conflict(`session not yet finalized: devshard ${escrowId} is ${stateName(s.value)}; finalize it with POST /devshard/${escrowId}/v1/finalize.`, 'not_finalized');
  }
  return settlementDocument(s.context.settlement);
}

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

/**
 * A settle answer as the admin route gives it: devshardctl's fields (gateway.go
 * handleAdminSettleDevshard: `id`, `escrow_id` a number, `active` false, `tx_hash`, `settler`)
 * beside ours (`status`, `settled`, ...). The escrow stops taking new chat once settle is asked.
 */
export function operatorSettleAnswer(ctx: GatewayContext, escrowId: string, answer: SettleAnswer) {
  const creator = ctx.engine.escrow(escrowId)?.context.creator ?? null;
  return { ...answer, id: escrowId, escrow_id: Number(escrowId), active: false as const, tx_hash: 'tx_hash' in answer ? answer.tx_hash : null, settler: creator };
}

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

export async function deactivateEscrow(ctx: GatewayContext, escrowId: string, metadata: EventMetadata, reason?: string) {
  const s = escrowOr404(ctx, escrowId);
  if (s.value === 'deactivated') return await devshardView(ctx, escrowId);
  await decided(() => ctx.engine.decideEscrow('escrow', escrowId, [newEvent('EscrowDeactivated', reason ? { reason } : {}, metadata)]));
  return devshardView(ctx, escrowId);
}

export async function removeEscrow(ctx: GatewayContext, escrowId: string, metadata: EventMetadata) {
  const s = escrowOr404(ctx, escrowId);
  if (!s.context.settled) {
    // devshardctl deletes any inactive devshard with no requests in flight, its state store with it.
    // An unsettled escrow's record is the only way to settle it: without it the creator cannot
    // claim the unused deposit, and the chain prunes the escrow to the hosts at the end of its epochs.
    const busy = s.context.inFlight > 0 ? ` It has ${s.context.inFlight} request(s) in flight.` : '';
    throw refuse.conflict(
      `Devshard ${escrowId} is ${stateName(s.value)} and not settled; removing it now would lose its settlement state, and its whole deposit would be pruned to the hosts (the chain pays an unsettled escrow out to its hosts two epochs after its own) instead of the unused part returning to the creator.${busy} Settle it first (POST /v1/admin/devshards/${escrowId}/settle), then delete it.`,
      'not_settled',
    );
  }
  await decided(() => ctx.engine.decideEscrow('escrow', escrowId, [newEvent('EscrowRemoved', {}, metadata)]));
  // devshardctl's {id, deleted} (gateway.go handleAdminCleanDevshard) beside ours.
  return { id: escrowId, deleted: true, escrow_id: escrowId, removed: true };
}

/** One devshard as the admin API shows it. */
/** The escrow's protocol in its view: version, host route and state-root tag. */
function viewProtocol(ctx: GatewayContext, escrowId: string) {
  const p = escrowProtocol(ctx.engine, escrowId);
  return { protocol_version: p.version, route_prefix: p.route, state_root_version: p.tag };
}

/** A settled escrow's money never changes: read from its stream once per engine. */
const settledMoneyCache = new WeakMap<object, Map<string, SettledMoney>>();

async function settledMoneyOf(ctx: GatewayContext, escrowId: string, deposit: string): Promise<SettledMoney | undefined> {
  let byEscrow = settledMoneyCache.get(ctx.engine);
  if (!byEscrow) settledMoneyCache.set(ctx.engine, (byEscrow = new Map()));
  const known = byEscrow.get(escrowId);
  if (known) return known;
  const money = settledMoney(await ctx.engine.readStream(escrowStream(escrowId)), BigInt(deposit));
  if (money) byEscrow.set(escrowId, money);
  return money;
}

/**
 * Once settled, the view's money is the chain's (docs/operators.md, "Money after settle"): `balance`
 * is the refund the keeper returned, `spent` its total payout (host costs + protocol fees), and
 * `chain_settlement` says how the log's bill adds up to it. Before, they are the log's: deposit −
 * what the requests were billed (protocol fees are not in it).
 */
function settledView(money: SettledMoney) {
  const b = money.bill;
  return {
    spent: money.totalPayout.toString(),
    balance: money.refund.toString(),
    usable_balance: money.refund.toString(),
    chain_settlement: {
      tx_hash: money.txHash,
      height: money.height,
      deposit: money.deposit.toString(),
      refund: money.refund.toString(),
      total_payout: money.totalPayout.toString(),
      fees: money.fees.toString(),
      host_costs: money.hostCosts.toString(),
      // spent = billed_requests + billed_before_import + recovered_usage + protocol_fees + unreconciled
      spent_breakdown: {
        billed_requests: b.billedRequests.toString(),
        billed_before_import: b.billedBeforeImport.toString(),
        recovered_usage: b.recoveredUsage.toString(),
        protocol_fees: money.fees.toString(),
        unreconciled: money.unreconciled.toString(),
      },
    },
  };
}

export async function devshardView(ctx: GatewayContext, escrowId: string) {
  const before = ctx.engine.escrow(escrowId)!.context;
  // Read before the state below, which is then taken in one synchronous stretch.
  const money = before.settled ? await settledMoneyOf(ctx, escrowId, before.deposit) : undefined;
  const s = ctx.engine.escrow(escrowId)!;
  const c = s.context;
  const expired = !c.settled && settleWindowClosedAt(ctx, c.epoch);
  return {
    escrow_id: escrowId,
    model_id: c.model,
    state: stateName(s.value),
    role: c.role,
    routable: s.value === 'active' && c.nonce + 1 < c.routingStop && !expired,
    // Past its settle window by the chain's epoch (prune-watch.ts): pruned, never routed to again.
    expired,
    creator: c.creator,
    epoch_index: c.epoch,
    amount: c.deposit,
    spent: c.spent,
    balance: c.balance,
    reserved: c.reserved,
    usable_balance: (BigInt(c.balance) - BigInt(c.reserved)).toString(),
    nonce: c.nonce,
    in_flight: c.inFlight,
    settled: c.settled,
    slots: c.slots.map((x) => ({ slot_id: x.slotId, host: x.host, url: x.url })),
    ...viewProtocol(ctx, escrowId),
    last_error: c.lastError,
    // A drained settle whose last attempt failed transiently: tried again from that height (reactors.ts).
    settle_retry: s.value === 'settleDeferred' && c.settleRetry ? { failed_attempts: c.settleRetry.attempt, retry_at_height: c.settleRetry.retryAtHeight } : null,
    ...(money ? settledView(money) : {}),
  };
}
