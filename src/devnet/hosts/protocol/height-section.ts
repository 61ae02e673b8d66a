/**
 * The `height_sync` section a v5 host writes beside `devshard_receipt` in its first SSE event, and
 * answers the seed RPC with (zpoken/gonka@86cff503 devshard/heightsync/anchor.go
 * `HeightSyncSection`, `AnchorScheduler.Decide`, `shouldEmitAnchor`; source.go `LatestSection`;
 * escrow_hints.go `EscrowHintsFromState`; origin_signing.go `CanonicalOriginBytes`, `SignOrigin`;
 * transport/server.go `HandleInference`; proto/devshard/v1/inference_envelope.proto).
 *
 * JSON (Go struct order, empty fields omitted): chain_id, proof_type "height-anchor-v1",
 * mainnet_height, mainnet_block_hash_hex (lower-case hex), timestamp_unix_ms, direction "response",
 * originator_sender_id (the host's address), originator_timestamp_unix_ms, sender_signature (std
 * base64). The signature covers "heightsync.origin.v1" ‖ InferenceHeightSyncSection fields 1–7
 * (proof_type enum, height, hash hex, timestamp, response flag, originator, originator timestamp):
 * not chain_id.
 */
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { toHex, utf8 } from '../../../protocol/bytes.js';
import type { HeightSyncFlags } from '../../../protocol/height-sync.js';
import { signMessage } from '../../../protocol/signatures.js';
import type { BlockHeader } from '../chain-view.js';

export const ANCHOR_PROOF_TYPE = 'height-anchor-v1';
export const ORIGIN_SIGN_DOMAIN = 'heightsync.origin.v1';
/** The host scheduler's defaults (a host with DEVSHARD_CHAINORACLE_URL and no K/slots override). */
export const DEFAULT_ANCHOR_K = 10n;
export const DEFAULT_ANCHOR_SLOTS = 1n;

export interface HeightSyncSection {
  chain_id?: string;
  proof_type: string;
  mainnet_height: number;
  mainnet_block_hash_hex: string;
  timestamp_unix_ms: number;
  direction: string;
  originator_sender_id: string;
  originator_timestamp_unix_ms: number;
  sender_signature?: string;
}

/** `EscrowHeightSyncHints`: the escrow's forced-turn state, K and slots falling back to the scheduler's. */
export interface EscrowHints {
  forcedStart: bigint;
  forcedEnd: bigint;
  cadenceSwallowUntil: bigint;
  swallowFe: bigint;
  turnK: bigint;
  turnSlots: bigint;
}

/** `EscrowHintsFromState`: none while neither a forced turn nor a cadence swallow is recorded. */
export function escrowHints(f: HeightSyncFlags, defaultK = DEFAULT_ANCHOR_K, defaultSlots = DEFAULT_ANCHOR_SLOTS): EscrowHints | undefined {
  if (f.forcedEnd === 0n && f.cadenceSwallowUntil === 0n) return undefined;
  return {
    forcedStart: f.forcedStart,
    forcedEnd: f.forcedEnd,
    cadenceSwallowUntil: f.cadenceSwallowUntil,
    swallowFe: f.swallowFe,
    turnK: f.turnK !== 0n ? f.turnK : defaultK,
    turnSlots: f.turnSlots !== 0n ? f.turnSlots : defaultSlots,
  };
}

export interface DecideInput {
  nonce: bigint;
  sessionStart: boolean;
  forceAnchor: boolean;
  escrow?: EscrowHints;
}

/**
 * `shouldEmitAnchor`: inside a forced window, when forced, at session start, in the initial sync turn
 * (nonce ≤ slots) and in each periodic one (nonce ≥ K, nonce mod K < slots) unless the escrow's
 * cadence swallow covers it. Otherwise the section is omitted.
 */
export function shouldEmitAnchor(h: DecideInput, k = DEFAULT_ANCHOR_K, slots = DEFAULT_ANCHOR_SLOTS): boolean {
  if (h.escrow) {
    if (h.escrow.turnK !== 0n) k = h.escrow.turnK;
    if (h.escrow.turnSlots !== 0n) slots = h.escrow.turnSlots;
  }
  const e = h.escrow;
  const inForced = e !== undefined && e.forcedEnd !== 0n && h.nonce >= e.forcedStart && h.nonce <= e.forcedEnd;
  if (inForced || h.forceAnchor || h.sessionStart) return true;
  if (h.nonce === 0n) return false;
  if (h.nonce <= slots) return true;
  if (k !== 0n && h.nonce >= k && h.nonce % k < slots) {
    if (e && e.cadenceSwallowUntil !== 0n && h.nonce > e.swallowFe && h.nonce <= e.cadenceSwallowUntil) return false;
    return true;
  }
  return false;
}

/** `CanonicalOriginBytes`: the domain, then InferenceHeightSyncSection fields 1–7 (proto3: defaults omitted). */
export function heightSyncOriginBytes(s: HeightSyncSection): Uint8Array {
  const w = new BinaryWriter();
  if (s.proof_type === ANCHOR_PROOF_TYPE) w.tag(1, WireType.Varint).int32(1);
  if (s.mainnet_height !== 0) w.tag(2, WireType.Varint).int64(BigInt(s.mainnet_height));
  if (s.mainnet_block_hash_hex !== '') w.tag(3, WireType.LengthDelimited).string(s.mainnet_block_hash_hex);
  if (s.timestamp_unix_ms !== 0) w.tag(4, WireType.Varint).int64(BigInt(s.timestamp_unix_ms));
  if (s.direction === 'response') w.tag(5, WireType.Varint).bool(true);
  if (s.originator_sender_id !== '') w.tag(6, WireType.LengthDelimited).string(s.originator_sender_id);
  if (s.originator_timestamp_unix_ms !== 0) w.tag(7, WireType.Varint).int64(BigInt(s.originator_timestamp_unix_ms));
  const body = w.finish();
  const domain = utf8(ORIGIN_SIGN_DOMAIN);
  const out = new Uint8Array(domain.length + body.length);
  out.set(domain, 0);
  out.set(body, domain.length);
  return out;
}

/**
 * The host's signed Anchor from its oracle's header (`Decide` with the host as originator, then
 * `attachResponseOriginSignature`). Undefined when `IsAnchorSection` would fail (no height or hash):
 * Z5 then omits the section.
 */
export function signedAnchor(header: BlockHeader | undefined, o: { address: string; privateKey: Uint8Array; nowMs: number }): HeightSyncSection | undefined {
  if (!header || header.height <= 0n || header.hash.length === 0) return undefined;
  const s: HeightSyncSection = {
    ...(header.chainId !== '' ? { chain_id: header.chainId } : {}),
    proof_type: ANCHOR_PROOF_TYPE,
    mainnet_height: Number(header.height),
    mainnet_block_hash_hex: toHex(header.hash),
    timestamp_unix_ms: o.nowMs,
    direction: 'response',
    originator_sender_id: o.address,
    originator_timestamp_unix_ms: o.nowMs,
  };
  s.sender_signature = Buffer.from(signMessage(heightSyncOriginBytes(s), o.privateKey)).toString('base64');
  return s;
}
