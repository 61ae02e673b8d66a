/**
 * The v5 log plane: the checks a diff must pass before any of its txs apply, each refusing the
 * whole diff and leaving its nonce unused (zpoken/gonka@86cff503 devshard/heightsync/logplane.go
 * `CheckDiffLogPlane`). In Z5's order:
 *
 *   L1  bad_framing        heartbeats' slots_num, hash and sync-vector sizes; acks' ref_nonce,
 *                          slot and peer_seen sizes
 *   L2  ack_sig_invalid    each ack's host_sig recovers to its slot's cold key, a warm key bound
 *                          to the slot or to a sibling slot of the same cold key, or one the
 *                          resolver authorises (asked, never bound here)
 *   L3  ack_causality      each ack's ref_nonce names a heartbeat in this diff or already applied
 *   L0  height_regression  no stamp below F(its producing nonce)
 *   L0b height_regression  within the diff, no inference's finish stamp below its confirm stamp
 *
 * The rest of Z5's plane only records marks (L0's unbacked user stamps, L7's sync vectors) or runs
 * at the transport edge (L4, L5a, L6); none of it can refuse a diff, so none of it is here.
 */
import type { DevshardTx, MsgHeartbeat, MsgHeightAck } from './gen/devshard/v1/diff_pb.js';
import { refuse, type DevshardError } from './errors.js';
import type { HeightFloor } from './floor.js';
import { recoverAckSigner } from './height-sync.js';
import type { HeightTurns } from './height-turns.js';
import { legName, producingNonce, stampOf, stampPresent } from './stamps.js';

/** `MaxObservedBlockHashBytes`: a Tendermint sha256. */
export const MAX_BLOCK_HASH_BYTES = 32;

/** What the log plane reads: the escrow's group and keys, and the fold of the diffs applied so far. */
export interface LogPlaneView {
  /** Slot id → cold address. */
  slots: readonly string[];
  /** Slot → bound warm key (the state's warm keys, as they stand when the check runs). */
  warmKeys: ReadonlyMap<number, string>;
  /** Whether `recovered` may sign for `cold` (the warm-key resolver, asked without binding). */
  acceptWarm: (recovered: string, cold: string) => boolean;
  turns: HeightTurns;
  floor: HeightFloor;
}

/** Go's `%q` of an address (plain ASCII: a quoted string). */
const q = (s: string): string => JSON.stringify(s);

/** `PeerSeenByteLenValid`: exactly ceil(slots / 8) bytes (none for an empty roster). */
export const peerSeenLengthValid = (n: number, slots: number): boolean => (slots === 0 ? n === 0 : 8 * n >= slots && n <= Math.ceil(slots / 8));

/** `CheckDiffLogPlane`'s refusing part: the first failing check's refusal, or undefined. */
export function logPlaneRefusal(nonce: bigint, txs: readonly DevshardTx[], view: LogPlaneView): DevshardError | undefined {
  const hbs: MsgHeartbeat[] = [];
  const acks: MsgHeightAck[] = [];
  for (const tx of txs) {
    if (tx.tx.case === 'heartbeat') hbs.push(tx.tx.value);
    else if (tx.tx.case === 'heightAck') acks.push(tx.tx.value);
  }
  return framing(hbs, acks, view) ?? ackSignatures(acks, view) ?? ackCausality(nonce, hbs, acks, view) ?? belowFloor(nonce, txs, view) ?? finishBelowConfirm(txs);
}

/** L1. */
function framing(hbs: readonly MsgHeartbeat[], acks: readonly MsgHeightAck[], view: LogPlaneView): DevshardError | undefined {
  const slots = Math.max(view.slots.length, 1);
  for (const hb of hbs) {
    if (hb.slotsNum !== BigInt(slots)) return refuse('BadFraming', `slots_num ${hb.slotsNum} != group ${slots}`);
    if (hb.observedBlockHash.length > MAX_BLOCK_HASH_BYTES) return refuse('BadFraming', `observed_block_hash len ${hb.observedBlockHash.length}`);
    if (hb.syncVector.length > slots) return refuse('BadFraming', `sync_vector len ${hb.syncVector.length} for slots_num ${slots}`);
  }
  for (const ack of acks) {
    if (ack.refNonce === 0n) return refuse('BadFraming', 'ack ref_nonce 0');
    if (ack.slotId >= slots) return refuse('BadFraming', `slot ${ack.slotId} >= ${slots}`);
    if (!peerSeenLengthValid(ack.peerSeen.length, slots)) return refuse('BadFraming', `peer_seen len ${ack.peerSeen.length} for slots_num ${slots}`);
    if (ack.observedBlockHash.length > MAX_BLOCK_HASH_BYTES) return refuse('BadFraming', `observed_block_hash len ${ack.observedBlockHash.length}`);
  }
  return undefined;
}

/** L2. */
function ackSignatures(acks: readonly MsgHeightAck[], view: LogPlaneView): DevshardError | undefined {
  for (const ack of acks) {
    const key = view.slots[ack.slotId];
    if (key === undefined || key === '') return refuse('AckSigInvalid', `no key for slot ${ack.slotId}`);
    let recovered: string;
    try {
      recovered = recoverAckSigner(ack);
    } catch (e) {
      return refuse('AckSigInvalid', (e as Error).message);
    }
    if (!ackSignerAllowed(recovered, key, ack.slotId, view)) return refuse('AckSigInvalid', `signer ${q(recovered)} != slot key ${q(key)}`);
  }
  return undefined;
}

/**
 * An ack may name any slot its host owns, including one that never executed (so never bound a
 * warm key): a warm key bound on a sibling slot of the same cold key counts too.
 */
function ackSignerAllowed(recovered: string, cold: string, slot: number, view: LogPlaneView): boolean {
  if (recovered === cold) return true;
  const own = view.warmKeys.get(slot);
  if (own !== undefined && own !== '' && own === recovered) return true;
  for (const [other, warm] of view.warmKeys) if (other !== slot && warm === recovered && view.slots[other] === cold) return true;
  return view.acceptWarm(recovered, cold);
}

/** L3: heartbeats in this diff land at its nonce; earlier ones are in the turn index. */
function ackCausality(nonce: bigint, hbs: readonly MsgHeartbeat[], acks: readonly MsgHeightAck[], view: LogPlaneView): DevshardError | undefined {
  for (const ack of acks) {
    if (hbs.length > 0 && ack.refNonce === nonce) continue;
    if (view.turns.heartbeatTurn(ack.refNonce) !== undefined) continue;
    return refuse('AckCausality', `ref_nonce ${ack.refNonce} has no heartbeat`);
  }
  return undefined;
}

/** L0: every stamp against F(the nonce that produced it); a floor unknown (pruned) or 0 checks nothing. */
function belowFloor(nonce: bigint, txs: readonly DevshardTx[], view: LogPlaneView): DevshardError | undefined {
  for (const tx of txs) {
    const err = stampBelowFloor(nonce, tx, view.floor);
    if (err) return err;
  }
  return undefined;
}

/** L0 for one tx landing at `nonce`. */
export function stampBelowFloor(nonce: bigint, tx: DevshardTx, floor: HeightFloor): DevshardError | undefined {
  const s = stampOf(tx);
  if (!s) return undefined;
  const m = producingNonce(nonce, tx);
  if (m === undefined) return undefined;
  const f = floor.asOf(m);
  if (!f.known || f.height === 0n) return undefined;
  if (s.height < f.height) return refuse('HeightRegression', `${legName(tx)} height ${s.height} < floor ${f.height} as of nonce ${m}`);
  return undefined;
}

/**
 * L0b: confirm and finish are both the executor's, so within one diff finish ≥ confirm; start is the
 * user's and is not compared. Unstamped legs are skipped. Go ranges over a map here, so with two
 * offending inferences in one diff its text names either; this names the first one the diff carries.
 */
function finishBelowConfirm(txs: readonly DevshardTx[]): DevshardError | undefined {
  const byId = new Map<bigint, { confirm?: bigint; finish?: bigint }>();
  for (const tx of txs) {
    const c = tx.tx.case;
    if (c !== 'confirmStart' && c !== 'finishInference') continue;
    const m = tx.tx.value;
    if (!stampPresent(m.observedBlockHash)) continue;
    const e = byId.get(m.inferenceId) ?? {};
    if (c === 'confirmStart') e.confirm = m.observedHeight;
    else e.finish = m.observedHeight;
    byId.set(m.inferenceId, e);
  }
  for (const [id, e] of byId) {
    if (e.confirm !== undefined && e.finish !== undefined && e.finish < e.confirm) {
      return refuse('HeightRegression', `inference ${id} finish ${e.finish} < confirm ${e.confirm}`);
    }
  }
  return undefined;
}
