/**
 * v5 hosts refuse what a Z5 host refuses, with its status and text (zpoken/gonka@86cff503
 * devshard/host/host.go `applyAndPersist`: a host with storage validates a diff before persisting
 * it, `validate diff nonce N: <err>`; reconcile.go for a nonce gap; transport/server.go: 500
 * `{"message": …}`; the state machine's texts come from the replica's v5 rules, pinned by Z5's own
 * golden vectors in test/protocol). The log plane refuses the whole diff and the nonce stays unused.
 * The fault `subFloorStamps` makes a host sign below the floor: its ConfirmStart and Finish are what
 * L0 refuses, and a client that composes best-effort leaves them out and goes on. Real HTTP.
 */
import { create, fromBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DevshardTxSchema, MsgHeightAckSchema, SyncState, type DevshardTx } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { MsgStartInferenceSchema } from '../../src/protocol/gen/devshard/v1/tx_pb.js';
import { forceHeightSyncTurnTx, heartbeatTx, heightAckTx, signHeightAck } from '../../src/protocol/height-sync.js';
import { canonicalPromptHash, InferenceStatus, signDiff, toHex } from '../../src/protocol/index.js';
import { inferenceRequestJson } from '../../src/network/devshard/request-body.js';
import { clearFaults, newKey } from '../network/fixtures.js';
import { MODEL, ProtocolClient, startTestNet, type HostAnswer, type TestNet } from './host-protocol-client.js';

const chat = (i: number) => ({ model: MODEL, messages: [{ role: 'user', content: `plane ${i}` }], max_tokens: 64 });

describe('v5 hosts: the log plane and the other refusals, as a Z5 host answers them', () => {
  let net: TestNet;
  let client: ProtocolClient;
  beforeAll(async () => {
    net = await startTestNet({ route: '/devshard/v5', oracle: true });
    client = new ProtocolClient(net);
    net.chainTip.height = 3000n;
    await client.infer(chat(1));
    await client.infer(chat(2)); // inference 1's stamped ConfirmStart and Finish: F = 3000 from nonce 3 on
    for (let i = 0; i < 3; i++) await client.sync(i);
  });
  afterAll(async () => net.close());

  /** POSTs `txs` as the next nonce (signed, no post_state_root) to host `i`, caught up first. */
  async function forge(i: number, txs: DevshardTx[], nonce = client.replica.latestNonce + 1n): Promise<{ status: number; text: string }> {
    const d = signDiff('42', nonce, txs, new Uint8Array(0), net.creator.privateKey);
    return client.post(i, 'chat/completions', inferenceRequestJson([...client.catchUp(i), d], nonce));
  }

  const hb = (nonce: bigint, o: { height?: bigint; slots?: number } = {}): DevshardTx => {
    const f = client.replica.floorAt(nonce);
    const height = o.height ?? f.height;
    return heartbeatTx({ slotsNum: o.slots ?? 3, reason: 'quiet_session', stamp: { height, hash: net.header(height).hash } });
  };

  it('L0: a host told to sign below the floor stamps 2999 under a floor of 3000; hosts refuse a diff carrying it, the nonce stays unused', async () => {
    const m = client.replica.latestNonce + 1n;
    expect(client.replica.floorAt(m).height).toBe(3000n);
    net.faults.hosts = [client.executorHost(m)];
    net.faults.subFloorStamps = true;
    const a = await client.infer(chat(3));
    clearFaults(net.faults);
    expect(a.status, a.text).toBe(200);
    const r = a.first!.devshard_receipt as Record<string, unknown>;
    expect([r.observed_height, r.observed_block_hash]).toEqual([2999, Buffer.from(net.header(2999n).hash).toString('base64')]);
    const bad = (a.meta ?? []).map((b) => fromBinary(DevshardTxSchema, b)).filter((t) => (t.tx.value as { inferenceId?: bigint }).inferenceId === m);
    expect(bad.map((t) => t.tx.case)).toEqual(['confirmStart', 'finishInference']);
    // what the replica (the gateway's tool) says of each: the log plane's refusal, before any diff
    expect(bad.map((t) => client.replica.stampRefusal(t)?.message)).toEqual([
      `INVALID(height_regression): confirm height 2999 < floor 3000 as of nonce ${m}`,
      `INVALID(height_regression): finish height 2999 < floor 3000 as of nonce ${m}`,
    ]);
    // a diff carrying it anyway: 500, the whole diff refused (the catch-up before it applied)
    const host = (client.executorHost(m) + 1) % 3;
    const refused = await forge(host, [bad[0]!]);
    expect(refused).toEqual({ status: 500, text: `{"message":"validate diff nonce ${m + 1n}: INVALID(height_regression): confirm height 2999 < floor 3000 as of nonce ${m}"}` });
    expect(net.sim.protocol.peek(host, '42', 'v5')!.latestNonce).toBe(client.replica.latestNonce);
    // the client composes best-effort: the bad pair is left out, and the session goes on
    const next = await client.infer(chat(4));
    expect(next.status, next.text).toBe(200);
    expect(next.nonce).toBe(m + 1n);
    expect(client.diffs[client.diffs.length - 1]!.txs.some((t) => (t.tx.value as { inferenceId?: bigint }).inferenceId === m)).toBe(false);
    expect(client.replica.inference(m)!.status).toBe(InferenceStatus.Pending);
    for (let i = 0; i < 3; i++) expect((await client.sync(i)).status).toBe(200);
    expect(client.mismatches).toEqual([]);
  });

  it('L0: a heartbeat stamped below the floor', async () => {
    const n = client.replica.latestNonce + 1n;
    const f = client.replica.floorAt(n).height;
    expect(await forge(0, [hb(n, { height: f - 1n })])).toEqual({
      status: 500,
      text: `{"message":"validate diff nonce ${n}: INVALID(height_regression): heartbeat height ${f - 1n} < floor ${f} as of nonce ${n}"}`,
    });
  });

  it('L1: a heartbeat whose slots_num is not the group size', async () => {
    const n = client.replica.latestNonce + 1n;
    expect(await forge(0, [hb(n, { slots: 2 })])).toEqual({ status: 500, text: `{"message":"validate diff nonce ${n}: INVALID(bad_framing): slots_num 2 != group 3"}` });
  });

  it('L2: an ack signed by a key that is not its slot\'s', async () => {
    const n = client.replica.latestNonce + 1n;
    const stranger = newKey();
    const ack = signHeightAck(
      create(MsgHeightAckSchema, { refNonce: n, slotId: Number(n % 3n), observedHeight: 3000n, observedBlockHash: net.header(3000n).hash, syncState: SyncState.SYNCED, peerSeen: Uint8Array.of(0) }),
      stranger.privateKey,
    );
    expect(await forge(0, [hb(n), heightAckTx(ack)])).toEqual({
      status: 500,
      text: `{"message":"validate diff nonce ${n}: INVALID(ack_sig_invalid): signer \\"${stranger.address}\\" != slot key \\"${net.escrow.slots[Number(n % 3n)]!.host}\\""}`,
    });
  });

  it('L3: an ack naming a nonce that carried no heartbeat', async () => {
    const n = client.replica.latestNonce + 1n;
    const host = net.hosts[client.hostOfSlot(1)]!;
    const ack = signHeightAck(create(MsgHeightAckSchema, { refNonce: 2n, slotId: 1, observedHeight: 3000n, observedBlockHash: net.header(3000n).hash, syncState: SyncState.SYNCED, peerSeen: Uint8Array.of(0) }), host.privateKey);
    expect(await forge(0, [heightAckTx(ack)])).toEqual({ status: 500, text: `{"message":"validate diff nonce ${n}: INVALID(ack_causality): ref_nonce 2 has no heartbeat"}` });
  });

  it('two forced turns in one diff; max_tokens below 64; a post_state_root that is not ours', async () => {
    const n = client.replica.latestNonce + 1n;
    const force = forceHeightSyncTurnTx({ triggerNonce: n, slotsNum: 3, anchorK: 10n, reason: 'heartbeat' });
    expect(await forge(1, [force, force])).toEqual({ status: 500, text: `{"message":"validate diff nonce ${n}: at most one MsgForceHeightSyncTurn per diff"}` });
    const prompt = new TextEncoder().encode(JSON.stringify(chat(63)));
    const start = create(DevshardTxSchema, {
      tx: { case: 'startInference', value: create(MsgStartInferenceSchema, { inferenceId: n, promptHash: canonicalPromptHash(prompt), model: MODEL, inputLength: BigInt(prompt.length), maxTokens: 63n, startedAt: 1n }) },
    });
    expect(await forge(1, [start])).toEqual({ status: 500, text: `{"message":"validate diff nonce ${n}: max_tokens below min_tokens floor: max_tokens 63, floor 64"}` });
    const wrong = signDiff('42', n, [], new Uint8Array(32), net.creator.privateKey);
    const r = await client.post(1, 'chat/completions', inferenceRequestJson([...client.catchUp(1), wrong], n));
    expect(r.status).toBe(500);
    expect(r.text).toMatch(new RegExp(`^\\{"message":"validate diff nonce ${n}: post_state_root does not match computed state root: diff ${toHex(new Uint8Array(32))}, computed [0-9a-f]{64}"\\}$`));
  });

  it('a diff beyond the next nonce: the gap the host cannot fill from its store', async () => {
    for (let i = 0; i < 3; i++) await client.sync(i);
    const n = client.replica.latestNonce;
    const d = signDiff('42', n + 3n, [], new Uint8Array(0), net.creator.privateKey);
    expect(await client.post(2, 'chat/completions', inferenceRequestJson([d], n + 3n))).toEqual({
      status: 500,
      text: `{"message":"cannot reconcile nonce gap from store: escrow 42 need ${n + 1n}..${n + 2n} have 0 record(s)"}`,
    });
  });

  it('after every refusal the refused nonce is still free: the honest next diff is accepted everywhere', async () => {
    const a: HostAnswer = await client.infer(chat(5));
    expect(a.status, a.text).toBe(200);
    for (let i = 0; i < 3; i++) expect((await client.sync(i)).status).toBe(200);
    expect(client.mismatches).toEqual([]);
    for (let i = 0; i < 3; i++) expect(net.sim.protocol.peek(i, '42', 'v5')!.latestNonce).toBe(client.replica.latestNonce);
  });
});
