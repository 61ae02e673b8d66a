/**
 * Host SSE events read and the model output made into the client's OpenAI shape.
 * Event shapes: gonka-ai/gonka 8a35022 devshard/transport/{server.go,types.go,client.go};
 * stripped fields: devshard/cmd/devshardctl/stream_rewrite.go (clientStrippedFields).
 */
import { describe, expect, it } from 'vitest';
import { chunksForClient, clientAsk, completionForClient } from '../../../src/network/devshard/client-output.js';
import { HostEventError, readHostEvent } from '../../../src/network/devshard/host-events.js';

const b64 = (bytes: number[]) => Buffer.from(bytes).toString('base64');

describe('host events', () => {
  it('reads a receipt: Go []byte fields as std base64, nonce and confirmed_at as integers', () => {
    const hash = Array.from({ length: 32 }, (_, i) => i);
    const ev = readHostEvent(JSON.stringify({ devshard_receipt: { state_hash: b64(hash), state_sig: b64([1, 2]), nonce: 7, receipt: b64([9]), confirmed_at: 1750000000 } }));
    expect(ev).toEqual({
      kind: 'receipt',
      receipt: { nonce: 7n, stateHash: Uint8Array.from(hash), stateSig: Uint8Array.from([1, 2]), receipt: Uint8Array.from([9]), confirmedAt: 1750000000n },
    });
  });

  it('a non-executor receipt carries only the nonce and state (omitempty fields absent)', () => {
    expect(readHostEvent('{"devshard_receipt":{"nonce":3}}')).toEqual({ kind: 'receipt', receipt: { nonce: 3n } });
  });

  it('a nonce above 2^53 is read exactly from the text', () => {
    const ev = readHostEvent('{"devshard_receipt":{"nonce":9007199254740993}}');
    expect(ev.kind === 'receipt' && ev.receipt.nonce).toBe(9007199254740993n);
  });

  it('reads the meta mempool as DevshardTx bytes; an empty meta is an empty mempool', () => {
    expect(readHostEvent(JSON.stringify({ devshard_meta: { mempool: [b64([0x12, 0x00]), b64([0x1a, 0x00])] } }))).toEqual({
      kind: 'meta',
      mempool: [Uint8Array.from([0x12, 0x00]), Uint8Array.from([0x1a, 0x00])],
    });
    expect(readHostEvent('{"devshard_meta":{}}')).toEqual({ kind: 'meta', mempool: [] });
  });

  it('refuses URL-safe or unpadded base64 (Go StdEncoding would fail the same bytes)', () => {
    expect(() => readHostEvent('{"devshard_receipt":{"nonce":1,"state_hash":"AQ"}}')).toThrow(HostEventError);
    expect(() => readHostEvent('{"devshard_meta":{"mempool":["-_8="]}}')).toThrow(/standard base64/);
  });

  it('[DONE] and model output are told apart from protocol events', () => {
    expect(readHostEvent('[DONE]')).toEqual({ kind: 'done' });
    expect(readHostEvent('{"id":"x","object":"chat.completion.chunk","choices":[]}').kind).toBe('output');
    expect(readHostEvent('not json')).toEqual({ kind: 'output', data: 'not json', value: undefined });
  });
});

describe('client output', () => {
  const hostChunk = {
    id: 'devshard-5-7',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'm',
    choices: [{ index: 0, delta: { content: 'Hi' }, logprobs: { content: [{ token: 'Hi', logprob: -0.1, top_logprobs: [1, 2, 3, 4, 5].map((n) => ({ token: `t${n}`, logprob: -n })) }] }, finish_reason: null, token_ids: [42] }],
  };
  const usageChunk = { id: 'devshard-5-7', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } };
  const send = (value: object, body: Record<string, unknown>) => chunksForClient(JSON.stringify(value), structuredClone(value), clientAsk(body)).map((d) => JSON.parse(d) as Record<string, any>);

  it('strips logprobs and token ids the client did not ask for', () => {
    const [out] = send(hostChunk, { stream: true });
    expect(out!.choices[0]).toEqual({ index: 0, delta: { content: 'Hi' }, finish_reason: null });
  });

  it('keeps logprobs a client asked for, cut to its top_logprobs', () => {
    const [out] = send(hostChunk, { stream: true, logprobs: true, top_logprobs: 2 });
    expect(out!.choices[0].logprobs.content[0].top_logprobs.map((t: { token: string }) => t.token)).toEqual(['t1', 't2']);
    expect(out!.choices[0].token_ids).toBeUndefined();
  });

  it('drops the usage chunk unless the client asked for include_usage', () => {
    expect(send(usageChunk, { stream: true })).toEqual([]);
    expect(send(usageChunk, { stream: true, stream_options: { include_usage: true } })).toEqual([usageChunk]);
  });

  it('passes a clean chunk through as the same text (no re-serialization)', () => {
    const clean = '{"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}';
    expect(chunksForClient(clean, JSON.parse(clean), clientAsk({ stream: true }))).toEqual([clean]);
  });

  it('a whole chat.completion sent to a streaming client becomes role, content and finish chunks (and usage when asked)', () => {
    const completion = {
      id: 'devshard-5-8',
      object: 'chat.completion',
      created: 2,
      model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello' }, finish_reason: 'stop', logprobs: null }],
      usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
    };
    const out = send(completion, { stream: true, stream_options: { include_usage: true } });
    expect(out.map((c) => c.choices[0]?.delta ?? 'usage')).toEqual([{ role: 'assistant', content: '' }, { content: 'Hello' }, {}, 'usage']);
    expect(out.every((c) => c.id === 'devshard-5-8' && c.object === 'chat.completion.chunk')).toBe(true);
    expect(out[2]!.choices[0].finish_reason).toBe('stop');
    expect(send(completion, { stream: true }).some((c) => c.usage)).toBe(false);
  });

  it('a non-streamed completion loses the host-only fields and keeps usage', () => {
    const value = { id: 'c', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'x' }, logprobs: { content: [] }, finish_reason: 'stop' }], prompt_token_ids: [1, 2], usage: { total_tokens: 3 } };
    const out = JSON.parse(completionForClient(JSON.stringify(value), structuredClone(value), clientAsk({}))) as Record<string, any>;
    expect(out.prompt_token_ids).toBeUndefined();
    expect(out.choices[0].logprobs).toBeUndefined();
    expect(out.usage).toEqual({ total_tokens: 3 });
  });
});
