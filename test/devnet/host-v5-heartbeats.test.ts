/**
 * v5 hosts answer heartbeats as a Z5 host does (zpoken/gonka@86cff503 devshard/host/heightsync.go
 * `maybeAckHeartbeatsLocked`, `buildHeightAckLocked`; heightsync/ack_signing.go; syncstate.go;
 * peerseen.go): a heartbeat span of payload-less diffs, the first opening a forced turn, each diff
 * sent to host nonce mod n; each host puts a MsgHeightAck signed over "heightsync.ack.v1" ‖ the ack
 * into the mempool it answers with; the acks go into the next diff, which every host applies, and
 * the turn completes. Real HTTP on loopback.
 */
import { create, fromBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DevshardTxSchema, SyncState, type MsgHeightAck } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { forceHeightSyncTurnTx, heartbeatTx, heightAckSignedBytes, recoverAckSigner } from '../../src/protocol/height-sync.js';
import { Phase, recoverAddress, toHex } from '../../src/protocol/index.js';
import { MODEL, ProtocolClient, startTestNet, type HostAnswer, type TestNet } from './host-protocol-client.js';

const chat = (i: number) => ({ model: MODEL, messages: [{ role: 'user', content: `beat ${i}` }], max_tokens: 64 });

const acksIn = (a: HostAnswer): MsgHeightAck[] =>
  (a.meta ?? []).map((b) => fromBinary(DevshardTxSchema, b)).flatMap((tx) => (tx.tx.case === 'heightAck' ? [tx.tx.value] : []));

describe('v5 hosts: heartbeats answered with signed acks', () => {
  let net: TestNet;
  let client: ProtocolClient;
  beforeAll(async () => {
    net = await startTestNet({ route: '/devshard/v5', oracle: true });
    client = new ProtocolClient(net);
    net.chainTip.height = 2000n;
    await client.infer(chat(1));
    await client.infer(chat(2)); // takes inference 1's stamped ConfirmStart and Finish: the floor is 2000
    for (let i = 0; i < 3; i++) await client.sync(i);
  });
  afterAll(async () => net.close());

  /** One span: n payload-less diffs, each with a heartbeat at F(nonce), the first opening a forced turn. */
  async function span(reason = 'quiet_session'): Promise<Array<HostAnswer & { nonce: bigint; host: number }>> {
    const n = 3;
    const s = client.replica.latestNonce;
    const out = [];
    for (let k = 1; k <= n; k++) {
      const nonce = s + BigInt(k);
      const stamp = client.replica.referenceStamp(nonce);
      const hb = heartbeatTx({ slotsNum: n, reason, ...(stamp ? { stamp } : {}) });
      client.next(k === 1 ? [forceHeightSyncTurnTx({ triggerNonce: nonce, slotsNum: n, anchorK: 10n, reason: 'heartbeat' }), hb] : [hb]);
      const host = client.hostOfSlot(Number(nonce % BigInt(n)));
      const a = await client.sync(host);
      expect(a.status, a.text).toBe(200);
      out.push({ ...a, nonce, host });
    }
    return out;
  }

  it('each addressed host answers its heartbeat with one MsgHeightAck in its devshard_meta, stamped max(tip, F(n+1)) and signed', async () => {
    expect(client.replica.floorAt(client.replica.latestNonce + 1n).height).toBe(2000n);
    net.chainTip.height = 2001n;
    const answers = await span();
    for (const a of answers) {
      const acks = acksIn(a);
      expect(acks).toHaveLength(1);
      const ack = acks[0]!;
      const slot = Number(a.nonce % 3n);
      expect(ack.refNonce).toBe(a.nonce);
      expect(ack.slotId).toBe(slot);
      expect(ack.observedHeight).toBe(2001n);
      expect(toHex(ack.observedBlockHash)).toBe(toHex(net.header(2001n).hash));
      // the heartbeat said 2000 (the floor), the host's tip is 2001: within D = 2 blocks
      expect(ack.syncState).toBe(SyncState.SYNCED);
      // peer_seen: ceil(3/8) = 1 byte, this host's own slot fresh (its own tip)
      expect(ack.peerSeen.length).toBe(1);
      expect(ack.peerSeen[0]! & (1 << slot)).not.toBe(0);
      expect(recoverAckSigner(ack)).toBe(net.hosts[a.host]!.address);
      expect(recoverAddress(heightAckSignedBytes(ack), ack.hostSig)).toBe(net.escrow.slots[slot]!.host);
      // a forced window: the response carries the host's Anchor
      expect(Object.keys(a.first!)).toEqual(['devshard_receipt', 'height_sync']);
    }
  });

  it('the acks folded into the next diff apply on every host with our roots, and the turn completes', async () => {
    const turnStart = client.replica.latestNonce - 2n;
    client.next([]);
    for (let i = 0; i < 3; i++) expect((await client.sync(i)).status).toBe(200);
    expect(client.mismatches).toEqual([]);
    // each ack rides the next diff composed after its answer (the span does not wait for acks), the last one the flush
    const applied = client.diffs.filter((d) => d.nonce > turnStart).flatMap((d) => d.txs.filter((t) => t.tx.case === 'heightAck').map((t) => [d.nonce, (t.tx.value as MsgHeightAck).refNonce]));
    expect(applied).toEqual([
      [turnStart + 1n, turnStart],
      [turnStart + 2n, turnStart + 1n],
      [turnStart + 3n, turnStart + 2n],
    ]);
    expect(client.replica.heightTurns!.record(turnStart)!.state).toBe('complete');
    // applied acks leave the mempools
    for (let i = 0; i < 3; i++) expect(((await client.get(i, 'mempool')).json as { txs: string[] }).txs).toEqual([]);
  });

  it('a heartbeat more than D = 2 blocks from the tip is acked CATCHING_UP; an ack a host applied marks that slot in peer_seen', async () => {
    net.chainTip.height = 2010n;
    const answers = await span();
    const rows = answers.map((a) => {
      const hb = client.diffs.find((d) => d.nonce === a.nonce)!.txs.find((t) => t.tx.case === 'heartbeat')!.tx.value as { observedHeight: bigint };
      const ack = acksIn(a)[0]!;
      return [hb.observedHeight, ack.observedHeight, ack.syncState];
    });
    // the third heartbeat stands on the floor the first ack (at 2010, in the second diff) raised
    expect(rows).toEqual([
      [2001n, 2010n, SyncState.CATCHING_UP],
      [2001n, 2010n, SyncState.CATCHING_UP],
      [2010n, 2010n, SyncState.SYNCED],
    ]);
    // host 0 applied the previous turn's acks of slots 1 and 2 (and its own): all three bits
    const ofHost0 = answers.find((a) => a.host === 0)!;
    expect(acksIn(ofHost0)[0]!.peerSeen).toEqual(Uint8Array.of(0b111));
  });

  it('an ack is stamped at the floor when the oracle lags it; none is made for a heartbeat applied with the finalize', async () => {
    client.next([]);
    for (let i = 0; i < 3; i++) await client.sync(i);
    expect(client.replica.floorAt(client.replica.latestNonce + 1n).height).toBe(2010n);
    net.chainTip.height = 2005n;
    const answers = await span();
    for (const a of answers) expect([acksIn(a)[0]!.observedHeight, toHex(acksIn(a)[0]!.observedBlockHash)]).toEqual([2010n, toHex(net.header(2010n).hash)]);
    client.next([]);
    for (let i = 0; i < 3; i++) await client.sync(i);
    expect(client.mismatches).toEqual([]);
    // a heartbeat and MsgFinalizeRound reach its host in one request: applied, but no longer Active, so no ack
    const nonce = client.replica.latestNonce + 1n;
    const stamp = client.replica.referenceStamp(nonce);
    client.next([forceHeightSyncTurnTx({ triggerNonce: nonce, slotsNum: 3, anchorK: 10n, reason: 'heartbeat' }), heartbeatTx({ slotsNum: 3, reason: 'quiet_session', ...(stamp ? { stamp } : {}) })]);
    client.next([create(DevshardTxSchema, { tx: { case: 'finalizeRound', value: {} } })]);
    const a = await client.sync(client.hostOfSlot(Number(nonce % 3n)));
    expect(a.status, a.text).toBe(200);
    expect(client.replica.phase).toBe(Phase.Finalizing);
    expect(acksIn(a)).toEqual([]);
    expect(client.mismatches).toEqual([]);
  });
});
