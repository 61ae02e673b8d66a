/**
 * The simulated hosts under `/devshard/v5` stamp what they sign as a Z5 host does
 * (zpoken/gonka@86cff503 devshard/host/host.go `signReceipt`, `RunExecution`; heightsync.go
 * `referenceStamp`; transport/server.go `HandleInference`; heightsync/anchor.go, origin_signing.go):
 * the executor's receipt and ConfirmStart carry its oracle's tip (ExecutorReceiptContent 9/10, under
 * its signature), lifted to the floor when the floor stands higher; the Finish carries its stamp
 * under proposer_sig; the first SSE event carries a signed `height_sync` Anchor beside
 * `devshard_receipt` on the cadence's nonces. Every diff the client composes from them is accepted
 * with the same roots (real HTTP on loopback).
 */
import { create, fromBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heightSyncOriginBytes, type HeightSyncSection } from '../../src/devnet/hosts/protocol/height-section.js';
import { DevshardTxSchema, ExecutorReceiptContentSchema } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { MsgFinishInferenceSchema, type MsgConfirmStart, type MsgFinishInference } from '../../src/protocol/gen/devshard/v1/tx_pb.js';
import { executorReceiptBytes, finishProposerBytes, InferenceStatus, recoverAddress, toHex } from '../../src/protocol/index.js';
import { MODEL, ProtocolClient, startTestNet, type HostAnswer, type TestNet } from './host-protocol-client.js';

const chat = (i: number, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: 'user', content: `stamp ${i}` }], max_tokens: 64, ...extra });
const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

function metaTx<C extends 'confirmStart' | 'finishInference'>(a: HostAnswer, kind: C, id: bigint) {
  for (const b of a.meta ?? []) {
    const tx = fromBinary(DevshardTxSchema, b);
    if (tx.tx.case === kind && tx.tx.value.inferenceId === id) return tx.tx.value as C extends 'confirmStart' ? MsgConfirmStart : MsgFinishInference;
  }
  return undefined;
}

describe('v5 hosts: stamps on receipts, ConfirmStart and Finish; the height_sync section', () => {
  let net: TestNet;
  let client: ProtocolClient;
  beforeAll(async () => {
    net = await startTestNet({ route: '/devshard/v5', oracle: true });
    client = new ProtocolClient(net);
  });
  afterAll(async () => net.close());

  it('stamps the receipt with the chain tip: the executor signs ExecutorReceiptContent with fields 9/10, ConfirmStart and Finish carry them', async () => {
    expect(client.tag).toBe('v5');
    expect(client.replica.rules).toBe('v5');
    net.chainTip.height = 1000n;
    const tip = net.header(1000n);
    const a = await client.infer(chat(1, { stream: true }));
    expect(a.status, a.text).toBe(200);
    const r = a.first!.devshard_receipt as Record<string, unknown>;
    // Go struct order, the stamp last
    expect(Object.keys(r)).toEqual(['state_sig', 'state_hash', 'nonce', 'receipt', 'confirmed_at', 'observed_height', 'observed_block_hash']);
    expect(r.observed_height).toBe(1000);
    expect(r.observed_block_hash).toBe(b64(tip.hash));
    const rec = client.replica.inference(1n)!;
    const signed = executorReceiptBytes({ ...rec, inferenceId: 1n, escrowId: '42', confirmedAt: BigInt(r.confirmed_at as number), observedHeight: 1000n, observedBlockHash: tip.hash });
    expect(fromBinary(ExecutorReceiptContentSchema, signed).observedHeight).toBe(1000n);
    expect(recoverAddress(signed, a.receipt!.receipt!)).toBe(net.hosts[a.host]!.address);
    const confirm = metaTx(a, 'confirmStart', 1n)!;
    expect([confirm.observedHeight, toHex(confirm.observedBlockHash), b64(confirm.executorSig)]).toEqual([1000n, toHex(tip.hash), r.receipt]);
    const finish = metaTx(a, 'finishInference', 1n)!;
    expect([finish.observedHeight, toHex(finish.observedBlockHash)]).toEqual([1000n, toHex(tip.hash)]);
    expect(recoverAddress(finishProposerBytes(finish), finish.proposerSig)).toBe(net.hosts[a.host]!.address);
    // the proposer signature covers the stamp: another height no longer recovers to the executor
    expect(recoverAddress(finishProposerBytes(create(MsgFinishInferenceSchema, { ...finish, observedHeight: 999n })), finish.proposerSig)).not.toBe(net.hosts[a.host]!.address);
  });

  it('the next diffs take ConfirmStart and Finish with their stamps; every host applies them with our roots; the floor rises to 1000', async () => {
    net.chainTip.height = 1003n;
    const a = await client.infer(chat(2));
    expect(a.status, a.text).toBe(200);
    expect((a.first!.devshard_receipt as Record<string, unknown>).observed_height).toBe(1003);
    const rec1 = client.replica.inference(1n)!;
    expect(rec1.status).toBe(InferenceStatus.Finished);
    expect(client.replica.floorAt(3n).height).toBe(1000n);
    for (let i = 0; i < 3; i++) expect((await client.sync(i)).status).toBe(200);
    expect(client.mismatches).toEqual([]);
  });

  it('a host whose oracle lags the floor stamps the floor, with the floor block\'s hash (never below F)', async () => {
    await client.infer(chat(3));
    await client.sync(0);
    const f = client.replica.floorAt(client.replica.latestNonce + 1n);
    expect(f.height).toBe(1003n);
    net.chainTip.height = 990n; // the oracle behind what the log already holds
    const a = await client.infer(chat(4));
    const r = a.first!.devshard_receipt as Record<string, unknown>;
    expect(r.observed_height).toBe(1003);
    expect(r.observed_block_hash).toBe(b64(net.header(1003n).hash));
    expect(metaTx(a, 'finishInference', a.nonce)!.observedHeight).toBe(1003n);
    net.chainTip.height = 1010n;
    for (let i = 0; i < 3; i++) expect((await client.sync(i)).status).toBe(200);
    expect(client.mismatches).toEqual([]);
  });

  it('height_sync: a signed Anchor beside devshard_receipt at session start and on the K=10 cadence, omitted on other nonces', async () => {
    const first = client.captured.find((c) => c.body.includes('"nonce":1,') && c.url.endsWith('/chat/completions'))!;
    const event = JSON.parse(first.response.split('\n\n')[0]!.slice(6)) as Record<string, unknown>;
    expect(Object.keys(event)).toEqual(['devshard_receipt', 'height_sync']);
    const s = event.height_sync as HeightSyncSection;
    expect(Object.keys(s)).toEqual([
      'chain_id',
      'proof_type',
      'mainnet_height',
      'mainnet_block_hash_hex',
      'timestamp_unix_ms',
      'direction',
      'originator_sender_id',
      'originator_timestamp_unix_ms',
      'sender_signature',
    ]);
    const executor = net.hosts[client.executorHost(1n)]!;
    expect(s).toMatchObject({ chain_id: 'gonka-testnet', proof_type: 'height-anchor-v1', mainnet_height: 1000, mainnet_block_hash_hex: toHex(net.header(1000n).hash), direction: 'response', originator_sender_id: executor.address });
    expect(s.originator_timestamp_unix_ms).toBe(s.timestamp_unix_ms);
    expect(Math.abs(s.timestamp_unix_ms - first.at)).toBeLessThan(5_000);
    // signed over "heightsync.origin.v1" ‖ InferenceHeightSyncSection fields 1-7 (chain_id is not covered)
    expect(recoverAddress(heightSyncOriginBytes(s), new Uint8Array(Buffer.from(s.sender_signature!, 'base64')))).toBe(executor.address);
    expect(recoverAddress(heightSyncOriginBytes({ ...s, chain_id: 'other' }), new Uint8Array(Buffer.from(s.sender_signature!, 'base64')))).toBe(executor.address);
    expect(recoverAddress(heightSyncOriginBytes({ ...s, mainnet_height: 1001 }), new Uint8Array(Buffer.from(s.sender_signature!, 'base64')))).not.toBe(executor.address);
    // requests for nonces 2-9 got none
    const later = client.captured.filter((c) => c.url.endsWith('/chat/completions') && c.status === 200 && (JSON.parse(c.body) as { nonce: number }).nonce >= 2);
    expect(later.length).toBeGreaterThan(3);
    for (const c of later) expect(Object.keys(JSON.parse(c.response.split('\n\n')[0]!.slice(6)) as object)).toEqual(['devshard_receipt']);
    // nonce 10 is the periodic sync turn (K = 10, one slot)
    while (client.replica.latestNonce < 9n) await client.infer(chat(Number(client.replica.latestNonce) + 1));
    const tenth = await client.infer(chat(10));
    expect(tenth.nonce).toBe(10n);
    expect(Object.keys(tenth.first!)).toEqual(['devshard_receipt', 'height_sync']);
    expect((tenth.first!.height_sync as HeightSyncSection).mainnet_height).toBe(1010);
    const eleventh = await client.infer(chat(11));
    expect(Object.keys(eleventh.first!)).toEqual(['devshard_receipt']);
  });

  it('force_height_sync_anchor asks for one off cadence', async () => {
    expect(client.replica.latestNonce).toBe(11n);
    const first = (r: { text: string }) => Object.keys(JSON.parse(r.text.split('\n\n')[0]!.slice(6)) as object);
    expect(first(await client.post(0, 'chat/completions', '{"diffs":[],"nonce":11}'))).toEqual(['devshard_receipt']);
    expect(first(await client.post(0, 'chat/completions', '{"diffs":[],"nonce":11,"force_height_sync_anchor":true}'))).toEqual(['devshard_receipt', 'height_sync']);
  });
});

describe('v5 hosts without a block oracle', () => {
  let net: TestNet;
  let client: ProtocolClient;
  beforeAll(async () => {
    net = await startTestNet({ route: '/devshard/v5' });
    client = new ProtocolClient(net);
  });
  afterAll(async () => net.close());

  it('sign unstamped receipts and Finishes, send no height_sync, and refuse the seed RPC', async () => {
    const a = await client.infer(chat(1));
    expect(a.status, a.text).toBe(200);
    expect(Object.keys(a.first!)).toEqual(['devshard_receipt']);
    expect(Object.keys(a.first!.devshard_receipt as object)).toEqual(['state_sig', 'state_hash', 'nonce', 'receipt', 'confirmed_at']);
    const finish = metaTx(a, 'finishInference', 1n)!;
    expect([finish.observedHeight, finish.observedBlockHash.length]).toEqual([0n, 0]);
    expect((await client.post(0, 'height-sync', '{}')).text).toBe('{"message":"height-sync seed RPC disabled"}');
    await client.infer(chat(2));
    expect(client.mismatches).toEqual([]);
  });
});
