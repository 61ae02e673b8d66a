/**
 * The host txs a session (session.ts) holds for its next diff: ConfirmStarts from receipts, Finishes
 * and others from `devshard_meta.mempool`, its own timeouts and error misses; and, v5, the Finishes
 * held out of every compose while their error-miss votes are collected.
 */
import type { DevshardTx } from '../../protocol/gen/devshard/v1/diff_pb.js';
import type { RecordedDiff } from '../../protocol/index.js';
import { txKey } from './session-txs.js';

export class PendingTxs {
  /** Host txs waiting for the next diff, by content hash (a tx seen twice is taken once). */
  private readonly txs = new Map<string, DevshardTx>();
  /**
   * v5: inferences whose Finish is held out of every compose while their error-miss votes are
   * collected, so the Finish and the MsgErrorMiss land in one diff (Z5 user/session.go
   * `pinnedFinishIDs`, `HandleErrorMiss`).
   */
  private readonly pinned = new Set<bigint>();

  /** The host txs an earlier run took (the log): those no recorded diff carried are pending again. */
  restore(recorded: readonly RecordedDiff[], hostTxs: readonly DevshardTx[]): void {
    const included = new Set<string>();
    for (const d of recorded) for (const tx of d.txs) included.add(txKey(tx));
    for (const tx of hostTxs) if (!included.has(txKey(tx))) this.take(tx);
  }

  /** Adds a tx to the pending set; true when it was not there. */
  take(tx: DevshardTx): boolean {
    const key = txKey(tx);
    if (this.txs.has(key)) return false;
    this.txs.set(key, tx);
    return true;
  }

  all(): DevshardTx[] {
    return [...this.txs.values()];
  }

  /** Drops, for good, each tx `refusal` names a reason for; `dropped` is told of each. */
  drop(refusal: (tx: DevshardTx) => string | undefined, dropped: (tx: DevshardTx, reason: string) => void): void {
    for (const [key, tx] of this.txs) {
      const reason = refusal(tx);
      if (reason !== undefined) {
        this.txs.delete(key);
        dropped(tx, reason);
      }
    }
  }

  /** The txs the next compose takes (held Finishes aside). */
  composable(): DevshardTx[] {
    return [...this.txs.values()].filter((tx) => !this.isPinned(tx));
  }

  /** A diff took the composable txs: only the held Finishes stay. */
  composed(): void {
    for (const [key, tx] of this.txs) if (!this.isPinned(tx)) this.txs.delete(key);
  }

  /** How many the next compose would take (held Finishes aside). */
  composableCount(): number {
    let k = 0;
    for (const tx of this.txs.values()) if (!this.isPinned(tx)) k++;
    return k;
  }

  /** v5: host acks waiting for a diff. */
  acks(): number {
    let k = 0;
    for (const tx of this.txs.values()) if (tx.tx.case === 'heightAck') k++;
    return k;
  }

  /** The pending Finish of `inferenceId`, if a host sent it. */
  finishOf(inferenceId: bigint): DevshardTx | undefined {
    for (const tx of this.txs.values()) if (tx.tx.case === 'finishInference' && tx.tx.value.inferenceId === inferenceId) return tx;
    return undefined;
  }

  /** Holds the Finish of `inferenceId` (arrived or still to come) out of every compose. */
  pin(inferenceId: bigint): void {
    this.pinned.add(inferenceId);
  }

  unpin(inferenceId: bigint): void {
    this.pinned.delete(inferenceId);
  }

  unpinAll(): void {
    this.pinned.clear();
  }

  private isPinned(tx: DevshardTx): boolean {
    return tx.tx.case === 'finishInference' && this.pinned.has(tx.tx.value.inferenceId);
  }
}
