/**
 * What a diff charged: the cost each MsgFinishInference it applied fixed for its inference (the
 * replica's actual_cost, gonka state/machine.go applyFinish) and the zero a MsgTimeoutInference
 * leaves (the reservation refunded), or under v5 a MsgErrorMiss (the actual cost refunded; the
 * record keeps its actual_cost field, so it is not read). Read right after the diff is applied,
 * while the records are live.
 */
import type { DevshardTx } from './gen/devshard/v1/diff_pb.js';
import type { Replica } from './replica.js';

export interface Charge {
  inferenceId: bigint;
  cost: bigint;
  /** The executor's slot index. */
  slot: number;
}

export function chargesOf(txs: readonly DevshardTx[], replica: Replica): Charge[] {
  const out: Charge[] = [];
  for (const t of txs) {
    const c = t.tx.case;
    if (c !== 'finishInference' && c !== 'timeoutInference' && c !== 'errorMiss') continue;
    const id = t.tx.value.inferenceId;
    const rec = replica.inference(id);
    if (!rec) continue;
    out.push({ inferenceId: id, cost: c === 'finishInference' ? rec.actualCost : 0n, slot: rec.executorSlot });
  }
  return out;
}
