/**
 * v5's forced-turn and cadence flags of an escrow: hashed into rest_hash, set by a forced turn
 * (height-sync.ts) and cleared by nonce. Sources (zpoken/gonka@86cff503): state/hash.go
 * (`hashHeightSyncEscrow`), state/heightsync.go (`clearExpiredHeightSyncFlags`),
 * heightsync/cadence.go (`ComputeCadenceSwallow`), types/domain.go (`HeightSyncEscrowCommit`).
 */
import { sha256, U64_MAX, u32be, u64be, utf8 } from './bytes.js';

/** The forced-turn and cadence state of an escrow (`HeightSyncEscrowCommit`): all of it is hashed. */
export interface HeightSyncFlags {
  readonly forcedStart: bigint;
  readonly forcedEnd: bigint;
  readonly cadenceSwallowUntil: bigint;
  readonly swallowFe: bigint;
  readonly turnK: bigint;
  readonly turnSlots: bigint;
  readonly reason: string;
}

export const NO_HEIGHT_SYNC_FLAGS: HeightSyncFlags = Object.freeze({ forcedStart: 0n, forcedEnd: 0n, cadenceSwallowUntil: 0n, swallowFe: 0n, turnK: 0n, turnSlots: 0n, reason: '' });

/** `hashHeightSyncEscrow`: sha256(six u64 big-endian ‖ len(reason) u32 big-endian ‖ reason). */
export function heightSyncHash(f: HeightSyncFlags): Uint8Array {
  const reason = utf8(f.reason);
  return sha256(u64be(f.forcedStart), u64be(f.forcedEnd), u64be(f.cadenceSwallowUntil), u64be(f.swallowFe), u64be(f.turnK), u64be(f.turnSlots), u32be(reason.length), reason);
}

/**
 * `ComputeCadenceSwallow`: when a forced turn [start, end] ends strictly inside a periodic window
 * [i·K, i·K + slots − 1] (i ≥ 1), the window's tail is swallowed until its end. Go walks i upward;
 * since K ≥ slots at most one multiple of K can put `end` strictly inside its window, the one just
 * below `end`, so it is computed directly. When end + K passes 2^64 Go's walk stops at once (its
 * bound wraps) and finds nothing; so does this.
 */
export function cadenceSwallow(forcedStart: bigint, forcedEnd: bigint, anchorK: bigint, slots: bigint): { until: bigint; fe: bigint } | undefined {
  if (anchorK === 0n || slots === 0n || anchorK < slots) return undefined;
  if (forcedEnd + anchorK > U64_MAX || forcedEnd === 0n) return undefined;
  const pStart = ((forcedEnd - 1n) / anchorK) * anchorK;
  const pEnd = pStart + slots - 1n;
  if (pStart < anchorK || !(forcedEnd > pStart && forcedEnd < pEnd) || forcedStart > pEnd) return undefined;
  return { until: pEnd, fe: forcedEnd };
}

/**
 * `clearExpiredHeightSyncFlags`, once the latest nonce is set: the forced window clears past its
 * end; the swallow, K, slots and reason clear past the swallow's end, and only when there is one
 * (with none they stay hashed until the next forced turn replaces them).
 */
export function clearExpiredHeightSyncFlags(f: HeightSyncFlags, latestNonce: bigint): HeightSyncFlags {
  let out = f;
  if (out.forcedEnd !== 0n && latestNonce > out.forcedEnd) out = { ...out, forcedStart: 0n, forcedEnd: 0n };
  if (out.cadenceSwallowUntil !== 0n && latestNonce > out.cadenceSwallowUntil) out = { ...out, cadenceSwallowUntil: 0n, swallowFe: 0n, turnK: 0n, turnSlots: 0n, reason: '' };
  return out;
}
