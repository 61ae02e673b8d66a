/**
 * InferenceRequest as a devshard host decodes it (gonka-ai/gonka 8a35022
 * devshard/transport/types.go: DiffJSON{nonce, txs = proto DiffContent{nonce, txs}, user_sig,
 * post_state_root omitempty}, PayloadJSON, InferenceRequest{payload omitempty}).
 */
import { create, fromBinary } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { inferenceRequestJson, sessionUrl, wireTxs } from '../../../src/network/devshard/request-body.js';
import { DevshardTxSchema, DiffContentSchema } from '../../../src/protocol/gen/devshard/v1/diff_pb.js';
import { MsgStartInferenceSchema } from '../../../src/protocol/gen/devshard/v1/tx_pb.js';

const start = create(DevshardTxSchema, {
  tx: { case: 'startInference', value: create(MsgStartInferenceSchema, { inferenceId: 3n, promptHash: new Uint8Array(32).fill(7), model: 'm', inputLength: 10n, maxTokens: 20n, startedAt: 1_750_000_000n }) },
});

describe('InferenceRequest body', () => {
  it('carries each diff as {nonce, txs (DiffContent{nonce, txs} wire form), user_sig, post_state_root} in std base64', () => {
    const text = inferenceRequestJson(
      [
        { nonce: 2n, txs: [], userSig: new Uint8Array(65).fill(1) },
        { nonce: 3n, txs: [start], userSig: new Uint8Array(65).fill(2), postStateRoot: new Uint8Array(32).fill(9) },
      ],
      3n,
      { prompt: Buffer.from('{"model":"m","stream":true}'), model: 'm', inputLength: 27n, maxTokens: 20n, startedAt: 1_750_000_000n },
    );
    const body = JSON.parse(text) as { diffs: Array<Record<string, unknown>>; nonce: number; payload: Record<string, unknown> };
    expect(Object.keys(body)).toEqual(['diffs', 'nonce', 'payload']);
    expect(body.nonce).toBe(3);
    expect(Object.keys(body.diffs[0]!)).toEqual(['nonce', 'txs', 'user_sig']); // omitempty root
    const content = fromBinary(DiffContentSchema, Buffer.from(body.diffs[1]!.txs as string, 'base64'));
    expect(content.nonce).toBe(3n);
    expect(content.escrowId).toBe(''); // the wire form has no escrow id and no root
    expect(content.postStateRoot.length).toBe(0);
    expect(content.txs[0]!.tx.case).toBe('startInference');
    expect(Buffer.from(body.diffs[1]!.post_state_root as string, 'base64')).toEqual(Buffer.alloc(32, 9));
    expect(Buffer.from(body.payload.prompt as string, 'base64').toString()).toBe('{"model":"m","stream":true}');
    expect(body.payload).toMatchObject({ model: 'm', input_length: 27, max_tokens: 20, started_at: 1_750_000_000 });
  });

  it('writes integers above 2^53 exactly (Go reads uint64 number literals exactly)', () => {
    const text = inferenceRequestJson([], 9007199254740993n);
    expect(text).toBe('{"diffs":[],"nonce":9007199254740993}');
  });

  it('an empty diff still encodes its nonce (field 1) so the host reads the right nonce', () => {
    expect(Buffer.from(wireTxs({ nonce: 5n, txs: [] })).toString('hex')).toBe('0805');
  });

  it('routes under the legacy prefix by default, a configured prefix otherwise', () => {
    expect(sessionUrl('http://h:8080/', '42', 'chat/completions')).toBe('http://h:8080/v1/devshard/sessions/42/chat/completions');
    expect(sessionUrl('http://h', '42', 'signatures?nonce=9', '/devshard/v1')).toBe('http://h/devshard/v1/sessions/42/signatures?nonce=9');
  });
});
