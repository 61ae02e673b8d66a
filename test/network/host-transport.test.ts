import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createHostTransport, type HostTransport } from '../../src/network/host-transport.js';
import { HostError, type ChatChunk, type ChatResult } from '../../src/network/port.js';
import { createRequestSigner } from '../../src/network/signature.js';
import { chatBody, clearFaults, startNet, TOKEN_PRICE, type Net } from './fixtures.js';

let net: Net;
let slow: Net; // a net whose hosts pause 100 ms per token, to abort mid-stream
let transport: HostTransport;

beforeAll(async () => {
  [net, slow] = await Promise.all([startNet(), startNet({ tokenDelayMs: 100 })]);
  transport = createHostTransport({ stallTimeoutMs: 400, timeoutMs: 600 });
});
afterAll(async () => {
  await transport.close();
  await Promise.all([net.close(), slow.close()]);
});
afterEach(() => {
  clearFaults(net.faults);
});

function call(n: Net, nonce: number, body: Record<string, unknown>, signal = new AbortController().signal) {
  return transport.chat({
    escrowId: '1',
    nonce,
    hostUrl: n.hostUrl(nonce % 3),
    body,
    signer: createRequestSigner(n.creator.privateKeyHex),
    signal,
  });
}

async function drain(r: ChatResult): Promise<{ chunks: ChatChunk[]; error?: HostError }> {
  if (r.kind !== 'stream') throw new Error('expected a stream');
  const chunks: ChatChunk[] = [];
  try {
    for await (const c of r.chunks) chunks.push(c);
  } catch (err) {
    return { chunks, error: err as HostError };
  }
  return { chunks };
}

/** Waits until the host has recorded `n` requests for a slot (it records when the answer is over). */
async function hostRecorded(n: Net, slotId: number, requests: number) {
  for (let i = 0; i < 100; i++) {
    const t = n.sim.served('1').find((s) => s.slotId === slotId);
    if (t && t.requests >= requests) return t;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`host of slot ${slotId} never recorded ${requests} requests`);
}

describe('host transport', () => {
  it('gets a signed completion from the executor host', async () => {
    const r = await call(net, 0, chatBody());
    expect(r.kind).toBe('completion');
    if (r.kind !== 'completion') return;
    expect(r.completion.choices[0]!.finish_reason).toBe('stop');
    expect(r.completion.usage.total_tokens).toBeGreaterThan(0);
  });

  it('streams chunks, always asks the host for usage, and reports the host usage', async () => {
    const whole = await call(net, 3, chatBody());
    const r = await call(net, 6, chatBody({ stream: true }));
    const { chunks, error } = await drain(r);
    expect(error).toBeUndefined();
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.at(-1)!.choices).toEqual([]); // the usage chunk, passed through for the gateway to decide
    if (r.kind !== 'stream' || whole.kind !== 'completion') return;
    expect(r.usage()).toEqual(whole.completion.usage);
    const text = chunks.map((c) => (c.choices[0]?.delta.content as string | undefined) ?? '').join('');
    expect(text).toBe(whole.completion.choices[0]!.message.content);
  });

  it('a stalled stream fails with HostError stalled after the stall timeout, billing what was delivered', async () => {
    net.faults.stallAfterChunks = 3; // role chunk + 2 content tokens, then silence
    const started = Date.now();
    const { chunks, error } = await drain(await call(net, 1, chatBody({ stream: true })));
    expect(error).toBeInstanceOf(HostError);
    expect(error!.kind).toBe('stalled');
    expect(Date.now() - started).toBeGreaterThanOrEqual(380);
    expect(chunks.length).toBe(3);
    expect(error!.usageSoFar).toEqual({ prompt_tokens: 19, completion_tokens: 2, total_tokens: 21 });
    // The host saw the connection close and billed exactly the same.
    const t = await hostRecorded(net, 1, 1);
    expect(t.interrupted).toBe(1);
    expect(t.cost).toBe(21n * TOKEN_PRICE);
  });

  it('a stream closed without [DONE] fails with HostError truncated and the usage so far', async () => {
    net.faults.truncateAfterChunks = 4;
    const { chunks, error } = await drain(await call(net, 2, chatBody({ stream: true })));
    expect(error?.kind).toBe('truncated');
    expect(chunks.length).toBe(4);
    expect(error!.usageSoFar?.completion_tokens).toBe(3);
  });

  it('a host error status becomes HostError rejected with the status and the host message', async () => {
    Object.assign(net.faults, { failStatus: 503, failMessage: 'overloaded', hosts: [0] });
    const err = await call(net, 0, chatBody()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HostError);
    expect(err).toMatchObject({ kind: 'rejected', status: 503 });
    expect((err as HostError).message).toContain('overloaded');
    // Host 1 is not affected by the fault.
    expect((await call(net, 1, chatBody())).kind).toBe('completion');
  });

  it('a fault limited to the next request affects that request only', async () => {
    Object.assign(net.faults, { failStatus: 500, remaining: 1 });
    expect(await call(net, 0, chatBody()).catch((e: unknown) => e)).toMatchObject({ kind: 'rejected', status: 500 });
    expect((await call(net, 0, chatBody())).kind).toBe('completion');
  });

  it('rejects with the 421 of a host that is not the executor', async () => {
    const err = await transport
      .chat({ escrowId: '1', nonce: 1, hostUrl: net.hostUrl(0), body: chatBody(), signer: createRequestSigner(net.creator.privateKeyHex), signal: new AbortController().signal })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'rejected', status: 421 });
  });

  it('a non-stream answer that never comes is a timeout; a cut JSON body is truncated', async () => {
    net.faults.stallAfterChunks = 0;
    expect(await call(net, 0, chatBody()).catch((e: unknown) => e)).toMatchObject({ kind: 'timeout' });
    clearFaults(net.faults);
    net.faults.truncateAfterChunks = 0;
    expect(await call(net, 0, chatBody()).catch((e: unknown) => e)).toMatchObject({ kind: 'truncated' });
  });

  it('an unreachable host is HostError unreachable', async () => {
    const err = await transport
      .chat({ escrowId: '1', nonce: 0, hostUrl: 'http://127.0.0.1:9/hosts/0', body: chatBody(), signer: createRequestSigner(net.creator.privateKeyHex), signal: new AbortController().signal })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'unreachable' });
  });

  it('aborting the call cancels the host request: the host sees the connection close mid-stream', async () => {
    const full = await call(net, 0, chatBody());
    if (full.kind !== 'completion') throw new Error('expected a completion');
    expect(full.completion.usage.completion_tokens).toBeGreaterThan(10); // long enough to stop half-way
    const ac = new AbortController();
    const r = await call(slow, 0, chatBody({ stream: true }), ac.signal);
    if (r.kind !== 'stream') throw new Error('expected a stream');
    const got: ChatChunk[] = [];
    let error: HostError | undefined;
    try {
      for await (const c of r.chunks) {
        got.push(c);
        if (got.length === 3) ac.abort();
      }
    } catch (err) {
      error = err as HostError;
    }
    expect(error?.kind).toBe('aborted');
    expect(error!.usageSoFar).toEqual({ prompt_tokens: 19, completion_tokens: 2, total_tokens: 21 });
    const t = await hostRecorded(slow, 0, 1);
    expect(t.interrupted).toBe(1);
    // The host stopped within a token or two of the abort, not after the whole answer.
    expect(t.completionTokens).toBeLessThanOrEqual(4);
    expect(t.completionTokens).toBeLessThan(full.completion.usage.completion_tokens);
  });

  it('a consumer that stops reading closes the host connection too', async () => {
    const r = await call(slow, 1, chatBody({ stream: true }));
    if (r.kind !== 'stream') throw new Error('expected a stream');
    for await (const c of r.chunks) if (c.choices[0]?.delta.content) break;
    const t = await hostRecorded(slow, 1, 1);
    expect(t.interrupted).toBe(1);
    expect(t.completionTokens).toBeLessThanOrEqual(3);
    expect(r.usage().completion_tokens).toBe(1);
  });

  it('an already aborted signal never reaches the host', async () => {
    const ac = new AbortController();
    ac.abort();
    expect(await call(net, 0, chatBody(), ac.signal).catch((e: unknown) => e)).toMatchObject({ kind: 'aborted' });
  });
});
