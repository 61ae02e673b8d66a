/**
 * The log's bill follows the protocol's. Over the devshard protocol what an inference costs is what
 * its host's MsgFinishInference charges once a diff applies it (a MsgTimeoutInference charges
 * nothing); the settlement pays exactly that. The log bills a request when it ends here, from the
 * usage the host reported so far, which falls short when the client left mid-stream (the host
 * finishes the answer and charges all of it) or when the gateway restarted with the request in
 * flight (billed 0 then).
 *
 * So each inference is matched twice: the log's bill (`billed`, when its end is recorded) and the
 * protocol's charge (`diffApplied`, when a composed diff applies its Finish or Timeout), whichever
 * comes first waiting for the other. A charge above the bill records the difference as
 * UsageRecovered on the executor's slot, so the escrow's spent in the log is what the hosts are
 * paid. A charge below it (a timeout after a partly delivered stream) records nothing: the log stays
 * on the safe side, and the settle event's remainder is the refund the chain pays.
 *
 * Nothing here has to survive a crash. When an escrow's session opens (rebuilt from the log), the
 * waiting sets are rebuilt from the log too (`restore`): the bills of inferences no recorded diff has
 * charged wait again, and a recorded charge above the log's bill (an orphan whose Finish reached a
 * diff before the crash) is recorded at once. Durability order makes that complete: a charge's
 * UsageRecovered is queued before the diff that charged it, and a bill's before the request's end.
 */
import type { Logger } from 'pino';
import { escrowStream, newEvent } from '../../events/catalog.js';
import { eachRequestEvent } from '../../events/request-data.js';
import type { DevshardTx } from '../../protocol/gen/devshard/v1/diff_pb.js';
import { chargesOf, type Charge, type Replica } from '../../protocol/index.js';
import type { Engine } from '../write/engine.js';

/** Inferences waiting for their other half, per escrow; beyond this the oldest is forgotten. */
const MAX_WAITING = 20_000;

interface Waiting {
  billed: Map<bigint, bigint>;
  charged: Map<bigint, Charge>;
}

export class ProtocolBilling {
  private readonly escrows = new Map<string, Waiting>();

  constructor(private readonly ctx: { engine: Engine; logger: Logger }) {}

  /**
   * The escrow's session opened with `recordedCharges` (what the log's diffs charged): the waiting
   * sets are rebuilt from the log's bills (ends, and UsageRecovered naming an inference).
   */
  async restore(escrowId: string, recordedCharges: ReadonlyMap<bigint, Charge>): Promise<void> {
    const bills = new Map<bigint, bigint>();
    for (const r of eachRequestEvent(await this.ctx.engine.readStream(escrowStream(escrowId)))) {
      if (r.type === 'InferenceFinished' || r.type === 'InferenceFailed') bills.set(BigInt(r.data.nonce), (bills.get(BigInt(r.data.nonce)) ?? 0n) + BigInt(r.data.cost));
      else if (r.type === 'UsageRecovered' && r.data.inferenceId !== undefined) {
        const id = BigInt(r.data.inferenceId);
        bills.set(id, (bills.get(id) ?? 0n) + BigInt(r.data.cost));
      } else if (r.type === 'NoncesSkipped') {
        // Sent by a run that died before recording their starts (reconcile.ts): billed nothing yet.
        for (let n = r.data.from; n <= r.data.upTo; n++) if (!bills.has(BigInt(n))) bills.set(BigInt(n), 0n);
      }
    }
    const w: Waiting = { billed: new Map(), charged: new Map() };
    this.escrows.set(escrowId, w);
    for (const [id, bill] of bills) {
      const charge = recordedCharges.get(id);
      if (charge) this.settle(escrowId, charge, bill);
      else bounded(w.billed).set(id, bill);
    }
  }

  /** A diff was composed and applied to `replica`: the charges it made. */
  diffApplied(escrowId: string, txs: readonly DevshardTx[], replica: Replica): void {
    const charges = chargesOf(txs, replica);
    if (charges.length === 0) return;
    const w = this.of(escrowId);
    for (const c of charges) {
      const bill = w.billed.get(c.inferenceId);
      if (bill === undefined) bounded(w.charged).set(c.inferenceId, c);
      else {
        w.billed.delete(c.inferenceId);
        this.settle(escrowId, c, bill);
      }
    }
  }

  /** The log billed inference `nonce` `cost` (its end). */
  billed(escrowId: string, nonce: bigint, cost: bigint): void {
    const w = this.of(escrowId);
    const charge = w.charged.get(nonce);
    if (charge) {
      w.charged.delete(nonce);
      this.settle(escrowId, charge, cost);
    } else bounded(w.billed).set(nonce, cost);
  }

  /** Inferences waiting for a bill or a charge (tests). */
  waiting(escrowId: string): { billed: number; charged: number } {
    const w = this.escrows.get(escrowId);
    return { billed: w?.billed.size ?? 0, charged: w?.charged.size ?? 0 };
  }

  private of(escrowId: string): Waiting {
    let w = this.escrows.get(escrowId);
    if (!w) this.escrows.set(escrowId, (w = { billed: new Map(), charged: new Map() }));
    return w;
  }

  private settle(escrowId: string, charge: Charge, bill: bigint): void {
    if (charge.cost <= bill) return;
    const { engine, logger } = this.ctx;
    const snap = engine.escrow(escrowId);
    const slot = snap?.context.slots[charge.slot];
    if (!snap || !slot) return;
    const balance = BigInt(snap.context.balance);
    let cost = charge.cost - bill;
    if (cost > balance) cost = balance;
    if (cost <= 0n) return;
    const event = newEvent(
      'UsageRecovered',
      {
        slotId: slot.slotId,
        cost: cost.toString(),
        reason: `inference ${charge.inferenceId}: its host's MsgFinishInference charged ${charge.cost}, the log had billed ${bill}`,
        inferenceId: Number(charge.inferenceId),
      },
      { actor: { kind: 'chat' } },
    );
    const log = { escrow_id: escrowId, inference_id: charge.inferenceId.toString(), charged: charge.cost.toString(), billed: bill.toString() };
    if (!engine.canEscrow(escrowId, event)) {
      logger.warn({ ...log, state: String(snap.value) }, 'the protocol charged an inference more than the log billed; the escrow no longer takes usage, the settlement pays it');
      return;
    }
    engine.decideEscrow('escrow', escrowId, [event]).catch((err: unknown) => logger.error({ ...log, err }, 'could not record usage the protocol charged beyond the log'));
  }
}

function bounded<V>(m: Map<bigint, V>): Map<bigint, V> {
  if (m.size >= MAX_WAITING) m.delete(m.keys().next().value!);
  return m;
}

/**
 * What an escrow's stream bills, by where it comes from (docs/operators.md, "Money after settle"):
 * the requests' ends as the gateway recorded them, what a source gateway billed before an import,
 * and the usage hosts charged beyond those bills (UsageRecovered, above).
 */
export interface LoggedBill {
  /** Σ cost of the requests' ends (InferenceFinished / InferenceFailed) recorded here. */
  billedRequests: bigint;
  /** What the source gateway's stream had spent when the escrow was imported (EscrowImported.spent). */
  billedBeforeImport: bigint;
  /** Σ UsageRecovered: what the hosts' Finishes charged beyond the log's bills, and usage recovered after a crash. */
  recoveredUsage: bigint;
}

export function loggedBill(records: Iterable<{ type: string; data: unknown }>): LoggedBill {
  const bill: LoggedBill = { billedRequests: 0n, billedBeforeImport: 0n, recoveredUsage: 0n };
  for (const r of eachRequestEvent(records)) {
    if (r.type === 'InferenceFinished' || r.type === 'InferenceFailed') bill.billedRequests += BigInt((r.data as { cost: string }).cost);
    else if (r.type === 'UsageRecovered') bill.recoveredUsage += BigInt((r.data as { cost: string }).cost);
    else if (r.type === 'EscrowImported') bill.billedBeforeImport += BigInt((r.data as { spent: string }).spent);
  }
  return bill;
}

/**
 * A settled escrow's money as the chain paid it, and how the log's bill adds up to it:
 * `totalPayout` = billed requests + billed before import + recovered usage + protocol fees + `unreconciled`.
 * The protocol fees (the create fee and fee_per_nonce for every diff of the Active phase, which the
 * devshard state machine takes from the balance and the keeper pays to the hosts) are in no request's
 * bill: the settlement records them (EscrowFinalized.settlement.fees) and the keeper's event repeats
 * them (EscrowSettled.fees). `unreconciled` is what is left: below 0 when the log billed inferences
 * the settlement does not charge (a Finish that never reached a diff before finalize, a timeout
 * after part of a stream), above 0 when a host charged usage the log never recorded.
 */
export interface SettledMoney {
  txHash: string;
  height: number;
  deposit: bigint;
  /** The chain's remainder, returned to the creator. */
  refund: bigint;
  /** Host costs + fee shares, as the keeper paid them (deposit − refund when its event was not read). */
  totalPayout: bigint;
  fees: bigint;
  /** Σ host_stats cost of the settlement the chain took (the last EscrowFinalized). */
  hostCosts: bigint;
  bill: LoggedBill;
  unreconciled: bigint;
}

/** The money of a settled escrow from its stream (`deposit` from the chain's create); undefined before EscrowSettled. */
export function settledMoney(records: Iterable<{ type: string; data: unknown }>, deposit: bigint): SettledMoney | undefined {
  const all = [...records];
  let settled: { txHash: string; height: number; refund: string; totalPayout?: string; fees?: string } | undefined;
  let settlement: { fees: string; hostStats: { cost: string }[] } | undefined;
  for (const r of all) {
    if (r.type === 'EscrowSettled') settled = r.data as typeof settled;
    else if (r.type === 'EscrowFinalized') settlement = (r.data as { settlement: typeof settlement }).settlement ?? settlement;
  }
  if (!settled) return undefined;
  const refund = BigInt(settled.refund);
  const totalPayout = settled.totalPayout !== undefined ? BigInt(settled.totalPayout) : deposit - refund;
  const fees = BigInt(settled.fees ?? settlement?.fees ?? '0');
  const hostCosts = (settlement?.hostStats ?? []).reduce((n, h) => n + BigInt(h.cost), 0n);
  const bill = loggedBill(all);
  const unreconciled = totalPayout - (bill.billedRequests + bill.billedBeforeImport + bill.recoveredUsage + fees);
  return { txHash: settled.txHash, height: settled.height, deposit, refund, totalPayout, fees, hostCosts, bill, unreconciled };
}
