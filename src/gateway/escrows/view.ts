/** One devshard as the admin API shows it (the admin answers, the export's `escrow`, the lists). */
import { escrowStream, type Amount, type EscrowRole } from '../../events/catalog.js';
import { stateName } from '../../machines/index.js';
import { settledMoney, type SettledMoney } from '../session/billing.js';
import type { GatewayContext } from '../context.js';
import { settleWindowClosedAt } from '../workers/prune-watch.js';
import { escrowOr404 } from './decide.js';
import { liveEscrows } from './live-escrows.js';
import { escrowProtocol } from './protocol.js';

/** The escrow's protocol in its view (viewProtocol). */
export interface ViewProtocol {
  protocol_version: string;
  route_prefix: string;
  state_root_version: string;
}

/** How a settled escrow's money adds up to what the keeper paid (settledView). */
export interface ChainSettlementView {
  tx_hash: string;
  height: number;
  deposit: string;
  refund: string;
  total_payout: string;
  fees: string;
  host_costs: string;
  spent_breakdown: {
    billed_requests: string;
    billed_before_import: string;
    recovered_usage: string;
    protocol_fees: string;
    unreconciled: string;
  };
}

/** A settled escrow's money in its view: the chain's (settledView). */
interface SettledView {
  spent: string;
  balance: string;
  usable_balance: string;
  chain_settlement: ChainSettlementView;
}

export interface DevshardView extends ViewProtocol {
  escrow_id: string;
  model_id: string | null;
  state: string;
  role: EscrowRole;
  routable: boolean;
  expired: boolean;
  creator: string | null;
  epoch_index: number | null;
  amount: Amount;
  spent: Amount;
  balance: Amount;
  reserved: Amount;
  usable_balance: string;
  nonce: number;
  in_flight: number;
  settled: boolean;
  slots: { slot_id: number; host: string; url: string }[];
  last_error: string | null;
  settle_retry: { failed_attempts: number; retry_at_height: number } | null;
  /** Once settled (settledView); `spent`, `balance` and `usable_balance` are then the chain's. */
  chain_settlement?: ChainSettlementView;
}

/** The escrow's protocol in its view: version, host route and state-root tag. */
function viewProtocol(ctx: GatewayContext, escrowId: string): ViewProtocol {
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
function settledView(money: SettledMoney): SettledView {
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

export async function devshardView(ctx: GatewayContext, escrowId: string): Promise<DevshardView> {
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

/** One escrow's view, after what was decided is committed (its state and its money read alike). */
export async function committedDevshardView(ctx: GatewayContext, escrowId: string): Promise<DevshardView> {
  escrowOr404(ctx, escrowId);
  // The state is the decided one, the money is read from the committed log: wait for the
  // commit, or a settle decided a moment ago shows "settled" with the log's money.
  await ctx.engine.idle();
  return devshardView(ctx, escrowId);
}

/** Every escrow not removed, each as its view. */
export function devshardViews(ctx: GatewayContext): Promise<DevshardView[]> {
  return Promise.all(liveEscrows(ctx).map((e) => devshardView(ctx, e.escrowId)));
}
