/**
 * Issue 40: a v5 host that signs its stamps below the floor F(m) never gets those txs into one of
 * our diffs, and the session goes on. The devnet fault `subFloorStamps` makes host 1 sign its
 * receipts' ConfirmStarts and its Finishes one block below the floor (what a real v5 host refuses
 * as INVALID(height_regression), the whole diff with it). The gateway's compose drops such a tx
 * before signing, so no host ever refuses one of our diffs; the other hosts' inferences go on, and
 * the escrow finalizes and settles under the tag "v5".
 */
import { fromBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProtocolTransport } from '../../src/network/devshard/protocol-transport.js';
import { devshardSessionStream } from '../../src/events/catalog.js';
import { DiffContentSchema, type DevshardTx } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { setHostFaults } from '../faults/helpers.js';

describe('a v5 host signing below the floor', () => {
  let gw: TestGateway;
  let id = '';
  beforeAll(async () => {
    gw = await startTestGateway({ env: { GATEWAY_HEARTBEAT_IDLE_MS: '0' } });
    const r = await gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key: gw.keys.privateKey, register: true, protocol_version: 'v5' } });
    expect(r.status, r.text).toBe(200);
    id = r.json.id;
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  const chat = (i: number) => gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: `floor question ${i}` }], max_tokens: 80 } });
  const diffTxs = (): { nonce: number; tx: DevshardTx }[] =>
    gw.store
      .readStream(devshardSessionStream(id))
      .filter((r) => r.type === 'DevshardDiffSent')
      .flatMap((r) => {
        const d = fromBinary(DiffContentSchema, Buffer.from((r.data as { txs: string }).txs, 'base64'));
        return d.txs.map((tx) => ({ nonce: Number(d.nonce), tx }));
      });
  const confirmedIds = () => new Set(diffTxs().filter((x) => x.tx.tx.case === 'confirmStart').map((x) => Number((x.tx.tx.value as { inferenceId: bigint }).inferenceId)));

  it('keeps its sub-floor txs out of every diff; no host refuses one of ours; the other slots go on', async () => {
    // A floor first: host-signed stamps of a few inferences applied.
    for (let i = 0; i < 4; i++) expect((await chat(i)).status).toBe(200);
    const s = (gw.ctx.network as ProtocolTransport).session(id)!;
    expect(s.replica.floor().height).toBeGreaterThan(1n);

    setHostFaults(gw.devnet!, { subFloorStamps: true, hosts: [1] });
    const after: number[] = [];
    for (let i = 4; i < 13; i++) {
      const r = await chat(i);
      // The client's answer is whole either way: the stamp only decides what enters a diff.
      expect(r.status, r.text).toBe(200);
      after.push(Number(r.headers.get('x-devshard-nonce')));
    }
    setHostFaults(gw.devnet!, {});
    // Three more on honest hosts carry whatever is still pending.
    for (let i = 13; i < 16; i++) expect((await chat(i)).status).toBe(200);
    await gw.ctx.engine.idle();

    const confirmed = confirmedIds();
    const onHost1 = after.filter((n) => n % 3 === 1);
    const elsewhere = after.filter((n) => n % 3 !== 1);
    expect(onHost1.length).toBeGreaterThanOrEqual(3);
    // Host 1's sub-floor ConfirmStarts never entered a diff; the other hosts' did.
    for (const n of onHost1) expect(confirmed.has(n), `inference ${n} (host 1)`).toBe(false);
    for (const n of elsewhere.slice(0, -1)) expect(confirmed.has(n), `inference ${n}`).toBe(true);
    // Nor did any of its Finishes below the floor: every stamped tx in our diffs stands at or above F of its inference.
    for (const { tx } of diffTxs()) {
      const v = tx.tx.value as { inferenceId?: bigint; observedHeight?: bigint; observedBlockHash?: Uint8Array } | undefined;
      if (!v || v.inferenceId === undefined || !v.observedBlockHash || v.observedBlockHash.length === 0) continue;
      if (tx.tx.case !== 'confirmStart' && tx.tx.case !== 'finishInference') continue;
      expect(onHost1.includes(Number(v.inferenceId)), `a ${tx.tx.case} of host 1's inference ${v.inferenceId}`).toBe(false);
    }
    // No host refused any of our diffs.
    expect(gw.store.readStream(devshardSessionStream(id)).filter((r) => r.type === 'DevshardHostRefused')).toEqual([]);
  }, 120_000);

  it('finalizes and settles under the tag "v5" (the drain pays the inferences never confirmed their reservation)', async () => {
    const f = await gw.call(`/devshard/${id}/v1/finalize`, { method: 'POST' });
    expect(f.status, f.text).toBe(200);
    expect(f.json.version).toBe('v5');
    const settled = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { private_key: gw.keys.privateKey } });
    expect(settled.status, settled.text).toBe(200);
    expect((await gw.ctx.chain.escrow(id))!.settled).toBe(true);
  }, 120_000);
});
