/**
 * Settlement data of an escrow, over the devshard protocol (any version we speak; the root hashes the
 * escrow's state-root tag, src/protocol/versions.ts): the transport's
 * `finalize` (MsgFinalizeRound, N diffs, `signatures?nonce=F`) and the replica's BuildSettlement,
 * as the chain's keeper verifies it (gonka 8a35022 k/devshard_settlement.go).
 */
import { ChainError, type Settlement } from '../../chain/port.js';
import { escrowStream, settlementTag, type SettlementData, type SlotInfo, type SlotTally } from '../../events/catalog.js';
import { escrowProtocol } from './protocol.js';
import { eachRequestEvent } from '../../events/request-data.js';
import { Phase, hostStatsHash, settlementSignatureValid, stateRoot as protocolStateRoot, type Settlement as ProtocolSettlement } from '../../protocol/index.js';
import { refuse } from '../errors.js';
import type { GatewayContext } from '../context.js';

/** The settlement encoding of the devshard protocol (SettlementData.version); its tag is the session's (`stateRootVersion`). */
export const PROTOCOL_SETTLEMENT_VERSION = 2;

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const b64 = (b: Uint8Array): string => Buffer.from(b).toString('base64');

export interface BuiltSettlement {
  settlement: SettlementData;
  /** Hosts that did not take a finalize diff (they may still have signed). */
  failures: { slotId: number; url: string; message: string }[];
  /** Signatures needed by the chain (2/3 of the slots, plus one). */
  required: number;
}

export async function buildSettlement(ctx: GatewayContext, escrowId: string): Promise<BuiltSettlement> {
  // Upstream mode (NETWORK_UPSTREAM_URL) has no hosts: nobody can sign a settlement.
  if (!ctx.network.finalize) throw refuse.invalid(`Cannot finalize devshard ${escrowId}: this gateway runs in upstream mode (NETWORK_UPSTREAM_URL), with no devshard hosts to finalize the session with.`, null, 'finalize_unavailable');
  return buildProtocolSettlement(ctx, escrowId);
}

/**
 * Finalizes over the devshard protocol (the transport's `finalize`): the replica's settlement at
 * FinalizeNonce + N with the slots' 65-byte signatures, each already recovered to its slot's address.
 * Recorded with hex roots and base64 signatures, `version` 2 ("v2"); `requests`
 * per slot is the gateway's own count (operators' bookkeeping, never sent to the chain).
 */
async function buildProtocolSettlement(ctx: GatewayContext, escrowId: string): Promise<BuiltSettlement> {
  const c = ctx.engine.escrow(escrowId)!.context;
  const signer = ctx.keyring.signerFor(c.creator ?? '');
  if (!signer) throw refuse.invalid(`Cannot finalize devshard ${escrowId}: the creator key ${c.creator} is not held by this process.`, null, 'creator_key_unavailable');
  let f;
  try {
    f = await ctx.network.finalize!(escrowId, signer);
  } catch (err) {
    throw refuse.upstream(`Finalizing devshard ${escrowId} over the devshard protocol failed: ${err instanceof Error ? err.message : String(err)}`, 'finalize_failed');
  }
  const s = f.settlement;
  const tag = escrowProtocol(ctx.engine, escrowId).tag;
  if (s.version !== tag) throw refuse.upstream(`Devshard ${escrowId}'s session has the state-root tag ${JSON.stringify(s.version)}, but the escrow recorded ${JSON.stringify(tag)}.`, 'finalize_failed');
  const requests = new Map(slotTally(await ctx.engine.readStream(escrowStream(escrowId)), c.slots).map((t) => [t.slotId, t.requests]));
  for (const h of s.hostStats) {
    // v2's rules leave them 0; the recorded data (and the chain message made from it) carries none.
    if (h.requiredValidations !== 0 || h.completedValidations !== 0) throw refuse.upstream(`Devshard ${escrowId}'s settlement counts validations for slot ${h.slotId}; the v2 rules do not.`, 'finalize_failed');
  }
  const settlement: SettlementData = {
    escrowId,
    nonce: Number(s.nonce),
    stateRoot: hex(s.stateRoot),
    restHash: hex(s.restHash),
    hostStats: s.hostStats.map((h) => ({ slotId: h.slotId, missed: h.missed, invalid: h.invalid, cost: h.cost.toString(), requests: requests.get(h.slotId) ?? 0 })),
    signatures: f.signatures.map((x) => ({ slotId: x.slotId, signature: b64(x.signature) })),
    fees: s.fees.toString(),
    version: PROTOCOL_SETTLEMENT_VERSION,
    // Recorded unless it is what an older record without it means ("v2").
    ...(tag !== `v${PROTOCOL_SETTLEMENT_VERSION}` ? { stateRootVersion: tag } : {}),
  };
  const failures = f.failures.map((message) => ({ slotId: -1, url: '', message }));
  return { settlement, failures, required: Math.floor((2 * c.slots.length) / 3) + 1 };
}

/** The recorded protocol settlement as src/protocol's Settlement (its root recomputed, not copied). */
function protocolSettlementOf(s: SettlementData): ProtocolSettlement {
  const hostStats = s.hostStats.map((h) => ({ slotId: h.slotId, missed: h.missed, invalid: h.invalid, cost: BigInt(h.cost), requiredValidations: 0, completedValidations: 0 }));
  const restHash = new Uint8Array(Buffer.from(s.restHash, 'hex'));
  const version = settlementTag(s);
  const fees = BigInt(s.fees);
  return { escrowId: s.escrowId, version, nonce: BigInt(s.nonce), fees, restHash, hostStats, stateRoot: protocolStateRoot(hostStatsHash(hostStats), fees, restHash, version, Phase.Settlement) };
}

/**
 * The keeper's proof checks on a recorded protocol settlement, before any fee is spent
 * (k/devshard_settlement.go VerifyDevshardSettlement): the root recomputed from host_stats, fees,
 * rest_hash and the version, every signature recovered to its slot's address, no duplicate slot,
 * the quorum. Answers the chain's own text for the first failure, undefined when it would pass.
 */
export function protocolSettlementRefusal(s: SettlementData, slots: readonly SlotInfo[]): ChainError | undefined {
  const fail = (text: string) => new ChainError('bad_signatures', `${text} (the gateway's check of the recorded settlement; nothing was sent). Finalize the devshard again.`, { precheck: true });
  const p = protocolSettlementOf(s);
  if (hex(p.stateRoot) !== s.stateRoot.toLowerCase()) return fail('state_root mismatch');
  const seen = new Set<number>();
  for (const sig of s.signatures) {
    if (seen.has(sig.slotId)) return fail(`duplicate signature for slot ${sig.slotId}`);
    seen.add(sig.slotId);
    const slot = slots[sig.slotId];
    if (!slot) return fail(`slot_id ${sig.slotId} out of range`);
    if (!settlementSignatureValid(p, slot.host, new Uint8Array(Buffer.from(sig.signature, 'base64')))) return fail(`signature for slot ${sig.slotId} does not recover to ${slot.host}`);
  }
  const need = Math.floor((2 * slots.length) / 3) + 1;
  if (seen.size < need) return fail(`insufficient quorum: ${seen.size} slot votes, need ${need}`);
  return undefined;
}

/** The settlement file (settlementFile): what finalize answers. Amounts are JSON numbers, bytes base64. */
export interface SettlementFile {
  escrow_id: string;
  /** The state-root tag ("v2", …). */
  version: string;
  state_root: string;
  nonce: number;
  fees: number;
  rest_hash: string;
  host_stats: { slot_id: number; missed: number; invalid: number; cost: number; required_validations: number; completed_validations: number }[];
  signatures: { slot_id: number; signature: string }[];
}

/**
 * The file `inferenced tx inference settle-devshard-escrow` reads (x/inference/module/commands.go
 * settlementFileJSON; real-network.md §4), of a recorded protocol settlement: exactly its fields.
 */
export function settlementFile(s: SettlementData): SettlementFile {
  const n = (v: string, what: string) => {
    const x = Number(v);
    if (!Number.isSafeInteger(x)) throw new Error(`settlement ${what} ${v} is beyond a JSON number's exact range`);
    return x;
  };
  return {
    escrow_id: s.escrowId,
    version: settlementTag(s),
    state_root: Buffer.from(s.stateRoot, 'hex').toString('base64'),
    nonce: s.nonce,
    fees: n(s.fees, 'fees'),
    rest_hash: Buffer.from(s.restHash, 'hex').toString('base64'),
    host_stats: [...s.hostStats]
      .sort((a, b) => a.slotId - b.slotId)
      .map((h) => ({ slot_id: h.slotId, missed: h.missed, invalid: h.invalid, cost: n(h.cost, 'cost'), required_validations: 0, completed_validations: 0 })),
    signatures: [...s.signatures].sort((a, b) => a.slotId - b.slotId).map((x) => ({ slot_id: x.slotId, signature: x.signature })),
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

/** The finalize answer: exactly the settlement file (settlementFile). */
export function settlementDocument(s: SettlementData): SettlementFile {
  return settlementFile(s);
}

/**
 * True when the recorded settlement cannot be sent as it is and the escrow must be finalized again:
 * none recorded, or one in a format the chain does not take (version 1, made by the removed legacy
 * transport with signatures no keeper accepts).
 */
export function settlementStale(s: SettlementData | null): boolean {
  // The hosts signed the Settlement-phase root: after MsgFinalizeRound the session takes no new
  // inference, so nothing the gateway counts later can change it (its nonces are the session's).
  return !s || s.version !== PROTOCOL_SETTLEMENT_VERSION;
}
