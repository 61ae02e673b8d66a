/**
 * The log's bill follows the protocol's. Over the devshard protocol what an inference costs is what
 * its host's MsgFinishInference charges once a diff applies it (a MsgTimeoutInference charges
 * nothing); the settlement pays exactly that. The log bills a request when it ends here, from the
 * usage the host reported so far, which falls short when the client left mid-stream (the host
 * finishes the answer and charges all of it) or when the gateway restarted with the request in
 * flight (billed 0 then).
 *
 * So each inference is matched twice: the log's bill (`billed`, when its end is recorded) and the
 * protocol's charge (`charged`, when a composed diff applies its Finish or Timeout), whichever comes
 * first waiting for the other. A charge above the bill records the difference as UsageRecovered on
 * the executor's slot, so the escrow's balance in the log is what the hosts will be paid from. A
 * charge below it (a timeout after a partly delivered stream) records nothing: the log stays on the
 * safe side, and the settle event's remainder is the refund the chain pays.
 */
import type { Logger } from 'pino';
import { newEvent } from '../events/catalog.js';
import type { DevshardTx } from '../protocol/gen/devshard/v1/diff_pb.js';
import { InferenceStatus, type Replica } from '../protocol/index.js';
import type { Engine } from './engine.js';

/** Inferences waiting for their other half, per escrow; beyond this the oldest is forgotten. */
const MAX_WAITING = 20_000;

/** What the protocol charged an inference: its cost and executor slot index. */
export interface Charge {
  inferenceId: bigint;
  cost: bigint;
  slot: number;
}

/** The charges a diff just applied to `replica` made: one per Finish (its cost) and Timeout (0). */
export function chargesOf(txs: readonly DevshardTx[], replica: Replica): Charge[] {
  const out: Charge[] = [];
  for (const t of txs) {
    const c = t.tx.case;
    if (c !== 'finishInference' && c !== 'timeoutInference') continue;
    const id = t.tx.value.inferenceId;
    const rec = replica.inference(id);
    if (!rec) continue;
    out.push({ inferenceId: id, cost: c === 'finishInference' ? rec.actualCost : 0n, slot: rec.executorSlot });
  }
  return out;
}

interface Waiting {
  billed: Map<bigint, bigint>;
  charged: Map<bigint, Charge>;
  /** Orphans to look up in the replica rebuilt from the log (their Finish may predate the restart). */
  recheck: Set<bigint>;
}

export class ProtocolBilling {
  private readonly escrows = new Map<string, Waiting>();

  constructor(private readonly ctx: { engine: Engine; logger: Logger }) {}

  /**
   * An orphan of the previous run, billed 0 at start-up: its Finish may already be in a recorded
   * diff (applied before the crash), so the rebuilt replica is asked at the escrow's next diff.
   */
  orphan(escrowId: string, nonce: bigint): void {
    this.billed(escrowId, nonce, 0n);
    this.of(escrowId).recheck.add(nonce);
  }

  /** A diff was composed and applied to `replica`: the charges it made, and orphans already charged. */
  diffApplied(escrowId: string, txs: readonly DevshardTx[], replica: Replica): void {
    const w = this.escrows.get(escrowId);
    if (w && w.recheck.size > 0) {
      const found: Charge[] = [];
      for (const id of w.recheck) {
        const rec = replica.inference(id);
        if (rec && (rec.status === InferenceStatus.Finished || rec.status === InferenceStatus.Validated || rec.status === InferenceStatus.TimedOut)) {
          found.push({ inferenceId: id, cost: rec.status === InferenceStatus.TimedOut ? 0n : rec.actualCost, slot: rec.executorSlot });
        }
      }
      w.recheck.clear();
      this.charged(escrowId, found);
    }
    this.charged(escrowId, chargesOf(txs, replica));
  }

  /** The log billed inference `nonce` `cost` (its end, or 0 for an orphan after a restart). */
  billed(escrowId: string, nonce: bigint, cost: bigint): void {
    const w = this.of(escrowId);
    const charge = w.charged.get(nonce);
    if (charge) {
      w.charged.delete(nonce);
      this.settle(escrowId, charge, cost);
    } else bounded(w.billed).set(nonce, cost);
  }

  /** The protocol charged these inferences (chargesOf). */
  private charged(escrowId: string, charges: readonly Charge[]): void {
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

  /** Forgets an escrow (finalized: no later diff charges anything). */
  forget(escrowId: string): void {
    this.escrows.delete(escrowId);
  }

  /** Inferences waiting for a bill or a charge (tests). */
  waiting(escrowId: string): { billed: number; charged: number } {
    const w = this.escrows.get(escrowId);
    return { billed: w?.billed.size ?? 0, charged: w?.charged.size ?? 0 };
  }

  private of(escrowId: string): Waiting {
    let w = this.escrows.get(escrowId);
    if (!w) this.escrows.set(escrowId, (w = { billed: new Map(), charged: new Map(), recheck: new Set() }));
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
      { slotId: slot.slotId, cost: cost.toString(), reason: `inference ${charge.inferenceId}: its host's MsgFinishInference charged ${charge.cost}, the log had billed ${bill}` },
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
