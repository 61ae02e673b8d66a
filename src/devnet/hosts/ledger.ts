/**
 * What one simulated host served, per escrow and slot: the tally it checks a settlement claim
 * against before signing (sign-route.ts).
 *
 * A request that completed (the whole answer written, `[DONE]` included) is certain. A request cut
 * short (client left, stall, truncation) is not: the host knows what it wrote, not what the gateway
 * received. So the tally keeps two costs: `confirmedCost` (completed requests only) and `cost`
 * (everything written: prompt plus the completion tokens sent). A fair claim lies between them.
 */
export interface SlotTally {
  slotId: number;
  requests: number;
  completed: number;
  interrupted: number;
  promptTokens: number;
  completionTokens: number;
  /** Tokens x price of everything served, completed or cut short (upper bound of a fair claim). */
  cost: bigint;
  /** Tokens x price of completed requests (lower bound of a fair claim). */
  confirmedCost: bigint;
}

const empty = (slotId: number): SlotTally => ({
  slotId,
  requests: 0,
  completed: 0,
  interrupted: 0,
  promptTokens: 0,
  completionTokens: 0,
  cost: 0n,
  confirmedCost: 0n,
});

/** JSON form of a ledger (costs as decimal strings), so the devnet can persist it with its state. */
export type LedgerSnapshot = Record<string, (Omit<SlotTally, 'cost' | 'confirmedCost'> & { cost: string; confirmedCost: string })[]>;

/** Called after every recorded request with the slot's new tally (the devnet persists it at once). */
export type LedgerListener = (escrowId: string, tally: LedgerSnapshot[string][number]) => void;

export class HostLedger {
  private readonly escrows = new Map<string, Map<number, SlotTally>>();

  constructor(private readonly onRecord?: LedgerListener) {}

  static from(snapshot: LedgerSnapshot | undefined, onRecord?: LedgerListener): HostLedger {
    const l = new HostLedger(onRecord);
    for (const [escrowId, tallies] of Object.entries(snapshot ?? {})) {
      const slots = new Map<number, SlotTally>();
      for (const t of tallies) slots.set(t.slotId, { ...t, cost: BigInt(t.cost), confirmedCost: BigInt(t.confirmedCost) });
      l.escrows.set(escrowId, slots);
    }
    return l;
  }

  snapshot(): LedgerSnapshot {
    const out: LedgerSnapshot = {};
    for (const [escrowId, slots] of this.escrows) {
      out[escrowId] = [...slots.values()].map((t) => ({ ...t, cost: t.cost.toString(), confirmedCost: t.confirmedCost.toString() }));
    }
    return out;
  }

  record(escrowId: string, slotId: number, r: { promptTokens: number; completionTokens: number; complete: boolean; tokenPrice: bigint }): void {
    let slots = this.escrows.get(escrowId);
    if (!slots) this.escrows.set(escrowId, (slots = new Map()));
    let t = slots.get(slotId);
    if (!t) slots.set(slotId, (t = empty(slotId)));
    const cost = BigInt(r.promptTokens + r.completionTokens) * r.tokenPrice;
    t.requests += 1;
    t.promptTokens += r.promptTokens;
    t.completionTokens += r.completionTokens;
    t.cost += cost;
    if (r.complete) {
      t.completed += 1;
      t.confirmedCost += cost;
    } else {
      t.interrupted += 1;
    }
    this.onRecord?.(escrowId, { ...t, cost: t.cost.toString(), confirmedCost: t.confirmedCost.toString() });
  }

  tally(escrowId: string, slotId: number): SlotTally {
    const t = this.escrows.get(escrowId)?.get(slotId);
    return t ? { ...t } : empty(slotId);
  }

  tallies(escrowId: string): SlotTally[] {
    return [...(this.escrows.get(escrowId)?.values() ?? [])].map((t) => ({ ...t }));
  }
}
