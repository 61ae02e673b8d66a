/**
 * A long catch-up goes in chunks (gonka 8a35022 devshard/user/session.go sendCatchUpWith,
 * catchUpChunkSize 200): after a restart the session sends every recorded diff once, which for a
 * long session would be one huge request. The transport sends the executor its catch-up in
 * requests of at most 200 diffs (no payload, nonce = the chunk's last), each acknowledged by the
 * host's receipt, before the request itself, which then carries the rest.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallController } from '../../../src/network/call-signal.js';
import { CATCH_UP_CHUNK, createProtocolTransport, type Exchange, type ProtocolTransport } from '../../../src/network/devshard/protocol-transport.js';
import type { ChatCall, ChatResult } from '../../../src/network/port.js';
import { createRequestSigner } from '../../../src/network/signature.js';
import { toHex } from '../../../src/protocol/index.js';
import { BIND, MODEL, SESSION, startTestNet, type TestNet } from '../../devnet/host-protocol-client.js';

describe('catch-up in chunks of 200 diffs', () => {
  let net: TestNet;
  let transport: ProtocolTransport;
  const exchanges: Exchange[] = [];

  beforeAll(async () => {
    net = await startTestNet();
    transport = createProtocolTransport({
      escrowOf: (id) => (id === net.escrow.id ? { escrowId: id, creator: net.escrow.creator, amount: net.escrow.amount!, slots: net.escrow.slots, session: SESSION, bind: BIND } : undefined),
      timeoutSweepMs: 0,
      now: () => Date.now() + net.clock.offsetMs,
      onExchange: (x) => exchanges.push(x),
    });
  });
  afterAll(async () => {
    await transport.close();
    await net.close();
  });

  const call = (nonce: number): ChatCall => ({
    escrowId: net.escrow.id,
    nonce,
    hostUrl: '',
    body: { model: MODEL, messages: [{ role: 'user', content: `q${nonce}` }], max_tokens: 8 },
    signer: createRequestSigner(toHex(net.creator.privateKey)),
    signal: new CallController().signal,
  });
  const consume = async (r: ChatResult): Promise<void> => {
    if (r.kind === 'stream') for await (const _ of r.chunks) void _;
  };

  it('an executor 450 diffs behind gets them in requests of 200, 200, then the chat with the rest; every receipt matches', async () => {
    await consume(await transport.chat(call(1)));
    const s = transport.session(net.escrow.id)!;
    // 2..451 composed here and never sent (as after a restart: recorded, no host acknowledged them)
    for (let n = 2; n <= 451; n++) s.prepare(BigInt(n), { prompt: new TextEncoder().encode(`{"n":${n}}`), model: MODEL, maxTokens: 8n, startedAt: BigInt(Math.floor((Date.now() + net.clock.offsetMs) / 1000)) });
    const executor = s.executorUrl(452n);
    const behind = s.catchUp(executor).length;
    expect(behind).toBeGreaterThan(2 * CATCH_UP_CHUNK);
    exchanges.length = 0;
    await consume(await transport.chat(call(452)));
    const toExecutor = exchanges.filter((x) => x.url.startsWith(executor));
    const diffCounts = toExecutor.map((x) => (JSON.parse(x.body) as { diffs: unknown[] }).diffs.length);
    expect(diffCounts).toEqual([CATCH_UP_CHUNK, CATCH_UP_CHUNK, behind - 2 * CATCH_UP_CHUNK + 1]);
    // the chunks carry no payload and name their last nonce; every answer was 200 with our root
    const bodies = toExecutor.map((x) => JSON.parse(x.body) as { nonce: number; payload?: unknown; diffs: { nonce: number }[] });
    for (const b of bodies.slice(0, 2)) {
      expect(b.payload).toBeUndefined();
      expect(b.nonce).toBe(b.diffs.at(-1)!.nonce);
    }
    expect(bodies[2]!.nonce).toBe(452);
    expect(toExecutor.every((x) => x.status === 200)).toBe(true);
    expect(s.catchUp(executor)).toEqual([]);
  }, 60_000);
});
