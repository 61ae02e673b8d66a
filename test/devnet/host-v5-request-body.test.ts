/**
 * What a v5 host reads from a `chat/completions` body and who may send it (zpoken/gonka@86cff503
 * devshard/transport/envelope.go `UnwrapInferenceRequestBody`; server.go `HandleInference`;
 * server/routes.go `withOwnerChat` and the host manager's `BindOwnerChat`): the JSON request, or a
 * protobuf InferenceRequestEnvelope carrying it (a request-leg height_sync is accepted and only
 * audited); each refusal with its status and text. Real HTTP on loopback.
 */
import { create } from '@bufbuild/protobuf';
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inferenceRequestJson, type InferencePayload } from '../../src/network/devshard/request-body.js';
import { DevshardTxSchema } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { MsgStartInferenceSchema } from '../../src/protocol/gen/devshard/v1/tx_pb.js';
import { canonicalPromptHash, requestHeaderMessage, signMessage } from '../../src/protocol/index.js';
import { newKey } from '../network/fixtures.js';
import { MODEL, ProtocolClient, startTestNet, type TestNet } from './host-protocol-client.js';

const chat = (i: number) => ({ model: MODEL, messages: [{ role: 'user', content: `body ${i}` }], max_tokens: 64 });

/** InferenceRequestEnvelope{1 schema_version, 2 height_sync (a request-leg Anchor), 3 inference_request_json}. */
function envelope(json: string | undefined, o: { section?: boolean } = {}): Uint8Array {
  const w = new BinaryWriter();
  w.tag(1, WireType.Varint).int32(1);
  if (o.section) {
    const s = new BinaryWriter();
    s.tag(1, WireType.Varint).int32(1).tag(2, WireType.Varint).int64(1000n).tag(3, WireType.LengthDelimited).string('ab'.repeat(32)).tag(4, WireType.Varint).int64(1n);
    w.tag(2, WireType.LengthDelimited).bytes(s.finish());
  }
  if (json !== undefined) w.tag(3, WireType.LengthDelimited).bytes(new TextEncoder().encode(json));
  return w.finish();
}

describe('v5 hosts: the request body and its sender', () => {
  let net: TestNet;
  let client: ProtocolClient;
  beforeAll(async () => {
    net = await startTestNet({ route: '/devshard/v5', oracle: true });
    client = new ProtocolClient(net);
  });
  afterAll(async () => net.close());

  /** POSTs raw bytes signed by `key` (the signature covers the exact bytes sent, an envelope included). */
  async function postBytes(i: number, body: Uint8Array, o: { key?: { privateKey: Uint8Array }; type?: string } = {}): Promise<{ status: number; text: string }> {
    const ts = BigInt(Math.floor(client.now() / 1000));
    const sig = signMessage(requestHeaderMessage('42', body, ts), (o.key ?? net.creator).privateKey);
    const res = await fetch(`${net.hostUrl(i)}/devshard/v5/sessions/42/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': o.type ?? 'application/x-protobuf', 'x-devshard-signature': Buffer.from(sig).toString('hex'), 'x-devshard-timestamp': String(ts) },
      body,
    });
    return { status: res.status, text: await res.text() };
  }

  it('a protobuf InferenceRequestEnvelope with a request-leg Anchor is served as its JSON would be', async () => {
    const prompt = new TextEncoder().encode(JSON.stringify(chat(1)));
    const startedAt = BigInt(Math.floor(client.now() / 1000));
    const start = create(MsgStartInferenceSchema, { inferenceId: 1n, promptHash: canonicalPromptHash(prompt), model: MODEL, inputLength: BigInt(prompt.length), maxTokens: 64n, startedAt });
    client.next([create(DevshardTxSchema, { tx: { case: 'startInference', value: start } })]);
    const host = client.executorHost(1n);
    const payload: InferencePayload = { prompt, model: MODEL, inputLength: BigInt(prompt.length), maxTokens: 64n, startedAt };
    const r = await postBytes(host, envelope(inferenceRequestJson(client.catchUp(host), 1n, payload), { section: true }));
    expect(r.status, r.text).toBe(200);
    const a = client.absorb(host, r.status, r.text);
    expect(a.receipt!.receipt).toBeDefined();
    expect(a.done).toBe(true);
    expect(client.mismatches).toEqual([]);
  });

  it('refuses what Z5 refuses, 400 decode body: …', async () => {
    const text = (s: string) => ({ status: 400, text: JSON.stringify({ message: s }) });
    expect(await postBytes(0, new TextEncoder().encode(' \n\t '))).toEqual(text('decode body: empty body'));
    expect(await postBytes(0, new TextEncoder().encode('{"message":{},"diffs":[],"nonce":1}'), { type: 'application/json' })).toEqual(
      text('decode body: deprecated JSON inference envelope (top-level "message") is not supported; use protobuf InferenceRequestEnvelope / InferenceResponseEnvelope'),
    );
    expect(await postBytes(0, Uint8Array.of(0x0a, 0x05, 0x01))).toEqual(text('decode body: decode inference request envelope protobuf: proto: cannot parse invalid wire-format data'));
    expect(await postBytes(0, envelope(undefined))).toEqual(text('decode body: inference_request_json is empty'));
    const legacy = await postBytes(0, new TextEncoder().encode('{"diffs":[],"nonce":"1"}'), { type: 'application/json' });
    expect(legacy.status).toBe(400);
    expect(legacy.text).toMatch(/^\{"message":"decode body: decode legacy inference request json: .+"\}$/);
    const inner = await postBytes(0, envelope('{"diffs":{}}'));
    expect(inner.status).toBe(400);
    expect(inner.text).toMatch(/^\{"message":"decode body: decode inference request json: .+"\}$/);
    const diff = await postBytes(0, new TextEncoder().encode('{"diffs":[{"nonce":1,"txs":"AAAA","user_sig":""}],"nonce":1}'), { type: 'application/json' });
    expect(diff.status).toBe(400);
    expect(diff.text).toMatch(/^\{"message":"decode request: diff 0: unmarshal diff content: .+"\}$/);
  });

  it('only the escrow owner may send chat, members included (403 restricted to escrow owner)', async () => {
    const body = new TextEncoder().encode('{"diffs":[],"nonce":1}');
    const member = { ...newKey(), privateKey: net.hosts[2]!.privateKey };
    expect(await postBytes(0, body, { key: member, type: 'application/json' })).toEqual({ status: 403, text: '{"message":"restricted to escrow owner"}' });
    expect(await postBytes(0, body, { key: newKey(), type: 'application/json' })).toEqual({ status: 403, text: '{"message":"restricted to escrow owner"}' });
    expect(await postBytes(0, body, { type: 'application/json' })).toMatchObject({ status: 200 });
  });
});
