/**
 * Issue 40: a v5 error answer resolved by error-miss, end to end on the devnet. The fault
 * `errorAnswerAfterChunks` makes the executor of one streamed chat turn its answer into an
 * `{"error":…}` event and still sign its Finish over it. The client gets the error as before; the
 * gateway holds that Finish, reads the stream to its meta, asks the other hosts `verify-error-miss`
 * (off the request path), and with their accepting votes puts the Finish followed by MsgErrorMiss
 * into the next diff: the inference is refunded in the replica, every host applies it, the escrow
 * finalizes and settles under the tag "v5", and `verify` rebuilds the session from the log.
 */
import { fromBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProtocolTransport } from '../../src/network/devshard/protocol-transport.js';
import { devshardSessionStream } from '../../src/events/catalog.js';
import { eventsFile } from '../../src/events/sqlite-store.js';
import { runVerify } from '../../src/cli/commands/verify.js';
import { DiffContentSchema, type DevshardTx } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { InferenceStatus } from '../../src/protocol/inference-record.js';
import { disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { setHostFaults } from '../faults/helpers.js';

/** Polls `cond` until it holds, at most `ms`. */
async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('a v5 error answer resolved by error-miss', () => {
  let gw: TestGateway;
  let id = '';
  let missed = 0n;
  let executorSlot = -1;
  const transport = () => gw.ctx.network as ProtocolTransport;

  beforeAll(async () => {
    gw = await startTestGateway({ env: { GATEWAY_HEARTBEAT_IDLE_MS: '0' } });
    const r = await gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key: gw.keys.privateKey, register: true, protocol_version: 'v5' } });
    expect(r.status, r.text).toBe(200);
    id = r.json.id;
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  const chat = (i: number) => gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: `miss question ${i}` }], max_tokens: 80 } });
  const diffs = (): { nonce: bigint; txs: DevshardTx[] }[] =>
    gw.store
      .readStream(devshardSessionStream(id))
      .filter((r) => r.type === 'DevshardDiffSent')
      .map((r) => fromBinary(DiffContentSchema, Buffer.from((r.data as { txs: string }).txs, 'base64')));
  const idOf = (tx: DevshardTx) => (tx.tx.value as { inferenceId?: bigint } | undefined)?.inferenceId;

  it('the client gets the error; the gateway claims the miss with the executor\'s signed Finish', async () => {
    for (let i = 0; i < 3; i++) expect((await chat(i)).status).toBe(200);
    const s = transport().session(id)!;
    missed = s.latestNonce + 1n;
    executorSlot = Number(missed % BigInt(s.escrow.slots.length));
    setHostFaults(gw.devnet!, { errorAnswerAfterChunks: 3, hosts: [executorSlot], remaining: 1 });
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'this one fails' }], max_tokens: 80, stream: true }),
    });
    const text = await res.text();
    setHostFaults(gw.devnet!, {});
    expect(Number(res.headers.get('x-devshard-nonce'))).toBe(Number(missed));
    // The client's answer is what it was before error-miss existed: the stream ends in an error.
    expect(text).toContain('error');
    expect(text).not.toContain('data: [DONE]');
    // The stream was read on to its meta: the Finish is in hand and held, the claim open.
    await until(() => transport().errorMissClaims(id).includes(missed), 10_000, 'the error-miss claim');
    expect(s.pendingFinish(missed)).toBeDefined();
  }, 60_000);

  it('the hosts reject nothing; with their votes the Finish and MsgErrorMiss ride one diff and the inference is refunded', async () => {
    const s = transport().session(id)!;
    // The next diff carries the receipt's ConfirmStart, but not the held Finish.
    expect((await chat(10)).status).toBe(200);
    await gw.ctx.engine.idle();
    expect(s.replica.inference(missed)!.status).toBe(InferenceStatus.Started);
    expect(diffs().some((d) => d.txs.some((t) => t.tx.case === 'finishInference' && idOf(t) === missed))).toBe(false);

    const stats = () => s.replica.hostStats().find((h) => h.slotId === executorSlot)!;
    const before = stats();
    // The vote round also runs in the background; ask for rounds until the claim is decided, bounded.
    for (let i = 0; i < 50 && transport().errorMissClaims(id).includes(missed); i++) await transport().sweepErrorMisses();
    expect(transport().errorMissClaims(id)).not.toContain(missed);
    expect(s.pendingTxs().some((t) => t.tx.case === 'errorMiss' && idOf(t) === missed)).toBe(true);

    // The next diff: the Finish, then the MsgErrorMiss with the other hosts' votes.
    expect((await chat(11)).status).toBe(200);
    await gw.ctx.engine.idle();
    const carrying = diffs().filter((d) => d.txs.some((t) => t.tx.case === 'errorMiss'));
    expect(carrying).toHaveLength(1);
    const kinds = carrying[0]!.txs.filter((t) => idOf(t) === missed).map((t) => t.tx.case);
    expect(kinds).toEqual(['finishInference', 'errorMiss']);
    const miss = carrying[0]!.txs.find((t) => t.tx.case === 'errorMiss')!.tx.value as { votes: { voterSlot: number; accept: boolean }[] };
    expect(miss.votes.length).toBeGreaterThan(s.replica.config.voteThreshold);
    expect(miss.votes.every((v) => v.accept && v.voterSlot !== executorSlot)).toBe(true);

    // Refunded in the replica: the record timed out, its cost back in the balance, the executor charged a miss.
    const rec = s.replica.inference(missed)!;
    expect(rec.status).toBe(InferenceStatus.TimedOut);
    expect(rec.actualCost).toBeGreaterThan(0n);
    expect(stats().missed).toBe(before.missed + 1);
    // The Finish credited its executor the actual cost and the MsgErrorMiss took it back (no other
    // Finish of that slot rode the diff): the executor earned nothing for the error.
    expect(stats().cost).toBe(before.cost);
    expect(carrying[0]!.txs.filter((t) => t.tx.case === 'finishInference' && idOf(t) !== missed).every((t) => (t.tx.value as { executorSlot: number }).executorSlot !== executorSlot)).toBe(true);
    // Every host applied it: none refused a diff of ours.
    expect(gw.store.readStream(devshardSessionStream(id)).filter((r) => r.type === 'DevshardHostRefused')).toEqual([]);
  }, 60_000);

  it('finalizes and settles under the tag "v5"; the keeper accepts it, and verify rebuilds the session', async () => {
    const f = await gw.call(`/devshard/${id}/v1/finalize`, { method: 'POST' });
    expect(f.status, f.text).toBe(200);
    expect(f.json.version).toBe('v5');
    const settled = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { private_key: gw.keys.privateKey } });
    expect(settled.status, settled.text).toBe(200);
    expect((await gw.ctx.chain.escrow(id))!.settled).toBe(true);
    await gw.ctx.engine.idle();
    let out = '';
    const code = await runVerify(eventsFile(gw.storageDir), (x) => (out += x), (x) => (out += x));
    expect(code, out).toBe(0);
    expect(out).toMatch(/settlement at nonce \d+ equals the replica/);
  }, 120_000);
});
