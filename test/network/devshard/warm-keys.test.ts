/**
 * Host txs signed by a warm key (network-versions.md §3 "Warm keys"): the session's resolver answers
 * from what it knows and asks `warmKeyGranted` (the chain) once per unknown pair in the background,
 * refusing the tx meanwhile; the host resends it from its mempool and a later diff takes it, with
 * the binding recorded so a replay of the diffs needs no chain.
 */
import { create, toBinary } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { CallController } from '../../../src/network/call-signal.js';
import { createProtocolTransport } from '../../../src/network/devshard/protocol-transport.js';
import { DevshardSession, replicaParamsOf, WARM_KEY_DENIED_TTL_MS, type SentDiff, type SessionEscrow } from '../../../src/network/devshard/session.js';
import { createRequestSigner } from '../../../src/network/signature.js';
import { canonicalPromptHash, executorReceiptBytes, finishProposerBytes, InferenceStatus, replay, signMessage, toHex } from '../../../src/protocol/index.js';
import { DevshardTxSchema } from '../../../src/protocol/gen/devshard/v1/diff_pb.js';
import { MsgFinishInferenceSchema } from '../../../src/protocol/gen/devshard/v1/tx_pb.js';
import { BIND, MODEL, SESSION } from '../../devnet/host-protocol-client.js';
import { newKey, type Key } from '../fixtures.js';

const flush = () => new Promise<void>((r) => setImmediate(r));

/** A lookup whose answers the test gives, one call at a time. */
function lookups() {
  const calls: { cold: string; warm: string; answer: (granted: boolean) => void; fail: () => void }[] = [];
  const fn = (cold: string, warm: string) =>
    new Promise<boolean>((resolve, reject) => calls.push({ cold, warm, answer: resolve, fail: () => reject(new Error('chain REST unreachable')) }));
  return { calls, fn };
}

describe('DevshardSession: host txs signed by a warm key', () => {
  const creator = newKey();
  const signer = createRequestSigner(toHex(creator.privateKey));
  const [a, b, c] = [newKey(), newKey(), newKey()];
  const [wb, wc] = [newKey(), newKey()];
  // b holds slots 1 and 3
  const escrow: SessionEscrow = {
    escrowId: '41',
    creator: creator.address,
    amount: 1_000_000n,
    slots: [
      { host: a.address, url: 'http://a' },
      { host: b.address, url: 'http://b' },
      { host: c.address, url: 'http://c' },
      { host: b.address, url: 'http://b' },
    ],
    session: SESSION,
    bind: BIND,
  };
  const prompt = (n: bigint) => new TextEncoder().encode(`{"q":${n}}`);

  const open = (recorded: readonly SentDiff[] = []) => {
    const s = new DevshardSession(escrow, (m) => signer.signProtocol(m), recorded);
    const sent: SentDiff[] = [];
    s.onDiff = (d) => void sent.push(d);
    let t = 1_000_000;
    s.now = () => t;
    const prepare = (n: bigint) => {
      s.prepare(n, { prompt: prompt(n), model: MODEL, maxTokens: 8n, startedAt: 1n });
      return sent.at(-1)!;
    };
    /** The executor's receipt for inference `n` (signed by its cold key): a ConfirmStart for the next diff. */
    const receipt = (n: bigint, executor: Key) => {
      const confirmedAt = 2n;
      const bytes = executorReceiptBytes({ inferenceId: n, promptHash: canonicalPromptHash(prompt(n)), model: MODEL, inputLength: BigInt(prompt(n).length), maxTokens: 8n, startedAt: 1n, escrowId: escrow.escrowId, confirmedAt });
      s.onReceipt(s.executorUrl(n), { nonce: n, stateHash: s.rootAt(n)!, receipt: signMessage(bytes, executor.privateKey), confirmedAt });
    };
    /** The executor's mempool brings inference `n`'s Finish, signed by `key`. */
    const finish = (n: bigint, key: Key) => {
      const slot = Number(n % BigInt(escrow.slots.length));
      const msg = create(MsgFinishInferenceSchema, { inferenceId: n, responseHash: new Uint8Array([1, 2, 3]), inputTokens: 5n, outputTokens: 3n, executorSlot: slot, escrowId: escrow.escrowId });
      msg.proposerSig = signMessage(finishProposerBytes(msg), key.privateKey);
      s.onMempool([toBinary(DevshardTxSchema, create(DevshardTxSchema, { tx: { case: 'finishInference', value: msg } }))], s.executorUrl(n));
    };
    const cases = (d: SentDiff) => d.txs.map((x) => x.tx.case);
    const status = (n: bigint) => s.replica.inference(n)?.status;
    return { s, sent, prepare, receipt, finish, cases, status, tick: (ms: number) => void (t += ms) };
  };

  it('skips the tx and asks once; takes it, with the binding, once granted; a replay gives the same root', async () => {
    const { s, sent, prepare, receipt, finish, cases, status, tick } = open();
    const l = lookups();
    s.warmKeyGranted = l.fn;

    // inference 1 runs on slot 1 (b); its Finish is signed by b's warm key
    prepare(1n);
    receipt(1n, b);
    finish(1n, wb);
    let d = prepare(2n);
    expect(cases(d)).toEqual(['confirmStart', 'startInference']);
    expect(d.warmKeyBindings).toEqual([]);
    expect(status(1n)).toBe(InferenceStatus.Started);
    expect(l.calls.map((x) => [x.cold, x.warm])).toEqual([[b.address, wb.address]]);
    expect(s.pendingTxs()).toEqual([]);

    // resent while the lookup runs: skipped again, not asked again
    finish(1n, wb);
    d = prepare(3n);
    expect(cases(d)).toEqual(['startInference']);
    expect(l.calls).toHaveLength(1);

    l.calls[0]!.answer(true);
    await flush();
    finish(1n, wb);
    d = prepare(4n);
    expect(cases(d)).toEqual(['finishInference', 'startInference']);
    expect(d.warmKeyBindings).toEqual([{ slot: 1, warm: wb.address }]);
    expect(status(1n)).toBe(InferenceStatus.Finished);
    expect(s.replica.warmKeys.get(1)).toBe(wb.address);

    // inference 2 runs on slot 2 (c), whose address did not grant wc: it stays out
    receipt(2n, c);
    finish(2n, wc);
    d = prepare(5n);
    expect(cases(d)).toEqual(['confirmStart', 'startInference']);
    expect(l.calls.map((x) => [x.cold, x.warm])).toEqual([[b.address, wb.address], [c.address, wc.address]]);
    l.calls[1]!.answer(false);
    await flush();
    finish(2n, wc);
    d = prepare(6n);
    expect(cases(d)).toEqual(['startInference']);
    expect(l.calls).toHaveLength(2); // the denial is believed for a while
    tick(WARM_KEY_DENIED_TTL_MS);
    finish(2n, wc);
    prepare(7n);
    expect(l.calls).toHaveLength(3); // then asked again
    l.calls[2]!.fail();
    await flush();
    finish(2n, wc);
    prepare(8n);
    expect(l.calls).toHaveLength(4); // a failed lookup is forgotten: the next miss asks again
    expect(status(2n)).toBe(InferenceStatus.Started);
    expect(sent.every((x) => x.txs.every((tx) => !(tx.tx.case === 'finishInference' && tx.tx.value.inferenceId === 2n)))).toBe(true);

    // the diffs as recorded replay to the same root (the bindings stand in for the chain)
    const params = replicaParamsOf(escrow);
    expect(replay(params, sent, { checkUserSig: true }).stateRoot()).toEqual(s.replica.stateRoot());
    expect(sent.flatMap((x) => x.warmKeyBindings)).toEqual([{ slot: 1, warm: wb.address }]);
    // without them the warm-signed Finish is refused
    expect(() => replay(params, sent.map((x) => ({ ...x, warmKeyBindings: [] })))).toThrow(/InvalidProposerSig|expected/);
  });

  it('a key bound to another slot of the same address needs no lookup (a session rebuilt from its diffs)', async () => {
    const first = open();
    const l = lookups();
    first.s.warmKeyGranted = l.fn;
    first.prepare(1n);
    first.receipt(1n, b);
    first.finish(1n, wb);
    first.prepare(2n);
    l.calls[0]!.answer(true);
    await flush();
    first.finish(1n, wb);
    first.prepare(3n);
    expect(first.s.replica.warmKeys.get(1)).toBe(wb.address);

    // a restart: the replica is rebuilt from the recorded diffs; nothing asked is remembered
    const again = open(first.sent);
    const l2 = lookups();
    again.s.warmKeyGranted = l2.fn;
    expect(again.s.replica.warmKeys.get(1)).toBe(wb.address);
    // inference 3 runs on slot 3, b's other slot
    again.receipt(3n, b);
    again.finish(3n, wb);
    const d = again.prepare(4n);
    expect(again.cases(d)).toEqual(['confirmStart', 'finishInference', 'startInference']);
    expect(d.warmKeyBindings).toEqual([{ slot: 3, warm: wb.address }]);
    expect(again.status(3n)).toBe(InferenceStatus.Finished);
    expect(l2.calls).toEqual([]);
  });

  it('without a lookup a warm-signed tx is never taken', () => {
    const { s, prepare, receipt, finish, cases, status } = open();
    prepare(1n);
    receipt(1n, b);
    finish(1n, wb);
    expect(cases(prepare(2n))).toEqual(['confirmStart', 'startInference']);
    finish(1n, wb);
    expect(cases(prepare(3n))).toEqual(['startInference']);
    expect(status(1n)).toBe(InferenceStatus.Started);
    expect(s.replica.warmKeys.size).toBe(0);
  });

  it('the transport hands its warmKeyGranted to each session it opens', async () => {
    const l = lookups();
    const opened: DevshardSession[] = [];
    const dead = { ...escrow, slots: escrow.slots.map((x) => ({ ...x, url: 'http://127.0.0.1:9/hosts/0' })) };
    const transport = createProtocolTransport({ escrowOf: () => dead, warmKeyGranted: l.fn, onSessionOpened: (_, s) => void opened.push(s), timeoutSweepMs: 0, orderWaitMs: 50 });
    try {
      await transport
        .chat({ escrowId: escrow.escrowId, nonce: 1, hostUrl: '', body: { model: MODEL, messages: [{ role: 'user', content: 'q' }], max_tokens: 8, stream: false }, signer, signal: new CallController().signal })
        .catch(() => undefined);
      expect(opened).toHaveLength(1);
      expect(opened[0]!.warmKeyGranted).toBe(l.fn);
    } finally {
      await transport.close();
    }
  });
});
