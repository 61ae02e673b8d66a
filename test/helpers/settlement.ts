/**
 * What the chain pays out of a settled escrow's deposit over the devshard protocol: the recorded
 * settlement's host_stats costs (the hosts' own counts, from their MsgFinishInference) plus its
 * fees; the rest is the creator's refund (k/devshard_settlement.go).
 */
import type { RecordedEvent } from '../../src/events/envelope.js';

interface Readable {
  readStream(stream: string): Iterable<RecordedEvent> | RecordedEvent[];
}

/** Host costs and fees of the escrow's last recorded settlement (EscrowFinalized). */
export function settlementCharges(store: Readable, escrowId: string): { hostCosts: bigint; fees: bigint } {
  const fin = [...store.readStream(`escrow-${escrowId}`)].filter((r) => r.type === 'EscrowFinalized').at(-1);
  if (!fin) throw new Error(`escrow ${escrowId} has no recorded settlement`);
  const s = (fin.data as { settlement: { fees: string; hostStats: { cost: string }[] } }).settlement;
  return { hostCosts: s.hostStats.reduce((n, h) => n + BigInt(h.cost), 0n), fees: BigInt(s.fees) };
}

/** The refund the chain computes for that settlement: deposit − host costs − fees. */
export function expectedRefund(store: Readable, escrowId: string, deposit: bigint | string): bigint {
  const { hostCosts, fees } = settlementCharges(store, escrowId);
  return BigInt(deposit) - hostCosts - fees;
}
