/**
 * The simulated hosts speak the real devshard host protocol (gonka 8a35022 devshard/transport,
 * devshard/host): a session across 3 hosts over HTTP on loopback, driven by a protocol client made
 * of src/protocol + src/network/devshard (host-protocol-client.ts), under the newest version's route
 * (`/devshard/v4.1`, tag "v4.1"; every version's route: host-versions.test.ts).
 */
import { fromBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DevshardTxSchema } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { buildSettlement, InferenceStatus, Phase, recoverAddress, settlementFileJson, settlementSignatureValid, stateSignatureBytes } from '../../src/protocol/index.js';
import { MODEL, ProtocolClient, startTestNet, writeWitnessCaptures, type TestNet } from './host-protocol-client.js';

const chat = (i: number, extra: Record<string, unknown> = {}) => ({
  model: MODEL,
  messages: [{ role: 'user', content: `question number ${i}` }],
  max_tokens: 64,
  ...extra,
});

describe('simulated hosts: the real host protocol', () => {
  let net: TestNet;
  let client: ProtocolClient;

  let settlementFile = '';

  beforeAll(async () => {
    net = await startTestNet();
    client = new ProtocolClient(net);
  });
  afterAll(async () => {
    await net.close();
    // HOSTPROTO_CAPTURE_DIR: the session's requests in ../shared/tools/realnet's capture format
    // (one file per request, as its tap.mjs writes them) and the settlement file, for
    // verify-request.mjs / verify-diffs.mjs / verify-finalize.mjs.
    const dir = process.env.HOSTPROTO_CAPTURE_DIR;
    if (dir) writeWitnessCaptures(net, client, dir, settlementFile);
  });

  it('serves a session of streamed and non-streamed inferences across 3 hosts with catch-up', async () => {
    const answers = [];
    for (let i = 0; i < 8; i++) {
      const a = await client.infer(chat(i, i % 2 === 0 ? { stream: true } : {}));
      expect(a.status, a.text).toBe(200);
      expect(a.host).toBe(Number(a.nonce % 3n));
      // receipt first, the executor's receipt signed, output ending in [DONE], meta last
      expect(a.events[0]!.kind).toBe('receipt');
      expect(a.events.at(-1)!.kind).toBe('meta');
      expect(a.receipt!.nonce).toBe(a.nonce);
      expect(a.receipt!.receipt).toBeDefined();
      expect(a.done).toBe(true);
      // state_sig over StateSignatureContent by the host
      expect(recoverAddress(stateSignatureBytes(a.receipt!.stateHash!, '42', a.nonce), a.receipt!.stateSig!)).toBe(net.hosts[a.host]!.address);
      const first = JSON.parse(a.output[0]!) as { id: string; object: string };
      expect(first.id).toBe(`devshard-42-${a.nonce}`);
      expect(first.object).toBe(i % 2 === 0 ? 'chat.completion.chunk' : 'chat.completion');
      // meta holds this host's ConfirmStart and Finish
      const kinds = a.meta!.map((b) => fromBinary(DevshardTxSchema, b).tx.case);
      expect(kinds).toContain('confirmStart');
      expect(kinds).toContain('finishInference');
      answers.push(a);
    }
    expect(client.mismatches).toEqual([]);
    // ConfirmStart and Finish of inferences 1..7 were taken into later diffs: finished, costs charged
    const r = client.replica;
    for (let id = 1n; id <= 7n; id++) expect(r.inference(id)?.status, `inference ${id}`).toBe(InferenceStatus.Finished);
    expect(r.inference(8n)?.status).toBe(InferenceStatus.Pending);
    const costs = r.hostStats().map((h) => h.cost);
    expect(costs.every((c) => c > 0n)).toBe(true);
    const finished = [...Array(7).keys()].map((k) => r.inference(BigInt(k + 1))!);
    for (const rec of finished) {
      expect(rec.actualCost).toBe((rec.inputTokens + rec.outputTokens) * 3n);
      expect(rec.outputTokens).toBeGreaterThan(0n);
    }
    // mempools: what diffs applied is gone; the latest executor still holds inference 8's txs
    const m = (await client.get(client.executorHost(8n), 'mempool')).json as { txs: string[] };
    const ids = m.txs.map((t) => fromBinary(DevshardTxSchema, Buffer.from(t, 'base64')).tx.value as { inferenceId: bigint });
    expect(ids.map((x) => x.inferenceId)).toEqual([8n, 8n]);
  });

  it('GET diffs returns what the host applied with the root after each', async () => {
    const i = client.executorHost(client.replica.latestNonce);
    const res = await client.get(i, `diffs?from=1&to=${client.replica.latestNonce}`);
    expect(res.status).toBe(200);
    const list = res.json as Array<{ diff: { nonce: number; txs: string; user_sig: string; post_state_root: string }; state_hash: string }>;
    expect(list.map((d) => d.diff.nonce)).toEqual(client.diffs.map((d) => Number(d.nonce)));
    for (const d of list) expect(d.state_hash).toBe(Buffer.from(client.roots.get(BigInt(d.diff.nonce))!).toString('base64'));
    const sent = client.captured.find((c) => c.url.includes('/hosts/1/') && c.body.includes('"nonce":1,'))!;
    expect(sent.body).toContain(JSON.stringify(list[0]!.diff).slice(1, -1));
    expect((await client.get(i, 'diffs?from=x&to=2')).text).toBe(`{"message":"invalid 'from' parameter"}`);
    expect((await client.get(i, 'signatures')).text).toBe(`{"message":"missing 'nonce' parameter"}`);
  });

  it('finalizes, every host signs the settlement nonce, and the settlement checks', async () => {
    const fNonce = client.replica.latestNonce + 1n;
    const s = await client.finalize();
    expect(s).toBe(fNonce + 3n);
    expect(client.replica.phase).toBe(Phase.Settlement);
    expect(client.mismatches).toEqual([]);
    const settlement = buildSettlement(client.replica, s);
    expect(settlement.stateRoot).toEqual(client.roots.get(s));
    const signatures: Array<{ slotId: number; signature: Uint8Array }> = [];
    for (let i = 0; i < 3; i++) {
      const before = (await client.get(i, `signatures?nonce=${s + 1n}`)).json;
      expect(before).toEqual({ signatures: {} });
      const got = (await client.get(i, `signatures?nonce=${s}`)).json as { signatures: Record<string, string> };
      expect(Object.keys(got.signatures)).toEqual([String(i)]);
      const sig = new Uint8Array(Buffer.from(got.signatures[String(i)]!, 'base64'));
      expect(settlementSignatureValid(settlement, net.escrow.slots[i]!.host, sig)).toBe(true);
      signatures.push({ slotId: i, signature: sig });
    }
    settlementFile = settlementFileJson(settlement, signatures);
    const file = JSON.parse(settlementFile) as { escrow_id: string; version: string; host_stats: unknown[]; signatures: unknown[] };
    expect(file.escrow_id).toBe('42');
    // the settlement names the tag the session hashed: the route's version
    expect(file.version).toBe(net.version);
    expect(file.host_stats).toHaveLength(3);
    expect(file.signatures).toHaveLength(3);
    // a request with no new diff still gets a receipt at the latest nonce
    const late = await client.sync(0);
    expect(late.receipt!.nonce).toBe(s);
  });
});

describe('simulated hosts: refusals with gonka texts', () => {
  let net: TestNet;
  let client: ProtocolClient;

  beforeAll(async () => {
    net = await startTestNet();
    client = new ProtocolClient(net);
    expect((await client.infer(chat(1))).status).toBe(200);
  });
  afterAll(async () => net.close());

  const body = () => '{"diffs":[],"nonce":0}';

  it('auth: missing headers, drift, bad hex, a group member, a stranger', async () => {
    expect(await client.post(0, 'chat/completions', body(), { headers: { 'content-type': 'application/json' } })).toEqual({ status: 401, text: '{"message":"missing auth headers"}' });
    expect(await client.post(0, 'chat/completions', body(), { tsOffset: -31 })).toEqual({ status: 401, text: '{"message":"timestamp drift 31s exceeds maximum 30s"}' });
    expect((await client.post(0, 'chat/completions', body(), { tsOffset: 30 })).status).toBe(200);
    expect(await client.post(0, 'chat/completions', body(), { headers: { 'x-devshard-signature': 'abc', 'x-devshard-timestamp': '1' } })).toEqual({
      status: 401,
      text: '{"message":"invalid signature hex"}',
    });
    expect(await client.post(0, 'chat/completions', body(), { headers: { 'x-devshard-signature': 'ab', 'x-devshard-timestamp': 'x' } })).toEqual({
      status: 401,
      text: '{"message":"invalid timestamp"}',
    });
    expect((await client.post(0, 'chat/completions', body(), { headers: { 'x-devshard-signature': 'abab', 'x-devshard-timestamp': String(Math.floor(Date.now() / 1000)) } })).text).toBe(
      '{"message":"recover address: invalid signature length: 2"}',
    );
    const member = { privateKey: net.hosts[1]!.privateKey, privateKeyHex: '', pubKey: net.hosts[1]!.pubKey, address: net.hosts[1]!.address };
    expect(await client.post(0, 'chat/completions', body(), { key: member })).toEqual({ status: 403, text: '{"message":"restricted to escrow owner"}' });
    const { newKey } = await import('../network/fixtures.js');
    expect(await client.post(0, 'chat/completions', body(), { key: newKey() })).toEqual({ status: 403, text: '{"message":"sender not in group"}' });
    expect(await client.post(0, 'verify-timeout', '{}', { key: member })).toEqual({ status: 403, text: '{"message":"restricted to escrow owner"}' });
  });

  it('body: invalid json, undecodable diff', async () => {
    const bad = await client.post(0, 'chat/completions', '{"diffs":');
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.text).message).toMatch(/^invalid json: /);
    const undecodable = await client.post(0, 'chat/completions', '{"diffs":[{"nonce":2,"txs":"/w==","user_sig":""}],"nonce":2}');
    expect(undecodable.status).toBe(400);
    expect(JSON.parse(undecodable.text).message).toMatch(/^decode request: diff 0: unmarshal diff content: /);
  });

  it('diffs: a gap, a wrong root, a wrong diff signer; the host state does not move', async () => {
    const latest = client.replica.latestNonce; // 1, only host 1 saw it
    // host 0 has nothing: sending it nonce 2 alone is a gap
    client.next([]);
    const d2 = client.catchUp(0).filter((d) => d.nonce === latest + 1n);
    const { inferenceRequestJson } = await import('../../src/network/devshard/request-body.js');
    const gap = await client.post(0, 'chat/completions', inferenceRequestJson(d2, 2n));
    expect(gap).toEqual({ status: 500, text: '{"message":"apply diff nonce 2: invalid nonce: must be sequential: expected 1, got 2"}' });
    // a wrong root for nonce 3 (after 1 and 2 as catch-up): 1 and 2 apply, 3 is refused
    const { signDiff } = await import('../../src/protocol/index.js');
    const wrong = signDiff('42', 3n, [], new Uint8Array(32).fill(7), net.creator.privateKey);
    const r = await client.post(0, 'chat/completions', inferenceRequestJson([...client.catchUp(0), { ...wrong, txs: [] }], 3n));
    expect(r.status).toBe(500);
    expect(JSON.parse(r.text).message).toMatch(/^apply diff nonce 3: post_state_root does not match computed state root: /);
    expect(net.sim.protocol.peek(0, '42')!.latestNonce).toBe(2n);
    const other = signDiff('42', 3n, [], new Uint8Array(0), net.hosts[2]!.privateKey);
    const s = await client.post(0, 'chat/completions', inferenceRequestJson([{ ...other, txs: [] }], 3n));
    expect(s.status).toBe(500);
    expect(JSON.parse(s.text).message).toBe(`apply diff nonce 3: invalid user signature: expected ${net.creator.address}, got ${net.hosts[2]!.address}`);
    // the honest continuation is still accepted
    const ok = await client.sync(0);
    expect(ok.status).toBe(200);
    expect(ok.receipt!.nonce).toBe(2n);
    expect(client.mismatches).toEqual([]);
  });

  it('payload: a prompt that is not the one the Start hashed', async () => {
    const a = await client.infer(chat(9), { payload: (p) => ({ ...p, prompt: new TextEncoder().encode(JSON.stringify(chat(10))) }) });
    expect(a).toMatchObject({ status: 500, text: '{"message":"prompt does not match hash in StartInference"}' });
    const b = await client.infer(chat(11), { payload: (p) => ({ ...p, maxTokens: p.maxTokens + 1n }) });
    expect(b.status).toBe(500);
    expect(JSON.parse(b.text).message).toBe('request payload does not match StartInference params: max_tokens 65 vs 64');
  });
});
