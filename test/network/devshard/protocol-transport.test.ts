/**
 * The devshard protocol transport (src/network/devshard/protocol-transport.ts) against the simulated
 * hosts on loopback: nonces stay contiguous when a host refuses, a nonce that never reached the
 * transport is filled with an empty diff, calls arriving out of order are composed in nonce order,
 * a host whose state is not ours fails the call with a clear error.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallController } from '../../../src/network/call-signal.js';
import { createProtocolTransport, type ProtocolTransport } from '../../../src/network/devshard/protocol-transport.js';
import { DevshardSession } from '../../../src/network/devshard/session.js';
import { HostError, type ChatCall, type ChatResult } from '../../../src/network/port.js';
import { createRequestSigner } from '../../../src/network/signature.js';
import { InferenceStatus, toHex } from '../../../src/protocol/index.js';
import { BIND, MODEL, SESSION, startTestNet, type TestNet } from '../../devnet/host-protocol-client.js';
import { clearFaults } from '../fixtures.js';
import { holdHostRequests } from '../../helpers/waits.js';

describe('devshard protocol transport against the simulated hosts', () => {
  let net: TestNet;
  let transport: ProtocolTransport;

  beforeAll(async () => {
    net = await startTestNet();
    transport = createProtocolTransport({
      escrowOf: (id) =>
        id === net.escrow.id
          ? { escrowId: id, creator: net.escrow.creator, amount: net.escrow.amount!, slots: net.escrow.slots, session: SESSION, bind: BIND }
          : undefined,
      orderWaitMs: 300,
      timeoutSweepMs: 0,
      // the hosts' clock (tests move it); requests are signed and started_at set with it
      now: () => Date.now() + net.clock.offsetMs,
    });
  });
  afterAll(async () => {
    await transport.close();
    await net.close();
  });

  const signer = () => createRequestSigner(toHex(net.creator.privateKey));
  const call = (nonce: number, stream: boolean): ChatCall => ({
    escrowId: net.escrow.id,
    nonce,
    hostUrl: '',
    body: { model: MODEL, messages: [{ role: 'user', content: `q${nonce}` }], max_tokens: 16, stream },
    signer: signer(),
    signal: new CallController().signal,
  });
  const consume = async (r: ChatResult): Promise<number> => {
    if (r.kind === 'completion') return r.completion.usage.total_tokens;
    for await (const _ of r.chunks) void _;
    return r.usage().total_tokens;
  };

  it('a refused call still uses its nonce; the next request carries it as catch-up', async () => {
    expect(await consume(await transport.chat(call(1, false)))).toBeGreaterThan(0);
    net.faults.failStatus = 503;
    net.faults.remaining = 1;
    const err = await transport.chat(call(2, true)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HostError);
    expect((err as HostError).status).toBe(503);
    clearFaults(net.faults);
    const s = transport.session(net.escrow.id)!;
    expect(s.latestNonce).toBe(2n);
    // nonce 3's executor (slot 0) has acknowledged nothing: it still needs 1 and 2
    expect(s.catchUp(net.escrow.slots[0]!.url).map((d) => d.nonce)).toEqual([1n, 2n]);
    expect(await consume(await transport.chat(call(3, true)))).toBeGreaterThan(0);
    // nonce 2's executor learns nonce 2 (unexecuted) with nonce 5 and answers with our root
    expect(await consume(await transport.chat(call(4, false)))).toBeGreaterThan(0);
    expect(await consume(await transport.chat(call(5, false)))).toBeGreaterThan(0);
    expect(s.replica.inference(1n)?.status).toBe(InferenceStatus.Finished);
    expect(s.replica.inference(3n)?.status).toBe(InferenceStatus.Finished);
  });

  it('a nonce that never reached the transport becomes an empty diff; out-of-order calls are composed in order', async () => {
    const s = transport.session(net.escrow.id)!;
    // 6 never comes: 7 waits orderWaitMs, then 6 is filled with an empty diff
    const seen: bigint[] = [];
    s.onDiff = (d) => seen.push(d.nonce);
    expect(await consume(await transport.chat(call(7, false)))).toBeGreaterThan(0);
    expect(seen).toEqual([6n, 7n]);
    expect(s.replica.inference(6n)).toBeUndefined();
    // 9 arrives before 8: 8 is still composed first
    seen.length = 0;
    // Both in this turn, no timer between: 9 reaches its nonce turn first (the same steps before it) and waits for 8.
    const late = transport.chat(call(9, false));
    const early = transport.chat(call(8, false));
    expect(await consume(await early)).toBeGreaterThan(0);
    expect(await consume(await late)).toBeGreaterThan(0);
    expect(seen).toEqual([8n, 9n]);
    // a reused nonce is refused, nothing is sent
    await expect(transport.chat(call(9, false))).rejects.toThrow(/already used/);
    s.onDiff = undefined;
    // every host's diffs are ours, contiguous
    for (const slot of net.escrow.slots) {
      const list = (await (await fetch(`${slot.url}/v1/devshard/sessions/${net.escrow.id}/diffs?from=1&to=100`)).json()) as { diff: { nonce: number; post_state_root: string }; state_hash: string }[];
      expect(list.map((x) => x.diff.nonce)).toEqual(list.map((_, i) => i + 1));
      for (const x of list) expect(x.state_hash).toBe(x.diff.post_state_root);
    }
  });

  it('a client that stops reading does not lose the Finish: the host stream is read on for its meta', async () => {
    const s = transport.session(net.escrow.id)!;
    const nonce = Number(s.latestNonce) + 1;
    const r = await transport.chat({ ...call(nonce, true), body: { ...call(nonce, true).body, max_tokens: 64 } });
    expect(r.kind).toBe('stream');
    if (r.kind !== 'stream') return;
    const it = r.chunks[Symbol.asyncIterator]();
    expect((await it.next()).done).toBe(false);
    await it.return?.(undefined); // the client left after one chunk
    // the host finishes on its own; its Finish reaches our pending set, then the next diff
    for (let i = 0; i < 500 && !s.pendingTxs().some((t) => t.tx.case === 'finishInference' && t.tx.value.inferenceId === BigInt(nonce)); i++) await new Promise((res) => setTimeout(res, 20));
    expect(s.pendingTxs().some((t) => t.tx.case === 'finishInference' && t.tx.value.inferenceId === BigInt(nonce)), `the host Finish of ${nonce} pending within 10 s`).toBe(true);
    expect(await consume(await transport.chat(call(nonce + 1, false)))).toBeGreaterThan(0);
    expect(s.replica.inference(BigInt(nonce))?.status).toBe(InferenceStatus.Finished);
  });

  it('a receipt whose state_hash is not our root fails the call with a clear host error', async () => {
    // A second transport whose session believes in another escrow amount: its roots differ from the hosts'.
    const other = createProtocolTransport({
      escrowOf: (id) => ({ escrowId: id, creator: net.escrow.creator, amount: net.escrow.amount! + 1n, slots: net.escrow.slots, session: SESSION, bind: BIND }),
    });
    try {
      // nonce 10 continues the hosts' session only if the roots agree: they do not, the host refuses the diff chain
      const s = new DevshardSession({ escrowId: net.escrow.id, creator: net.escrow.creator, amount: net.escrow.amount! + 1n, slots: net.escrow.slots, session: SESSION, bind: BIND }, () => new Uint8Array(65));
      expect(() => s.onReceipt(net.escrow.slots[0]!.url, { nonce: 1n, stateHash: new Uint8Array(32) })).toThrow(/did not send/);
      s.prepare(1n, { prompt: new TextEncoder().encode('{}'), model: MODEL, maxTokens: 1n, startedAt: 1n });
      expect(() => s.onReceipt(net.escrow.slots[1]!.url, { nonce: 1n, stateHash: new Uint8Array(32) })).toThrow(/state_hash at nonce 1 is 0000.*ours is/);
      const err = await other.chat({ ...call(10, false), escrowId: net.escrow.id }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(HostError);
    } finally {
      await other.close();
    }
  });

  it('an executor that refuses: after refusal_timeout the other hosts vote and a MsgTimeoutInference releases it', async () => {
    const s = transport.session(net.escrow.id)!;
    const nonce = Number(s.latestNonce) + 1;
    net.faults.hosts = [nonce % 3];
    net.faults.failStatus = 503;
    net.faults.remaining = 1;
    await expect(transport.chat(call(nonce, false))).rejects.toBeInstanceOf(HostError);
    clearFaults(net.faults);
    expect(s.replica.inference(BigInt(nonce))?.status).toBe(InferenceStatus.Pending);
    const missedBefore = s.replica.hostStats()[nonce % 3]!.missed;
    net.clock.offsetMs += 61_000; // refusal_timeout 60 s
    try {
      expect(await transport.sweepTimeouts()).toBeGreaterThanOrEqual(1);
      expect(s.pendingTxs().some((t) => t.tx.case === 'timeoutInference' && t.tx.value.inferenceId === BigInt(nonce))).toBe(true);
      expect(await consume(await transport.chat(call(nonce + 1, false)))).toBeGreaterThan(0);
      expect(s.replica.inference(BigInt(nonce))?.status).toBe(InferenceStatus.TimedOut);
      expect(s.replica.hostStats()[nonce % 3]!.missed).toBe(missedBefore + 1);
      // nonce 2 (refused in the first test) timed out the same way; nothing is left to vote on
      expect(s.replica.inference(2n)?.status).toBe(InferenceStatus.TimedOut);
      expect(await transport.sweepTimeouts()).toBe(0);
    } finally {
      net.clock.offsetMs = 0;
    }
  });

  it('concurrent calls on one escrow: every one answered, nonces contiguous, every receipt matching', async () => {
    const s = transport.session(net.escrow.id)!;
    const first = Number(s.latestNonce) + 1;
    const nonces = Array.from({ length: 9 }, (_, k) => first + k);
    const usage = await Promise.all(nonces.map(async (n) => consume(await transport.chat(call(n, n % 2 === 0)))));
    expect(usage.every((u) => u > 0)).toBe(true);
    expect(s.latestNonce).toBe(BigInt(first + 8));
    for (const slot of net.escrow.slots) {
      const list = (await (await fetch(`${slot.url}/v1/devshard/sessions/${net.escrow.id}/diffs?from=1&to=1000`)).json()) as { diff: { nonce: number; post_state_root: string }; state_hash: string }[];
      expect(list.map((x) => x.diff.nonce)).toEqual(list.map((_, i) => i + 1));
      for (const x of list) expect(x.state_hash).toBe(x.diff.post_state_root);
    }
  });

  it('a later request to the same host that gets there first: the earlier one answers with the host\'s later nonce, accepted, its ConfirmStart for its own inference', async () => {
    const s = transport.session(net.escrow.id)!;
    const first = s.latestNonce + 1n;
    const hostIndex = net.hosts.findIndex((h) => h.address === net.escrow.slots[Number(first % 3n)]!.host);
    // the first request to first's executor is held before the host applies its diffs, until the test releases it
    net.faults.hosts = [hostIndex];
    const { held, release } = holdHostRequests(net.faults);
    const slow = transport.chat(call(Number(first), false));
    let fast: number[];
    try {
      await held;
      // first + 3 goes to the same host, carrying first's diff as catch-up, and is answered before it
      fast = await Promise.all([1n, 2n, 3n].map(async (k) => consume(await transport.chat(call(Number(first + k), false)))));
    } finally {
      release();
    }
    expect(fast.every((u) => u > 0)).toBe(true);
    expect(await consume(await slow)).toBeGreaterThan(0);
    clearFaults(net.faults);
    expect(s.pendingTxs().some((tx) => tx.tx.case === 'confirmStart' && tx.tx.value.inferenceId === first)).toBe(true);
    // the next diffs take it: inference `first` is confirmed and finished like the others
    for (let k = 4n; k <= 6n; k++) expect(await consume(await transport.chat(call(Number(first + k), false)))).toBeGreaterThan(0);
    for (let k = 0n; k <= 3n; k++) expect(s.replica.inference(first + k)?.status, `inference ${first + k}`).toBe(InferenceStatus.Finished);
  });
});
