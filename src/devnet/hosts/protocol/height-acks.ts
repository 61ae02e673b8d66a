/**
 * A v5 host's answer to the heartbeats it is sent (zpoken/gonka@86cff503 devshard/host/
 * heightsync.go `maybeAckHeartbeatsLocked`, `buildHeightAckLocked`; heightsync/heartbeat.go
 * `SlotForNonce`; syncstate.go `EvaluateSyncStateFromHeader`; peerseen.go `PeerSeen`;
 * ack_signing.go `SignAck`). For each heartbeat newly applied at nonce n whose slot n mod slots it
 * holds, while the session is Active, the host puts into its mempool (the `devshard_meta` of that
 * answer) a MsgHeightAck{ref_nonce n, slot, its stamp max(tip, F(n+1)), sync_state, peer_seen}
 * signed over "heightsync.ack.v1" ‖ the ack without host_sig.
 */
import { create } from '@bufbuild/protobuf';
import { MsgHeightAckSchema, SyncState, type DevshardTx, type MsgHeartbeat } from '../../../protocol/gen/devshard/v1/diff_pb.js';
import { Phase } from '../../../protocol/hashes.js';
import { heightAckTx, signHeightAck } from '../../../protocol/height-sync.js';
import type { DevnetChainView } from '../chain-view.js';
import { hasOracle, headerStamp, hostStamp, type OracleRead } from './host-stamps.js';
import type { HostSession } from './session.js';
export { PEER_SEEN_FRESH_MS, PeerSeen } from './peer-seen.js';
import type { ReceivedDiff } from './wire.js';

/** D: a heartbeat within this many blocks of the host's own tip is SYNCED, else CATCHING_UP (params.go). */
export const SYNC_DELTA_BLOCKS = 2n;
/** `evaluateSyncState`: no oracle or no header is ORACLE_UNAVAILABLE; |h_ref − tip| > D is CATCHING_UP. */
export function syncState(oracle: boolean, read: OracleRead, requested: bigint): SyncState {
  if (!oracle || !read.header) return SyncState.ORACLE_UNAVAILABLE;
  const local = read.header.height;
  const delta = requested > local ? requested - local : local - requested;
  return delta > SYNC_DELTA_BLOCKS ? SyncState.CATCHING_UP : SyncState.SYNCED;
}

/** Whether any of `diffs` carries a heartbeat addressed to a slot of this host (`hasOwnHeartbeatLocked`). */
export function hasOwnHeartbeat(session: HostSession, diffs: readonly ReceivedDiff[]): boolean {
  const n = BigInt(session.groupAddresses.length);
  return diffs.some((d) => d.txs.some((tx) => tx.tx.case === 'heartbeat') && session.ownSlots.includes(Number(d.nonce % n)));
}

export interface AckContext {
  chain: DevnetChainView;
  read: OracleRead;
  nowMs: number;
  /** The fault `subFloorStamps`: sign the ack's height below the floor. */
  belowFloor: boolean;
}

/** Acks the heartbeats of `applied` (the diffs this request newly applied) into the mempool; returns them. */
export function ackHeartbeats(session: HostSession, applied: readonly ReceivedDiff[], c: AckContext): DevshardTx[] {
  if (applied.length === 0 || session.replica.phase !== Phase.Active) return [];
  const n = BigInt(session.groupAddresses.length);
  const mine: { nonce: bigint; slot: number; hb: MsgHeartbeat }[] = [];
  for (const d of applied) {
    for (const tx of d.txs) {
      if (tx.tx.case === 'heartbeat') {
        const slot = Number(d.nonce % n);
        if (session.ownSlots.includes(slot)) mine.push({ nonce: d.nonce, slot, hb: tx.tx.value });
      } else if (tx.tx.case === 'heightAck') {
        // Claims from a slot (its signed acks), never the sequencer's heartbeats.
        session.peerSeen.markFresh(tx.tx.value.slotId, tx.tx.value.observedHeight, c.nowMs);
      }
    }
  }
  const oracle = hasOracle(c.chain);
  const out: DevshardTx[] = [];
  for (const item of mine) {
    const state = syncState(oracle, c.read, item.hb.observedHeight);
    let own = headerStamp({});
    if (state !== SyncState.ORACLE_UNAVAILABLE && c.read.header) {
      own = { height: c.read.header.height > 0n ? c.read.header.height : 0n, hash: c.read.header.hash };
      session.peerSeen.markFresh(item.slot, own.height, c.nowMs);
    }
    const stamp = hostStamp(session, item.nonce + 1n, own, { chain: c.chain, belowFloor: c.belowFloor });
    const ack = signHeightAck(
      create(MsgHeightAckSchema, {
        refNonce: item.nonce,
        slotId: item.slot,
        observedHeight: stamp.height,
        observedBlockHash: stamp.hash,
        syncState: state,
        peerSeen: session.peerSeen.bytes(c.nowMs),
      }),
      session.host.privateKey,
    );
    const tx = heightAckTx(ack);
    session.addToMempool(tx, session.latestNonce);
    out.push(tx);
  }
  return out;
}
