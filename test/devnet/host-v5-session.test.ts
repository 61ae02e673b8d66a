/**
 * A whole v5 session against the simulated hosts under `/devshard/v5` (tag "v5"), as a v5 gateway
 * runs one (zpoken/gonka@86cff503 devshard/user/heightsync_seed.go, heartbeat.go, session.go): seed
 * every host, chats streamed and not while the chain moves, an idle heartbeat span whose acks the
 * next diff carries, an error answer refunded by MsgErrorMiss, then finalize and the settlement every
 * host signs. Every root agrees. With DEVNET_V5_CAPTURE_DIR set, the requests and the settlement are
 * written for the realnet witness (`verify-diffs.mjs --version v5 --settlement`,
 * `verify-request.mjs --prefix /devshard/v5`). Real HTTP on loopback.
 */
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DevshardTxSchema, type DevshardTx } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import type { ErrorMissVote } from '../../src/protocol/gen/devshard/v1/tx_pb.js';
import { errorMissTx } from '../../src/protocol/error-miss.js';
import { forceHeightSyncTurnTx, heartbeatTx } from '../../src/protocol/height-sync.js';
import { buildSettlement, diffJson, InferenceStatus, Phase, settlementFileJson, settlementSignatureValid } from '../../src/protocol/index.js';
import { clearFaults } from '../network/fixtures.js';
import { MODEL, ProtocolClient, startTestNet, writeWitnessCaptures, type HostAnswer, type TestNet } from './host-protocol-client.js';

const chat = (i: number, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: 'user', content: `session ${i}` }], max_tokens: 64, ...extra });

describe('v5 hosts: a whole session, seed to settlement', () => {
  let net: TestNet;
  let client: ProtocolClient;
  let settlementFile = '';
  beforeAll(async () => {
    net = await startTestNet({ route: '/devshard/v5', oracle: true });
    client = new ProtocolClient(net);
    net.chainTip.height = 5000n;
  });
  afterAll(async () => {
    await net.close();
    const dir = process.env.DEVNET_V5_CAPTURE_DIR;
    if (dir) writeWitnessCaptures(net, client, dir, settlementFile);
  });

  it('seeds every host (no nonce spent), then serves chats while the chain moves', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await client.post(i, 'height-sync', '{}');
      expect(r.status).toBe(200);
      expect((JSON.parse(r.text) as { height_sync: { mainnet_height: number } }).height_sync.mainnet_height).toBe(5000);
    }
    for (let k = 1; k <= 6; k++) {
      net.chainTip.height += 2n;
      const a = await client.infer(chat(k, k % 2 === 0 ? { stream: true } : {}));
      expect(a.status, a.text).toBe(200);
    }
    expect(client.replica.floorAt(client.replica.latestNonce + 1n).height).toBe(5010n);
    expect(client.mismatches).toEqual([]);
  });

  it('an idle span: n heartbeats, the first opening a forced turn; the acks ride the next diffs; the turn completes', async () => {
    for (let i = 0; i < 3; i++) await client.sync(i);
    const s = client.replica.latestNonce;
    for (let k = 1n; k <= 3n; k++) {
      const nonce = s + k;
      const stamp = client.replica.referenceStamp(nonce);
      const hb = heartbeatTx({ slotsNum: 3, reason: 'quiet_session', ...(stamp ? { stamp } : {}) });
      client.next(k === 1n ? [forceHeightSyncTurnTx({ triggerNonce: nonce, slotsNum: 3, anchorK: 10n, reason: 'heartbeat' }), hb] : [hb]);
      expect((await client.sync(client.hostOfSlot(Number(nonce % 3n)))).status).toBe(200);
    }
    client.next([]);
    for (let i = 0; i < 3; i++) expect((await client.sync(i)).status).toBe(200);
    expect(client.replica.heightTurns!.record(s + 1n)!.state).toBe('complete');
    expect(client.mismatches).toEqual([]);
  });

  it('an error answer, voted a miss by the other hosts and refunded by MsgErrorMiss', async () => {
    const m = client.replica.latestNonce + 1n;
    net.faults.hosts = [client.executorHost(m)];
    net.faults.errorAnswerAfterChunks = 3;
    const bad: HostAnswer & { host: number } = await client.infer(chat(7, { stream: true }));
    clearFaults(net.faults);
    const finish = (bad.meta ?? []).map((b) => fromBinary(DevshardTxSchema, b)).find((t): t is DevshardTx => t.tx.case === 'finishInference' && t.tx.value.inferenceId === m)!;
    client.next([]);
    for (let i = 0; i < 3; i++) await client.sync(i);
    expect(client.replica.inference(m)!.status).toBe(InferenceStatus.Finished);
    const payload = new TextEncoder().encode(JSON.stringify({ events: [...bad.output.map((d) => `data: ${d}`), 'data: [DONE]'] }));
    const votes: ErrorMissVote[] = [];
    for (const i of [0, 1, 2].filter((h) => h !== bad.host)) {
      const body = JSON.stringify({ inference_id: Number(m), diffs: client.diffs.map(diffJson), finish_tx: Buffer.from(toBinary(DevshardTxSchema, finish)).toString('base64'), response_payload: Buffer.from(payload).toString('base64') });
      const v = JSON.parse((await client.post(i, 'verify-error-miss', body)).text) as { accept: boolean; signature: string; voter_slot: number };
      expect(v.accept).toBe(true);
      votes.push({ $typeName: 'devshard.v1.ErrorMissVote', voterSlot: v.voter_slot, accept: true, signature: new Uint8Array(Buffer.from(v.signature, 'base64')) });
    }
    client.next([errorMissTx(m, votes)]);
    for (let i = 0; i < 3; i++) expect((await client.sync(i)).status).toBe(200);
    expect(client.replica.inference(m)!.status).toBe(InferenceStatus.TimedOut);
    expect(client.mismatches).toEqual([]);
  });

  it('finalizes; every host signs the settlement root under the tag "v5"', async () => {
    await client.infer(chat(8));
    const s = await client.finalize();
    expect(client.replica.phase).toBe(Phase.Settlement);
    expect(client.mismatches).toEqual([]);
    const settlement = buildSettlement(client.replica, s);
    const signatures: Array<{ slotId: number; signature: Uint8Array }> = [];
    for (let i = 0; i < 3; i++) {
      const got = (await client.get(i, `signatures?nonce=${s}`)).json as { signatures: Record<string, string> };
      const sig = new Uint8Array(Buffer.from(got.signatures[String(i)]!, 'base64'));
      expect(settlementSignatureValid(settlement, net.escrow.slots[i]!.host, sig)).toBe(true);
      signatures.push({ slotId: i, signature: sig });
    }
    settlementFile = settlementFileJson(settlement, signatures);
    expect((JSON.parse(settlementFile) as { version: string }).version).toBe('v5');
  });
});
