/** Small pure pieces of the replica (replica.ts): floor claims from stamps, warm-key bindings, a safe resolver call. */
import type { FloorClaim } from './floor.js';
import type { DevshardTx } from './gen/devshard/v1/diff_pb.js';
import type { WarmKeyBinding } from './replica-types.js';
import { SEQUENCER_SIGNER, stampOf } from './stamps.js';

/**
 * The floor claims of applied txs: each host-signed stamp attributed to its signer (an ack's slot,
 * a finish's executor slot, a confirm's executor of record, the user for a Start or a heartbeat).
 * A confirm whose inference is not live (`executorOf` answers undefined) claims nothing.
 */
export function floorClaims(txs: readonly DevshardTx[], executorOf: (inferenceId: bigint) => number | undefined): FloorClaim[] {
  const claims: FloorClaim[] = [];
  for (const tx of txs) {
    const s = stampOf(tx);
    if (!s) continue;
    let signer = SEQUENCER_SIGNER;
    if (tx.tx.case === 'heightAck') signer = tx.tx.value.slotId;
    else if (tx.tx.case === 'finishInference') signer = tx.tx.value.executorSlot;
    else if (tx.tx.case === 'confirmStart') {
      const executor = executorOf(tx.tx.value.inferenceId);
      if (executor === undefined) continue;
      signer = executor;
    }
    claims.push({ signer, height: s.height, hash: s.hash });
  }
  return claims;
}

/** A resolver that throws counts as "not authorised" (Go: `err != nil || !ok`). */
export function safe(f: () => boolean): boolean {
  try {
    return f() === true;
  } catch {
    return false;
  }
}

export function newBindings(before: ReadonlyMap<number, string>, after: ReadonlyMap<number, string>): WarmKeyBinding[] {
  const out: WarmKeyBinding[] = [];
  for (const [slot, warm] of after) if (!before.has(slot)) out.push({ slot, warm });
  return out.sort((a, b) => a.slot - b.slot);
}
