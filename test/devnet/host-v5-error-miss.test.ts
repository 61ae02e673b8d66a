/**
 * v5's error-miss on the simulated hosts (zpoken/gonka@86cff503 devshard/transport/server.go
 * `HandleVerifyErrorMiss`; host/timeout.go `VerifyErrorMiss`; common/completionapi/terminal_error.go
 * `IsTerminalErrorResponse`): an executor whose streamed answer ends in an error still signs its
 * Finish; the other hosts, given that Finish and the answer bytes it pins, vote accept over
 * ErrorMissVoteContent; MsgErrorMiss with the votes refunds the inference on every host. Every
 * reject cause and refusal with its exact answer. Also v5's verify-timeout answering its recovery
 * txs on a reject. Real HTTP on loopback.
 */
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DevshardTxSchema, type DevshardTx } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import type { ErrorMissVote } from '../../src/protocol/gen/devshard/v1/tx_pb.js';
import { errorMissTx } from '../../src/protocol/error-miss.js';
import { diffJson, errorMissVoteBytes, InferenceStatus, recoverAddress, sha256, toHex } from '../../src/protocol/index.js';
import { clearFaults, newKey } from '../network/fixtures.js';
import { MODEL, ProtocolClient, startTestNet, type HostAnswer, type TestNet } from './host-protocol-client.js';

const chat = (i: number, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: 'user', content: `miss ${i}` }], max_tokens: 64, ...extra });
const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

/** The bytes a streamed answer's Finish pins: `{"events":[…"data: <event>"…]}` (output.ts, responseprocessor.go). */
const streamedPayload = (a: HostAnswer): Uint8Array => new TextEncoder().encode(JSON.stringify({ events: [...a.output.map((d) => `data: ${d}`), 'data: [DONE]'] }));

const finishOf = (a: HostAnswer, id: bigint): DevshardTx => (a.meta ?? []).map((b) => fromBinary(DevshardTxSchema, b)).find((t) => t.tx.case === 'finishInference' && t.tx.value.inferenceId === id)!;

describe('v5 hosts: verify-error-miss', () => {
  let net: TestNet;
  let client: ProtocolClient;
  let good: HostAnswer & { nonce: bigint; host: number };
  let bad: HostAnswer & { nonce: bigint; host: number };
  beforeAll(async () => {
    net = await startTestNet({ route: '/devshard/v5', oracle: true });
    client = new ProtocolClient(net);
  });
  afterAll(async () => net.close());

  const ask = (i: number, o: { id: bigint; finish?: DevshardTx; payload?: Uint8Array }) =>
    client.post(
      i,
      'verify-error-miss',
      JSON.stringify({
        inference_id: Number(o.id),
        diffs: client.diffs.map(diffJson),
        ...(o.finish ? { finish_tx: b64(toBinary(DevshardTxSchema, o.finish)) } : {}),
        ...(o.payload ? { response_payload: b64(o.payload) } : {}),
      }),
    );

  it('a host with no session bound answers 404 before looking at the signature', async () => {
    expect(await client.post(0, 'verify-error-miss', '{}')).toEqual({ status: 404, text: '{"message":"session not found"}' });
    expect(await client.post(0, 'verify-error-miss', '{}', { headers: {} })).toEqual({ status: 404, text: '{"message":"session not found"}' });
  });

  it('an executor whose stream ends in an error signs its Finish over what it wrote', async () => {
    good = await client.infer(chat(1, { stream: true }));
    expect(good.status).toBe(200);
    const m = client.replica.latestNonce + 1n;
    net.faults.hosts = [client.executorHost(m)];
    net.faults.errorAnswerAfterChunks = 2;
    bad = await client.infer(chat(2, { stream: true }));
    clearFaults(net.faults);
    expect(bad.status).toBe(200);
    expect(bad.output.at(-1)).toBe('{"error":{"code":"model_error","message":"simulated model failure","type":"server_error"}}');
    expect(bad.done).toBe(true);
    const finish = finishOf(bad, m).tx.value as { responseHash: Uint8Array; outputTokens: bigint };
    expect(toHex(finish.responseHash)).toBe(toHex(sha256(streamedPayload(bad))));
    // both Finishes into the log: every host holds them as Finished
    client.next([]);
    for (let i = 0; i < 3; i++) expect((await client.sync(i)).status).toBe(200);
    expect(client.replica.inference(1n)!.status).toBe(InferenceStatus.Finished);
    expect(client.replica.inference(m)!.status).toBe(InferenceStatus.Finished);
  });

  it('the other hosts vote accept, signed over ErrorMissVoteContent; MsgErrorMiss refunds the inference everywhere', async () => {
    const id = bad.nonce;
    const finish = finishOf(bad, id);
    const hash = (finish.tx.value as { responseHash: Uint8Array }).responseHash;
    const voters = [0, 1, 2].filter((i) => i !== bad.host);
    const votes: ErrorMissVote[] = [];
    for (const i of voters) {
      const r = await ask(i, { id, finish, payload: streamedPayload(bad) });
      expect(r.status, r.text).toBe(200);
      const v = JSON.parse(r.text) as { accept: boolean; signature: string; voter_slot: number };
      expect(Object.keys(v)).toEqual(['accept', 'signature', 'voter_slot']);
      expect(v.accept).toBe(true);
      const slot = net.escrow.slots.findIndex((s) => s.host === net.hosts[i]!.address);
      expect(v.voter_slot).toBe(slot);
      const sig = new Uint8Array(Buffer.from(v.signature, 'base64'));
      expect(recoverAddress(errorMissVoteBytes('42', id, true, hash), sig)).toBe(net.hosts[i]!.address);
      votes.push({ $typeName: 'devshard.v1.ErrorMissVote', voterSlot: v.voter_slot, accept: true, signature: sig });
    }
    const before = client.replica.balance;
    const cost = client.replica.inference(id)!.actualCost;
    client.next([errorMissTx(id, votes)]);
    expect(client.diffs.at(-1)!.txs.map((t) => t.tx.case)).toEqual(['errorMiss']);
    for (let i = 0; i < 3; i++) expect((await client.sync(i)).status).toBe(200);
    expect(client.mismatches).toEqual([]);
    expect(client.replica.inference(id)!.status).toBe(InferenceStatus.TimedOut);
    expect(client.replica.balance).toBe(before + cost - 10n); // the cost back, less this nonce's fee
  });

  it('rejects with Z5\'s causes: not_error_body, no_payload, hash_mismatch, no_finish_tx', async () => {
    const voter = (good.host + 1) % 3;
    const goodFinish = finishOf(good, 1n);
    expect(await ask(voter, { id: 1n, finish: goodFinish, payload: streamedPayload(good) })).toEqual({ status: 200, text: '{"accept":false,"voter_slot":0,"reject_cause":"not_error_body"}' });
    expect(await ask(voter, { id: 1n, finish: goodFinish })).toEqual({ status: 200, text: '{"accept":false,"voter_slot":0,"reject_cause":"no_payload"}' });
    expect(await ask(voter, { id: 1n, finish: goodFinish, payload: new TextEncoder().encode('{"events":["data: {\\"error\\":{}}"]}') })).toEqual({
      status: 200,
      text: '{"accept":false,"voter_slot":0,"reject_cause":"hash_mismatch"}',
    });
    expect(await ask(voter, { id: 1n })).toEqual({ status: 200, text: '{"accept":false,"voter_slot":0,"reject_cause":"no_finish_tx"}' });
    expect(await ask(voter, { id: 999n, finish: goodFinish, payload: streamedPayload(good) })).toEqual({ status: 200, text: '{"accept":false,"voter_slot":0,"reject_cause":"no_finish_tx"}' });
  });

  it('refuses a bad body, a bad catch-up diff, a member and a stranger', async () => {
    expect(await client.post(0, 'verify-error-miss', '{"inference_id":"1"}')).toEqual({ status: 400, text: '{"message":"invalid json"}' });
    expect(await client.post(0, 'verify-error-miss', '{"inference_id":1,"diffs":[{"nonce":1,"txs":"AAAA"}]}')).toEqual({
      status: 400,
      text: expect.stringMatching(/^\{"message":"decode diff 0: unmarshal diff content: .+"\}$/) as unknown as string,
    });
    const member = { ...newKey(), address: net.hosts[1]!.address, privateKey: net.hosts[1]!.privateKey, pubKey: net.hosts[1]!.pubKey };
    expect(await client.post(0, 'verify-error-miss', '{}', { key: member })).toEqual({ status: 403, text: '{"message":"restricted to escrow owner"}' });
    expect(await client.post(0, 'verify-error-miss', '{}', { key: newKey() })).toEqual({ status: 403, text: '{"message":"sender not in group"}' });
  });

  it('verify-timeout under v5 answers a reject with the recovery txs it holds for the inference', async () => {
    const a = await client.infer(chat(3));
    const r = await client.post(a.host, 'verify-timeout', JSON.stringify({ inference_id: Number(a.nonce), reason: 'refused', diffs: client.diffs.map(diffJson) }));
    expect(r.status, r.text).toBe(200);
    const v = JSON.parse(r.text) as { accept: boolean; voter_slot: number; mempool: string[] };
    expect(Object.keys(v)).toEqual(['accept', 'voter_slot', 'mempool']);
    expect(v.mempool.map((t) => fromBinary(DevshardTxSchema, Buffer.from(t, 'base64')).tx.case)).toEqual(['confirmStart', 'finishInference']);
  });
});
