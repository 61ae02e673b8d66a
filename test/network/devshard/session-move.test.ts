/**
 * A host that moved (issue 27): its participant's inference_url changed after the session opened.
 * The session moves every slot of that host address to the new URL with the nonce it acknowledged
 * (DevshardSession.moveHost); the transport does so when the gateway calls the host at a URL that
 * is not the session's (ChatCall.hostUrl). hosts() (finalize, the timeout sweep) follows.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallController } from '../../../src/network/call-signal.js';
import { createProtocolTransport, type ProtocolTransport } from '../../../src/network/devshard/protocol-transport.js';
import { DevshardSession } from '../../../src/network/devshard/session.js';
import { HostError, type ChatCall, type ChatResult } from '../../../src/network/port.js';
import { createRequestSigner } from '../../../src/network/signature.js';
import { toHex } from '../../../src/protocol/index.js';
import { BIND, MODEL, SESSION, startTestNet, type TestNet } from '../../devnet/host-protocol-client.js';
import { newKey } from '../fixtures.js';

const DEAD = 'http://127.0.0.1:9/hosts/0';

describe('DevshardSession.moveHost', () => {
  const creator = newKey();
  const signer = createRequestSigner(toHex(creator.privateKey));
  const [a, b] = [newKey().address, newKey().address];
  const open = () =>
    new DevshardSession(
      { escrowId: '7', creator: creator.address, amount: 1_000_000n, slots: [{ host: a, url: 'http://a' }, { host: b, url: 'http://b' }, { host: a, url: 'http://a' }], session: SESSION, bind: BIND },
      (m) => signer.signProtocol(m),
    );
  const prepare = (s: DevshardSession, nonce: bigint) => s.prepare(nonce, { prompt: new TextEncoder().encode(`{"q":${nonce}}`), model: MODEL, maxTokens: 8n, startedAt: 1n });
  const ack = (s: DevshardSession, url: string, nonce: bigint) => s.onReceipt(url, { nonce, stateHash: s.rootAt(nonce)! });

  it('moves every slot of the address, carrying the nonce that host acknowledged', () => {
    const s = open();
    expect(prepare(s, 1n).hostUrl).toBe('http://b');
    ack(s, 'http://b', 1n);
    expect(prepare(s, 2n).hostUrl).toBe('http://a');
    ack(s, 'http://a', 2n);
    expect(s.catchUp('http://b').map((d) => d.nonce)).toEqual([2n]);

    expect(s.moveHost(a, 'http://a2')).toBe(true);
    expect([0n, 1n, 2n].map((n) => s.executorUrl(n))).toEqual(['http://a2', 'http://b', 'http://a2']);
    expect(s.hosts()).toEqual(['http://a2', 'http://b']);
    // the same host at a new address: it holds nonce 2, nothing to catch up
    expect(s.catchUp('http://a2')).toEqual([]);
    expect(s.moveHost(a, 'http://a2')).toBe(false);

    // the next request to it carries only the new diff; its receipt prunes what every host holds
    const p3 = prepare(s, 3n);
    expect(p3.hostUrl).toBe('http://a2');
    expect(p3.diffs).toBe(1);
    ack(s, 'http://a2', 3n);
    ack(s, 'http://b', 3n);
    expect(s.rootAt(2n)).toBeUndefined();
    expect(s.rootAt(3n)).toBeUndefined();
  });

  it('a host moved onto another host\'s URL: one host, with the lower acknowledged nonce', () => {
    const s = open();
    prepare(s, 1n);
    ack(s, 'http://b', 1n);
    prepare(s, 2n);
    ack(s, 'http://a', 2n);
    expect(s.moveHost(b, 'http://a')).toBe(true);
    expect(s.hosts()).toEqual(['http://a']);
    expect(s.catchUp('http://a').map((d) => d.nonce)).toEqual([2n]);
  });
});

describe('the protocol transport follows a host that moved', () => {
  let net: TestNet;
  let transport: ProtocolTransport;
  const escrowOf = () => ({
    escrowId: net.escrow.id,
    creator: net.escrow.creator,
    amount: net.escrow.amount!,
    // host 0 holds slots 0 and 3; the session opens with it at an address where nothing listens
    slots: net.escrow.slots.map((x) => (x.host === net.hosts[0]!.address ? { ...x, url: DEAD } : x)),
    session: SESSION,
    bind: BIND,
  });

  beforeAll(async () => {
    net = await startTestNet({ hosts: 3, slotsOf: [0, 1, 2, 0] });
    transport = createProtocolTransport({ escrowOf, orderWaitMs: 300, timeoutSweepMs: 0 });
  });
  afterAll(async () => {
    await transport.close();
    await net.close();
  });

  const signer = () => createRequestSigner(toHex(net.creator.privateKey));
  const call = (nonce: number, hostUrl = ''): ChatCall => ({
    escrowId: net.escrow.id,
    nonce,
    hostUrl,
    body: { model: MODEL, messages: [{ role: 'user', content: `q${nonce}` }], max_tokens: 8, stream: false },
    signer: signer(),
    signal: new CallController().signal,
  });
  const served = async (r: ChatResult): Promise<boolean> => r.kind === 'completion' && r.completion.usage.total_tokens > 0;

  it('a call at the new URL moves the host\'s slots there; later calls and finalize reach it', async () => {
    expect(await served(await transport.chat(call(1)))).toBe(true);
    expect(await served(await transport.chat(call(2)))).toBe(true);
    const err = await transport.chat(call(3)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HostError);
    expect((err as HostError).kind).toBe('unreachable');
    const s = transport.session(net.escrow.id)!;
    expect(s.hosts()).toContain(DEAD);

    // the gateway read the participant again: slot 0's host is called where it is now
    const moved = net.hostUrl(0);
    expect(await served(await transport.chat(call(4, moved)))).toBe(true);
    expect(s.hosts()).toEqual([moved, net.hostUrl(1), net.hostUrl(2)]);
    expect(s.executorUrl(3n)).toBe(moved);
    // its other slot follows without being told
    for (const n of [5, 6, 7]) expect(await served(await transport.chat(call(n)))).toBe(true);

    const f = await transport.finalize(net.escrow.id, signer(), { signatureWaitMs: 5_000 });
    expect(f.failures).toEqual([]);
    expect(f.signatures.map((x) => x.slotId)).toEqual([0, 1, 2, 3]);
  });
});
