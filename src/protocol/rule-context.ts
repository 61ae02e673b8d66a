/**
 * What every tx rule reads besides its message, and the checks several rules share (gonka 8a35022
 * devshard/state/machine.go: `tokenCost`, `verifyProposerSig`, `ResolveWarmKey`, the sealed/unknown
 * refusals). Shared by tx-rules.ts and the v5 rules in their own files.
 */
import { DevshardError, refuse } from './errors.js';
import type { HostStats } from './hashes.js';
import type { InferenceRecord } from './inference-record.js';
import type { SessionState } from './session-state.js';
import { recoverAddress, RecoverError } from './signatures.js';
import type { RuleSet } from './versions.js';
import { U64_MAX } from './bytes.js';

export interface RuleContext {
  readonly state: SessionState;
  readonly rules: RuleSet;
  /** The nonce of the diff being applied (a forced turn's trigger must equal it). */
  readonly diffNonce: bigint;
  /** Replaying diffs this node already accepted (`ApplyLocalPersisted`): v5's max_tokens floor is not applied. */
  readonly replayingPersisted: boolean;
  /** Address → its slot ids, ascending. */
  readonly addressSlots: ReadonlyMap<string, readonly number[]>;
  /** `ResolveWarmKey`: may bind `recovered` as the warm key of `slot` (stored in state). */
  resolveWarmKey(slot: number, recovered: string, expected: string): boolean;
}

/** `tokenCost`: (a + b) × price with uint64 overflow checks. */
export function tokenCost(a: bigint, b: bigint, price: bigint): bigint {
  const sum = a + b;
  if (sum > U64_MAX) throw refuse('CostOverflow');
  const cost = sum * price;
  if (cost > U64_MAX) throw refuse('CostOverflow');
  return cost;
}

export const u32 = (n: number): number => n >>> 0;
export const u64 = (n: bigint): bigint => BigInt.asUintN(64, n);

export function recover(message: Uint8Array, sig: Uint8Array, onError: (detail: string) => DevshardError): string {
  try {
    return recoverAddress(message, sig);
  } catch (e) {
    if (e instanceof RecoverError) throw onError(e.message);
    throw e;
  }
}

export const slotAddress = (ctx: RuleContext, slot: number): string | undefined =>
  Number.isInteger(slot) && slot >= 0 && slot < ctx.state.slots.length ? ctx.state.slots[slot] : undefined;

export const weightOf = (ctx: RuleContext, addr: string): number => ctx.addressSlots.get(addr)?.length ?? 0;

export function updateStats(ctx: RuleContext, slot: number, change: (s: HostStats) => HostStats): void {
  ctx.state.setStats(slot, change(ctx.state.hostStats[slot]!));
}

/** A live record, or the refusal Go gives for a sealed or unknown id (confirm / finish / timeout / error-miss). */
export function liveForTransition(ctx: RuleContext, id: bigint): InferenceRecord {
  const rec = ctx.state.getLive(id);
  if (rec) return rec;
  if (ctx.state.isSealed(id)) throw refuse('InvalidTransition', `inference ${id} is sealed`);
  throw refuse('InferenceNotFound', `inference ${id}`);
}

/**
 * The votes of a timeout or an error-miss: each voter a group member, one vote per address, each
 * signature over `content(accept)` from the voter's address or its warm key. Returns the accept
 * weight (slots per address).
 */
export function countVotes(ctx: RuleContext, votes: ReadonlyArray<{ voterSlot: number; accept: boolean; signature: Uint8Array }>, content: (accept: boolean) => Uint8Array): number {
  let accept = 0;
  const seen = new Set<string>();
  for (const vote of votes) {
    const voter = slotAddress(ctx, vote.voterSlot);
    if (voter === undefined) throw refuse('SlotNotInGroup', `slot ${vote.voterSlot}`);
    if (seen.has(voter)) throw refuse('DuplicateVote', `slot ${vote.voterSlot}`);
    seen.add(voter);
    const recovered = recover(content(vote.accept), vote.signature, (d) => refuse('InvalidVoteSig', `vote from slot ${vote.voterSlot}: ${d}`));
    if (recovered !== voter && !ctx.resolveWarmKey(vote.voterSlot, recovered, voter)) {
      throw refuse('InvalidVoteSig', `vote from slot ${vote.voterSlot}: expected ${voter}, got ${recovered}`);
    }
    if (vote.accept) accept = u32(accept + weightOf(ctx, voter));
  }
  return accept;
}
