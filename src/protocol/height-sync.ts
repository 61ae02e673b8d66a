/**
 * v5 height-sync: the rules of the height-sync txs (a forced turn sets the escrow flags of
 * height-sync-flags.ts; heartbeats and acks are admitted), and the txs of the height-sync plane with
 * the bytes their signatures cover. Sources (zpoken/gonka@86cff503): devshard/state/heightsync.go
 * (`applyForceHeightSyncTurn`, `applyHeartbeat`, `applyHeightAck`), heightsync/ack_signing.go
 * (`CanonicalAckBytes`, `RecoverAckSigner`), proto/devshard/v1/diff.proto.
 */
import { create, toBinary } from '@bufbuild/protobuf';
import {
  DevshardTxSchema,
  MsgHeightAckSchema,
  type DevshardTx,
  type MsgForceHeightSyncTurn,
  type MsgHeightAck,
  type SyncVectorEntry,
} from './gen/devshard/v1/diff_pb.js';
import { refuse, refuseBare } from './errors.js';
import { Phase } from './hashes.js';
import { slotAddress, type RuleContext } from './rule-context.js';
import { recoverAddress, signMessage } from './signatures.js';
import type { Stamp } from './stamps.js';
import { cadenceSwallow } from './height-sync-flags.js';
import { utf8 } from './bytes.js';

// The flags live in their own module (session state needs them without the rules); kept reachable here too.
export { clearExpiredHeightSyncFlags, heightSyncHash, NO_HEIGHT_SYNC_FLAGS, cadenceSwallow, type HeightSyncFlags } from './height-sync-flags.js';

/**
 * `applyForceHeightSyncTurn`: opens a forced turn at the diff's nonce. Refused outside Active, with a
 * trigger other than the diff's nonce, a width other than the group, K below the width or an end
 * other than trigger + width − 1; ignored while a forced turn still covers this nonce.
 */
export function applyForceHeightSyncTurn(ctx: RuleContext, msg: MsgForceHeightSyncTurn): void {
  const { state, diffNonce } = ctx;
  if (state.phase !== Phase.Active) throw refuse('SessionFinalizing');
  const slots = BigInt(state.slots.length);
  if (msg.triggerNonce !== diffNonce) throw refuse('InvalidNonce', 'trigger_nonce must equal diff nonce');
  if (msg.slotsNum !== slots) throw refuseBare('InvalidForceHeightSyncTurn', `MsgForceHeightSyncTurn slots_num ${msg.slotsNum} must equal group size ${slots}`);
  if (msg.anchorK < msg.slotsNum) throw refuse('InvalidSchedulerConfig');
  if (msg.endNonce !== BigInt.asUintN(64, msg.triggerNonce + msg.slotsNum - 1n)) {
    throw refuseBare('InvalidForceHeightSyncTurn', 'MsgForceHeightSyncTurn end_nonce must be trigger_nonce+slots_num-1');
  }
  const cur = state.heightSync;
  if (cur.forcedEnd !== 0n && diffNonce <= cur.forcedEnd) return;
  const swallow = cadenceSwallow(msg.triggerNonce, msg.endNonce, msg.anchorK, msg.slotsNum);
  state.heightSync = {
    forcedStart: msg.triggerNonce,
    forcedEnd: msg.endNonce,
    turnK: msg.anchorK,
    turnSlots: msg.slotsNum,
    reason: msg.reason,
    cadenceSwallowUntil: swallow?.until ?? 0n,
    swallowFe: swallow?.fe ?? 0n,
  };
}

/** `applyHeartbeat`: admitted while Active (the log plane has already judged it). */
export function applyHeartbeat(ctx: RuleContext): void {
  if (ctx.state.phase !== Phase.Active) throw refuse('SessionFinalizing');
}

/**
 * `applyHeightAck`: admitted while Active (the log plane has checked its signature and causality).
 * A first-time warm signer is bound here, as a confirm or finish would bind it, so the binding is
 * recorded with the diff; a signer L2 admitted through a sibling slot is not bound, and that is no
 * refusal.
 */
export function applyHeightAck(ctx: RuleContext, ack: MsgHeightAck): void {
  if (ctx.state.phase !== Phase.Active) throw refuse('SessionFinalizing');
  const expected = slotAddress(ctx, ack.slotId);
  if (expected === undefined) throw refuse('SlotNotInGroup', `slot ${ack.slotId}`);
  let recovered: string;
  try {
    recovered = recoverAckSigner(ack);
  } catch (e) {
    // Unreachable after L2; Go returns the recovery error as it is (no INVALID wrapper).
    throw refuseBare('AckSigInvalid', (e as Error).message);
  }
  if (recovered !== expected) ctx.resolveWarmKey(ack.slotId, recovered, expected);
}

// ---- the txs of the height-sync plane ------------------------------------------------------------

/** The reasons the reference gateway writes on heartbeats and forced turns. */
export type HeightSyncReason = 'height_cadence' | 'quiet_session' | 'turn_timeout' | 'forced' | 'heartbeat' | (string & {});

export interface ForceTurnInput {
  /** The nonce of the diff that carries it. */
  triggerNonce: bigint;
  /** The group size. */
  slotsNum: number;
  /** The scheduler's K (≥ slotsNum); the reference gateway sends max(K or 10, slots). */
  anchorK: bigint;
  reason: HeightSyncReason;
}

/** A MsgForceHeightSyncTurn covering [trigger, trigger + slots − 1]. */
export function forceHeightSyncTurnTx(f: ForceTurnInput): DevshardTx {
  const slots = BigInt(f.slotsNum);
  return create(DevshardTxSchema, {
    tx: { case: 'forceHeightSyncTurn', value: { triggerNonce: f.triggerNonce, endNonce: f.triggerNonce + slots - 1n, anchorK: f.anchorK, slotsNum: slots, reason: f.reason } },
  });
}

export interface HeartbeatInput {
  slotsNum: number;
  reason: HeightSyncReason;
  /** F(nonce) and its hash, or none: a user stamp must be exactly the floor or absent. */
  stamp?: Stamp;
  syncVector?: SyncVectorEntry[];
}

/** A MsgHeartbeat (payload-less diffs of a span carry one each). */
export function heartbeatTx(h: HeartbeatInput): DevshardTx {
  return create(DevshardTxSchema, {
    tx: {
      case: 'heartbeat',
      value: {
        observedHeight: h.stamp?.height ?? 0n,
        observedBlockHash: h.stamp?.hash ?? new Uint8Array(0),
        slotsNum: BigInt(h.slotsNum),
        reason: h.reason,
        syncVector: h.syncVector ?? [],
      },
    },
  });
}

/** The signing domain of MsgHeightAck.host_sig. */
export const HEIGHT_ACK_DOMAIN = 'heightsync.ack.v1';

const EMPTY = new Uint8Array(0);
const DOMAIN_BYTES = utf8(HEIGHT_ACK_DOMAIN);

/** `CanonicalAckBytes`: the domain followed by the ack without host_sig (unknown fields kept). */
export function heightAckSignedBytes(ack: MsgHeightAck): Uint8Array {
  const body = toBinary(MsgHeightAckSchema, { ...ack, hostSig: EMPTY });
  const out = new Uint8Array(DOMAIN_BYTES.length + body.length);
  out.set(DOMAIN_BYTES, 0);
  out.set(body, DOMAIN_BYTES.length);
  return out;
}

/** Signs an ack as its host does (sha256 of the canonical bytes, recoverable secp256k1). */
export function signHeightAck(ack: MsgHeightAck, privateKey: Uint8Array): MsgHeightAck {
  return { ...ack, hostSig: signMessage(heightAckSignedBytes(ack), privateKey) };
}

/** `RecoverAckSigner` with Go's texts for an ack with no signature or one that does not recover. */
export function recoverAckSigner(ack: MsgHeightAck): string {
  if (ack.hostSig.length === 0) throw new Error('heightsync: missing host_sig');
  try {
    return recoverAddress(heightAckSignedBytes(ack), ack.hostSig);
  } catch (e) {
    throw new Error(`heightsync: ack signature verification failed: ${(e as Error).message}`, { cause: e });
  }
}

/** A MsgHeightAck as a tx. */
export const heightAckTx = (ack: MsgHeightAck): DevshardTx => create(DevshardTxSchema, { tx: { case: 'heightAck', value: ack } });
