/**
 * The v2 state root and its parts (gonka 8a35022 devshard/state/hash.go, seal.go):
 *
 *   host_stats_hash = sha256(det_proto(HostStatsMapProto{entries by slot id}))
 *   live_hash       = sha256(Σ over live ids ascending: 0x0a ‖ varint(len(entry)) ‖ entry)
 *   inferences_hash = sha256(sealed_acc(32) ‖ live_hash)
 *   warm_keys_hash  = sha256("") when none, else sha256(Σ by slot: slot_be4 ‖ len_be4 ‖ addr)
 *   rest_hash       = sha256(balance_be8 ‖ inferences_hash ‖ warm_keys_hash)
 *   rest_hash (v5)  = sha256(balance_be8 ‖ inferences_hash ‖ warm_keys_hash ‖ height_sync_hash)
 *                     (zpoken/gonka@86cff503 state/hash.go `ComputeRestHashV2`; height-sync.ts)
 *   state_root      = sha256(host_stats_hash ‖ fees_be8 ‖ rest_hash ‖ sha256(version) ‖ phase)
 *   sealed fold     = sha256(acc ‖ seal_nonce_be8 ‖ id_be8 ‖ entry)
 */
import { createHash } from 'node:crypto';
import { create, toBinary } from '@bufbuild/protobuf';
import { HostStatsMapProtoSchema } from './gen/devshard/v1/state_pb.js';
import { sha256, u32be, u64be, utf8, varint } from './bytes.js';

/** One slot's counters (devshard/types `HostStats`). */
export interface HostStats {
  missed: number;
  invalid: number;
  cost: bigint;
  requiredValidations: number;
  completedValidations: number;
}

/** `SessionPhase`: the byte hashed last into every root. */
export enum Phase {
  Active = 0,
  Finalizing = 1,
  Settlement = 2,
}

/** `computeHostStatsHash`: entries sorted by slot id (every slot, zero entries included). */
export function hostStatsHash(stats: ReadonlyArray<{ slotId: number } & HostStats>): Uint8Array {
  const entries = [...stats].sort((a, b) => a.slotId - b.slotId);
  return sha256(toBinary(HostStatsMapProtoSchema, create(HostStatsMapProtoSchema, { entries })));
}

/** `computeInferencesHashFromEntries` over entries already in ascending id order. */
export function liveHash(entriesAscending: Iterable<Uint8Array>): Uint8Array {
  const h = createHash('sha256');
  const tag = Uint8Array.of(0x0a);
  for (const e of entriesAscending) {
    h.update(tag);
    h.update(varint(e.length));
    h.update(e);
  }
  return new Uint8Array(h.digest());
}

/** `FoldSealedAccumulator`. */
export const foldSealedAcc = (acc: Uint8Array, sealNonce: bigint, id: bigint, entry: Uint8Array): Uint8Array =>
  sha256(acc, u64be(sealNonce), u64be(id), entry);

/** `computeWarmKeysHash`: slot → warm address. */
export function warmKeysHash(warmKeys: ReadonlyMap<number, string>): Uint8Array {
  if (warmKeys.size === 0) return sha256();
  const h = createHash('sha256');
  for (const slot of [...warmKeys.keys()].sort((a, b) => a - b)) {
    const addr = utf8(warmKeys.get(slot)!);
    h.update(u32be(slot));
    h.update(u32be(addr.length));
    h.update(addr);
  }
  return new Uint8Array(h.digest());
}

/** `ComputeRestHashV2`. */
export const restHashV2 = (balance: bigint, sealedAcc: Uint8Array, live: Uint8Array, warm: Uint8Array): Uint8Array =>
  sha256(u64be(balance), sha256(sealedAcc, live), warm);

/** v5's `ComputeRestHashV2`: v2's inputs followed by the height-sync flags' hash. */
export const restHashV5 = (balance: bigint, sealedAcc: Uint8Array, live: Uint8Array, warm: Uint8Array, heightSync: Uint8Array): Uint8Array =>
  sha256(u64be(balance), sha256(sealedAcc, live), warm, heightSync);

/** `ComputeStateRootFromRestHash`. */
export const stateRoot = (hostStats: Uint8Array, fees: bigint, rest: Uint8Array, version: string, phase: Phase): Uint8Array =>
  sha256(hostStats, u64be(fees), rest, sha256(utf8(version)), Uint8Array.of(phase));
