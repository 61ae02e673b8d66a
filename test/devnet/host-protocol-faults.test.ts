/**
 * Faults of the simulated hosts under the real protocol (refuse, stall, die mid-stream, withhold a
 * signature) and the timeout path they lead to: verify-timeout votes from the other hosts
 * (gonka 8a35022 devshard/host/timeout.go, transport/server.go HandleVerifyTimeout), then
 * MsgTimeoutInference in a later diff that every host applies.
 */
import { create, fromBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DevshardTxSchema } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { MsgTimeoutInferenceSchema, TimeoutReason, TimeoutVoteSchema } from '../../src/protocol/gen/devshard/v1/tx_pb.js';
import { InferenceStatus, recoverAddress, timeoutVoteBytes } from '../../src/protocol/index.js';
import { diffJson } from '../../src/protocol/index.js';
import { MODEL, ProtocolClient, startTestNet, type TestNet } from './host-protocol-client.js';
import { clearFaults } from '../network/fixtures.js';

const chat = (i: number, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: 'user', content: `q${i}` }], max_tokens: 32, ...extra });

describe('simulated hosts: faults and timeouts under the real protocol', () => {
  let net: TestNet;
  let client: ProtocolClient;

  beforeAll(async () => {
    net = await startTestNet();
    client = new ProtocolClient(net);
  });
  afterAll(async () => net.close());

  /** Votes of the hosts other than the executor; returns the MsgTimeoutInference to put in a diff. */
  async function votes(id: bigint, reason: 'refused' | 'execution', payloadJson?: unknown) {
    const executor = client.executorHost(id);
    const out = [];
    for (const i of [0, 1, 2].filter((h) => h !== executor)) {
      const body = JSON.stringify({ inference_id: Number(id), reason, ...(payloadJson ? { payload: payloadJson } : {}), diffs: client.diffs.map(diffJson) });
      const r = await client.post(i, 'verify-timeout', body);
      expect(r.status, r.text).toBe(200);
      out.push({ host: i, ...(JSON.parse(r.text) as { accept: boolean; signature?: string; voter_slot: number }) });
    }
    return out;
  }

  it('refuse: the executor answers an error and applies nothing; the others vote the refusal timeout', async () => {
    expect((await client.infer(chat(1))).status).toBe(200); // nonce 1, host 1
    net.faults.hosts = [client.executorHost(2n)];
    net.faults.failStatus = 503;
    net.faults.remaining = 1;
    const a = await client.infer(chat(2));
    expect(a).toMatchObject({ status: 503, text: '{"message":"simulated host fault"}' });
    expect(net.sim.protocol.peek(a.host, '42')!.latestNonce).toBe(0n);
    clearFaults(net.faults);
    const payload = (() => {
      const p = new TextEncoder().encode(JSON.stringify(chat(2)));
      const rec = client.replica.inference(2n)!;
      return { prompt: Buffer.from(p).toString('base64'), model: MODEL, input_length: Number(rec.inputLength), max_tokens: Number(rec.maxTokens), started_at: Number(rec.startedAt) };
    })();
    // too early: rejected, no signature
    const early = await votes(2n, 'refused', payload);
    expect(early.map((v) => v.accept)).toEqual([false, false]);
    expect(early[0]).toEqual({ host: early[0]!.host, accept: false, voter_slot: 0 });
    // 61 s later (refusal_timeout 60): accepted, each vote signed over TimeoutVoteContent
    net.clock.offsetMs = 61_000;
    const vs = await votes(2n, 'refused', payload);
    for (const v of vs) {
      expect(v.accept).toBe(true);
      expect(v.voter_slot).toBe(v.host);
      expect(recoverAddress(timeoutVoteBytes('42', 2n, TimeoutReason.REFUSED, true), Buffer.from(v.signature!, 'base64'))).toBe(net.hosts[v.host]!.address);
    }
    const timeout = create(DevshardTxSchema, {
      tx: {
        case: 'timeoutInference',
        value: create(MsgTimeoutInferenceSchema, {
          inferenceId: 2n,
          reason: TimeoutReason.REFUSED,
          votes: vs.map((v) => create(TimeoutVoteSchema, { voterSlot: v.voter_slot, accept: true, signature: Buffer.from(v.signature!, 'base64') })),
        }),
      },
    });
    client.pending.set('timeout-2', timeout);
    const b = await client.infer(chat(3)); // nonce 3 carries the timeout
    expect(b.status, b.text).toBe(200);
    expect(client.replica.inference(2n)!.status).toBe(InferenceStatus.TimedOut);
    expect(client.replica.hostStats()[2]!.missed).toBe(1);
    expect(client.mismatches).toEqual([]);
  });

  it('verify-timeout refusals: unknown reason, unknown inference, wrong state', async () => {
    expect(await client.post(0, 'verify-timeout', '{"inference_id":1,"reason":"slow"}')).toEqual({ status: 400, text: '{"message":"unknown timeout reason: slow"}' });
    expect(await client.post(0, 'verify-timeout', '{"inference_id":')).toEqual({ status: 400, text: '{"message":"invalid json"}' });
    expect(await client.post(0, 'verify-timeout', '{"inference_id":99,"reason":"refused"}')).toEqual({ status: 500, text: '{"message":"inference 99 not found"}' });
    expect(await client.post(0, 'verify-timeout', '{"inference_id":1,"reason":"refused"}')).toEqual({ status: 500, text: '{"message":"inference 1: expected pending, got 2"}' });
  });

  it('stall: receipt, then silence; ConfirmStart goes in, then the execution timeout is voted and applied', async () => {
    const nonce = client.replica.latestNonce + 1n;
    net.faults.hosts = [client.executorHost(nonce)];
    net.faults.stallAfterChunks = 1;
    net.faults.remaining = 1;
    // Silence the client waits out before it gives up: well over any pause of a busy machine between two writes.
    const a = await client.inferPartial(chat(4, { stream: true }), 1000);
    clearFaults(net.faults);
    expect(a.aborted).toBe(true);
    expect(a.receipt!.receipt).toBeDefined();
    expect(a.output).toHaveLength(1);
    expect(a.meta).toBeUndefined();
    // the ConfirmStart from the receipt goes into the next diff: Started
    expect((await client.infer(chat(5))).status).toBe(200);
    expect(client.replica.inference(nonce)!.status).toBe(InferenceStatus.Started);
    expect((await votes(nonce, 'execution')).map((v) => v.accept)).toEqual([false, false]);
    net.clock.offsetMs += 121_000; // execution_timeout 120
    const vs = await votes(nonce, 'execution');
    expect(vs.map((v) => v.accept)).toEqual([true, true]);
    client.pending.set(
      'timeout-exec',
      create(DevshardTxSchema, {
        tx: {
          case: 'timeoutInference',
          value: create(MsgTimeoutInferenceSchema, {
            inferenceId: nonce,
            reason: TimeoutReason.EXECUTION,
            votes: vs.map((v) => create(TimeoutVoteSchema, { voterSlot: v.voter_slot, accept: true, signature: Buffer.from(v.signature!, 'base64') })),
          }),
        },
      }),
    );
    expect((await client.infer(chat(6))).status).toBe(200);
    expect(client.replica.inference(nonce)!.status).toBe(InferenceStatus.TimedOut);
    expect(client.mismatches).toEqual([]);
  });

  it('die mid-stream: the connection is cut after 2 chunks, no [DONE], no meta, no Finish', async () => {
    const nonce = client.replica.latestNonce + 1n;
    const host = client.executorHost(nonce);
    net.faults.hosts = [host];
    net.faults.truncateAfterChunks = 2;
    net.faults.remaining = 1;
    const a = await client.inferPartial(chat(7, { stream: true }), 2000);
    clearFaults(net.faults);
    expect(a.aborted).toBe(false);
    expect(a.receipt).toBeDefined();
    expect(a.output).toHaveLength(2);
    expect(a.done).toBe(false);
    expect(a.meta).toBeUndefined();
    const m = (await client.get(host, 'mempool')).json as { txs: string[] };
    expect(m.txs.map((t) => fromBinary(DevshardTxSchema, Buffer.from(t, 'base64')).tx.case)).toEqual(['confirmStart']);
  });

  it('withhold a signature: the receipt has no state_sig and signatures?nonce=N has no entry', async () => {
    const nonce = client.replica.latestNonce + 1n;
    const host = client.executorHost(nonce);
    net.faults.hosts = [host];
    net.faults.withholdSignature = true;
    net.faults.remaining = 1;
    const a = await client.infer(chat(8));
    clearFaults(net.faults);
    expect(a.status).toBe(200);
    expect(a.receipt!.stateHash).toBeDefined();
    expect(a.receipt!.stateSig).toBeUndefined();
    expect((await client.get(host, `signatures?nonce=${nonce}`)).json).toEqual({ signatures: {} });
    const b = await client.sync(host);
    expect(b.receipt!.stateSig).toBeDefined();
    expect(client.mismatches).toEqual([]);
  });

  it('a retried request gets the receipt again and the answer it already gave (no second execution)', async () => {
    const a = await client.infer(chat(9));
    expect(a.status).toBe(200);
    const again = await client.post(a.host, 'chat/completions', client.captured.at(-1)!.body);
    const b = client.absorb(a.host, again.status, again.text);
    expect(b.receipt!.nonce).toBe(a.nonce);
    expect(b.receipt!.receipt).toBeDefined();
    expect(b.output).toEqual(a.output);
    expect(b.done).toBe(true);
    expect(client.mismatches).toEqual([]);
  });

  it("execution timeout: rejected while the executor's mempool holds the Finish (asked as a peer)", async () => {
    const a = await client.infer(chat(10));
    expect(a.status).toBe(200);
    // hold the Finish back: the next diff carries the ConfirmStart only
    for (const [k, tx] of client.pending) if (tx.tx.case === 'finishInference') client.pending.delete(k);
    expect((await client.infer(chat(11))).status).toBe(200);
    expect(client.replica.inference(a.nonce)!.status).toBe(InferenceStatus.Started);
    net.clock.offsetMs += 121_000;
    expect((await votes(a.nonce, 'execution')).map((v) => v.accept)).toEqual([false, false]);
    expect(client.mismatches).toEqual([]);
  });
});
