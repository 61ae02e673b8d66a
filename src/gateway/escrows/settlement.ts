/**
 * Settlement data of an escrow, from its own stream: per slot the cost and request count it billed
 * (slotTally), the last nonce, a digest of the request log (rest hash), the state root the hosts
 * sign, and their signatures.
 */
import { createHash } from 'node:crypto';
import type { Settlement } from '../../chain/port.js';
import { canonicalJson } from '../../events/canonical-json.js';
import { escrowStream, type SettlementData, type SlotInfo, type SlotTally } from '../../events/catalog.js';
import { eachRequestEvent } from '../../events/request-data.js';
import { collectSignaturesDetailed, type SignatureFailure } from '../../network/collect-signatures.js';
import type { GatewayContext } from '../context.js';

/** Settlement format version (the spec's `version` field of the finalize output). */
export const SETTLEMENT_VERSION = 1;

const sha256hex = (s: string) => createHash('sha256').update(s).digest('hex');

export interface BuiltSettlement {
  settlement: SettlementData;
  failures: SignatureFailure[];
  /** Signatures needed by the chain (2/3 of the slots, plus one). */
  required: number;
}

export async function buildSettlement(ctx: GatewayContext, escrowId: string): Promise<BuiltSettlement> {
  const snapshot = ctx.engine.escrow(escrowId)!;
  const c = snapshot.context;
  const slots = c.slots;
  const records = ctx.engine.readStream(escrowStream(escrowId));
  const stats = slotTally(records, slots).map((s) => ({ slotId: s.slotId, missed: 0, invalid: 0, cost: s.cost, requests: s.requests }));
  const hostStats = stats.map((s) => ({ ...s, cost: s.cost.toString() }));
  const fees = '0';
  const restHash = sha256hex(records.at(-1)?.hash ?? '');
  const stateRoot = sha256hex(canonicalJson({ escrow_id: escrowId, nonce: c.nonce, rest_hash: restHash, host_stats: hostStats, fees, version: SETTLEMENT_VERSION }));
  const { signatures, failures } = await collectSignaturesDetailed(
    slots.map((s) => ({ slotId: s.slotId, url: s.url })),
    escrowId,
    { stateRoot, nonce: c.nonce, hostStats: stats.map((s) => ({ ...s })) },
  );
  return {
    settlement: { escrowId, nonce: c.nonce, stateRoot, restHash, hostStats, signatures, fees, version: SETTLEMENT_VERSION },
    failures,
    required: Math.floor((2 * slots.length) / 3) + 1,
  };
}

/**
 * Per slot, what an escrow's stream bills: every ended request to the executor of its nonce
 * (slot[nonce % slots]), usage recovered after a crash to the slot whose host reported it, and for
 * an imported escrow what the source gateway's stream billed before (EscrowImported.hostStats).
 */
export function slotTally(records: Iterable<{ type: string; data: unknown }>, slots: readonly SlotInfo[]): { slotId: number; cost: bigint; requests: number }[] {
  const stats = slots.map((s) => ({ slotId: s.slotId, cost: 0n, requests: 0 }));
  const slot = (slotId: number) => stats.find((s) => s.slotId === slotId);
  for (const r of eachRequestEvent(records)) {
    if ((r.type === 'InferenceFinished' || r.type === 'InferenceFailed') && stats.length > 0) {
      const d = r.data as { nonce: number; cost: string };
      const stat = stats[d.nonce % stats.length]!;
      stat.cost += BigInt(d.cost);
      stat.requests += 1;
    } else if (r.type === 'UsageRecovered') {
      const d = r.data as { slotId: number; cost: string };
      const stat = slot(d.slotId);
      if (stat) stat.cost += BigInt(d.cost);
    } else if (r.type === 'EscrowImported') {
      for (const h of (r.data as { hostStats?: SlotTally[] }).hostStats ?? []) {
        const stat = slot(h.slotId);
        if (stat) {
          stat.cost += BigInt(h.cost);
          stat.requests += h.requests;
        }
      }
    }
  }
  return stats;
}

/** The recorded settlement as the chain port takes it. */
export function toChainSettlement(s: SettlementData): Settlement {
  return {
    ...s,
    fees: BigInt(s.fees),
    hostStats: s.hostStats.map((h) => ({ ...h, cost: BigInt(h.cost) })),
  };
}

/** The finalize output document (spec: escrow_id, version, fees; ours: the rest). */
export function settlementDocument(s: SettlementData) {
  return {
    escrow_id: s.escrowId,
    version: s.version,
    fees: s.fees,
    nonce: s.nonce,
    state_root: s.stateRoot,
    rest_hash: s.restHash,
    host_stats: s.hostStats.map((h) => ({ slot_id: h.slotId, missed: h.missed, invalid: h.invalid, cost: h.cost, requests: h.requests })),
    signatures: s.signatures.map((x) => ({ slot_id: x.slotId, signature: x.signature })),
  };
}

/** True when requests ended after the settlement was made (it no longer covers them). */
export function settlementStale(s: SettlementData | null, nonce: number, spent: string): boolean {
  if (!s) return true;
  const claimed = s.hostStats.reduce((n, h) => n + BigInt(h.cost), 0n);
  return s.nonce !== nonce || claimed !== BigInt(spent);
}
