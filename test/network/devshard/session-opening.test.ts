/**
 * Opening an escrow's session when the log's reads answer later (an asynchronous store): calls that
 * come at once open one session, and nothing is sent for the escrow before `onSessionOpened` (the
 * billing restore) finished.
 */
import type { Agent } from 'undici';
import { describe, expect, it } from 'vitest';
import { CallController } from '../../../src/network/call-signal.js';
import { createProtocolTransport } from '../../../src/network/devshard/protocol-transport.js';
import type { SessionEscrow } from '../../../src/network/devshard/session.js';
import type { ChatCall } from '../../../src/network/port.js';
import { createRequestSigner } from '../../../src/network/signature.js';
import { toHex } from '../../../src/protocol/index.js';
import { BIND, MODEL, SESSION } from '../../devnet/host-protocol-client.js';
import { newKey } from '../fixtures.js';

/** A promise the test settles. */
function later<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe('protocol transport: opening a session with asynchronous callbacks', () => {
  const creator = newKey();
  const signer = createRequestSigner(toHex(creator.privateKey));
  const [a, b] = [newKey(), newKey()];
  const escrow: SessionEscrow = {
    escrowId: '7',
    creator: creator.address,
    amount: 1_000_000n,
    slots: [
      { host: a.address, url: 'http://127.0.0.1:9' },
      { host: b.address, url: 'http://127.0.0.1:9' },
    ],
    session: SESSION,
    bind: BIND,
  };

  it('two calls at once open one session; no request leaves before the restore finished', async () => {
    const calls = { escrowOf: 0, diffs: 0, hostTxs: 0, opened: 0 };
    const diffs = later<[]>();
    const restore = later<void>();
    const events: string[] = [];
    // No host: the request is refused at once, after it is noted.
    const agent = {
      request: () => {
        events.push('request');
        return Promise.reject(Object.assign(new Error('no host'), { code: 'ECONNREFUSED' }));
      },
      close: () => Promise.resolve(),
    } as unknown as Agent;
    const transport = createProtocolTransport({
      agent,
      timeoutSweepMs: 0,
      errorMissSweepMs: 0,
      escrowOf: async () => (calls.escrowOf++, escrow),
      recordedDiffs: () => (calls.diffs++, diffs.promise),
      recordedHostTxs: async () => (calls.hostTxs++, []),
      onSessionOpened: async () => {
        calls.opened++;
        await restore.promise;
        events.push('restored');
      },
    });
    const call = (nonce: number): ChatCall => ({
      escrowId: escrow.escrowId,
      nonce,
      hostUrl: '',
      signer,
      body: { model: MODEL, messages: [{ role: 'user', content: 'q' }], max_tokens: 8, stream: false },
      signal: new CallController().signal,
    });
    const first = transport.chat(call(1));
    const second = transport.admit!(escrow.escrowId, signer);
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    diffs.resolve([]);
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    // Opened (its reads answered), not handed out: the restore runs.
    expect(calls).toEqual({ escrowOf: 1, diffs: 1, hostTxs: 1, opened: 1 });
    expect(transport.session(escrow.escrowId)).toBeUndefined();
    expect(events).toEqual([]);
    restore.resolve();
    await second;
    await expect(first).rejects.toThrow(/unreachable/);
    expect(events).toEqual(['restored', 'request']);
    expect(calls).toEqual({ escrowOf: 1, diffs: 1, hostTxs: 1, opened: 1 });
    expect(transport.session(escrow.escrowId)?.latestNonce).toBe(1n);
    await transport.close();
  });
});
