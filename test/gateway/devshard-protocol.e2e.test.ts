/**
 * Chat over the real devshard host protocol through the whole stack (DEVSHARD_HOST_PROTOCOL=devshard):
 * HTTP → gateway (engine, nonces) → the protocol transport (per-escrow replica, signed diffs with
 * catch-up, receipts checked against our root, host txs from mempools) → the embedded devnet's
 * simulated hosts on their real protocol routes.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fromBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Exchange, ProtocolTransport } from '../../src/network/devshard/protocol-transport.js';
import { DiffContentSchema } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { devshardSessionStream } from '../../src/events/catalog.js';
import { eventsFile } from '../../src/events/sqlite-store.js';
import { verifyLog } from '../../src/events/verify.js';
import { recordedDiffs } from '../../src/gateway/session/diffs.js';
import { projectionsCheck } from '../../src/projections/verify-check.js';
import { bytesEqual, InferenceStatus, Phase, replay } from '../../src/protocol/index.js';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';

const chat = (i: number, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: 'user', content: `question number ${i}` }], max_tokens: 32, ...extra });

/** The SSE data payloads of a streamed answer. */
async function streamed(gw: TestGateway, body: unknown): Promise<{ status: number; data: string[] }> {
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  await gw.ctx.engine.idle();
  return { status: res.status, data: text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)) };
}

type HostDiff = { diff: { nonce: number; txs: string; user_sig: string; post_state_root: string }; state_hash: string };

describe('chat over the real devshard host protocol (DEVSHARD_HOST_PROTOCOL=devshard)', () => {
  let gw: TestGateway;
  let escrowId: string;
  const usages: { nonce: number; total: number; prompt: number; completion: number }[] = [];
  const captured: Exchange[] = [];

  beforeAll(async () => {
    ({ gw, escrowId } = await startGatewayWithEscrow({ env: { DEVSHARD_HOST_PROTOCOL: 'devshard' } }));
    (gw.ctx.network as ProtocolTransport).setExchangeListener((x) => captured.push(x));
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  const transport = () => gw.ctx.network as ProtocolTransport;

  it('serves streamed and non-streamed chats, each receipt matching our root, usage the host counted', async () => {
    for (let i = 0; i < 8; i++) {
      const nonce = i + 1;
      if (i % 2 === 0) {
        const includeUsage = i === 2;
        const r = await streamed(gw, chat(i, { stream: true, ...(includeUsage ? { stream_options: { include_usage: true } } : {}) }));
        expect(r.status).toBe(200);
        expect(r.data.at(-1)).toBe('[DONE]');
        const chunks = r.data.slice(0, -1).map((d) => JSON.parse(d) as Record<string, any>);
        expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === MODEL && c.id === `devshard-${escrowId}-${nonce}`)).toBe(true);
        expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('').length).toBeGreaterThan(0);
        // the host's own fields never reach the client; usage only when asked
        expect(r.data.some((d) => d.includes('token_ids') || d.includes('"logprobs"'))).toBe(false);
        if (!includeUsage) expect(r.data.some((d) => d.includes('"usage"'))).toBe(false);
        const usageChunks = chunks.filter((c) => c.usage);
        expect(usageChunks.length).toBe(includeUsage ? 1 : 0);
      } else {
        const r = await gw.call('/v1/chat/completions', { body: chat(i) });
        expect(r.status, r.text).toBe(200);
        expect(r.json.object).toBe('chat.completion');
        expect(r.json.id).toBe(`devshard-${escrowId}-${nonce}`);
        expect(r.json.choices[0].message.content.length).toBeGreaterThan(0);
        usages.push({ nonce, total: r.json.usage.total_tokens, prompt: r.json.usage.prompt_tokens, completion: r.json.usage.completion_tokens });
      }
    }
    // every request went to its executor, slots[nonce % 3], and was answered 200
    expect(captured.map((x) => x.status)).toEqual(Array(8).fill(200));
    expect(captured.map((x) => new URL(x.url).pathname.split('/')[2])).toEqual(['1', '2', '0', '1', '2', '0', '1', '2']);
    const s = transport().session(escrowId)!;
    expect(s.latestNonce).toBe(8n);
    // ConfirmStart and Finish of inferences 1..7 were taken from receipts and mempools into later diffs
    for (let id = 1n; id <= 7n; id++) expect(s.replica.inference(id)?.status, `inference ${id}`).toBe(InferenceStatus.Finished);
    // the usage the client saw is the host's count, the one its Finish commits to
    for (const u of usages.filter((x) => x.nonce <= 7)) {
      const rec = s.replica.inference(BigInt(u.nonce))!;
      expect(rec.inputTokens + rec.outputTokens).toBe(BigInt(u.total));
      expect(rec.outputTokens).toBe(BigInt(u.completion));
    }
    // the gateway's own accounting: nonce 8, every request billed
    const d = await gw.call(`/v1/admin/devshards/${escrowId}`);
    expect(d.json.nonce).toBe(8);
  }, 60_000);

  it('every host holds a contiguous run of our diffs, with ConfirmStart and Finish in later ones', async () => {
    const s = transport().session(escrowId)!;
    // a new escrow speaks the newest version the devnet approves: v4.1 on its own route, tag "v4.1"
    expect(s.protocol).toEqual({ version: 'v4.1', route: '/devshard/v4.1', tag: 'v4.1' });
    const urls = [...new Set(s.escrow.slots.map((x) => x.url))];
    expect(urls.length).toBe(3);
    const seen = new Set<string>();
    for (const [slot, url] of urls.entries()) {
      const res = await fetch(`${url}/devshard/v4.1/sessions/${escrowId}/diffs?from=1&to=100`);
      expect(res.status).toBe(200);
      const list = (await res.json()) as HostDiff[];
      // the versionless read answers the same, from the version the session is bound to
      const versionless = await fetch(`${url}/devshard/sessions/${escrowId}/diffs?from=1&to=100`);
      expect(versionless.status).toBe(200);
      expect(await versionless.json()).toEqual(list);
      // the retired route is the host API's 410, as on the live network
      expect((await fetch(`${url}/v1/devshard/sessions/${escrowId}/diffs?from=1&to=100`)).status).toBe(410);
      const nonces = list.map((x) => x.diff.nonce);
      // contiguous from 1 to the last nonce this host executed (it learns the rest as catch-up)
      const last = [...Array(8).keys()].map((k) => k + 1).filter((n) => n % 3 === slot).at(-1)!;
      expect(nonces).toEqual([...Array(last).keys()].map((k) => k + 1));
      for (const x of list) {
        // the host's root after each diff is the one we signed
        expect(x.state_hash).toBe(x.diff.post_state_root);
        for (const tx of fromBinary(DiffContentSchema, Buffer.from(x.diff.txs, 'base64')).txs) seen.add(`${tx.tx.case}:${(tx.tx.value as { inferenceId?: bigint }).inferenceId}`);
      }
    }
    for (let id = 1; id <= 7; id++) {
      expect(seen, `inference ${id}`).toContain(`startInference:${id}`);
      expect(seen, `inference ${id}`).toContain(`confirmStart:${id}`);
      expect(seen, `inference ${id}`).toContain(`finishInference:${id}`);
    }
  }, 30_000);

  let settlementFile = '';
  it('finalizes over the protocol: every slot signs the settlement, in the file the chain CLI reads', async () => {
    const s = transport().session(escrowId)!;
    const signer = gw.ctx.keyring.signerFor(s.escrow.creator)!;
    const f = await transport().finalize(escrowId, signer, { signatureWaitMs: 5_000 });
    expect(f.failures).toEqual([]);
    // MsgFinalizeRound at 9, Settlement at 9 + 3
    expect(f.settlement.nonce).toBe(12n);
    expect(s.replica.phase).toBe(Phase.Settlement);
    expect(f.signatures.map((x) => x.slotId)).toEqual([0, 1, 2]);
    // inference 8's ConfirmStart and Finish came with the finalize rounds
    for (let id = 1n; id <= 8n; id++) expect(s.replica.inference(id)?.status ?? InferenceStatus.Finished, `inference ${id}`).not.toBe(InferenceStatus.Pending);
    const file = JSON.parse(f.file) as { escrow_id: string; version: string; nonce: number; host_stats: unknown[]; signatures: unknown[] };
    expect(file).toMatchObject({ escrow_id: escrowId, version: 'v4.1', nonce: 12 });
    expect(file.host_stats).toHaveLength(3);
    expect(file.signatures).toHaveLength(3);
    settlementFile = f.file;
  }, 60_000);

  // GWPROTO_CAPTURE_DIR: the gateway→host traffic in ../shared/tools/realnet's capture format (one
  // file per request, as its tap.mjs writes them) and the session's facts, for verify-request.mjs
  // and verify-diffs.mjs.
  afterAll(() => {
    const dir = process.env.GWPROTO_CAPTURE_DIR;
    if (!dir || captured.length === 0) return;
    mkdirSync(join(dir, 'caps'), { recursive: true });
    const s = (gw.ctx.network as ProtocolTransport).session(escrowId)!;
    captured.forEach((c, seq) => {
      const u = new URL(c.url);
      const m = /^(\/hosts\/(\d+))(\/.*)$/.exec(u.pathname)!;
      const slot = s.escrow.slots.findIndex((x) => x.url === u.origin + m[1]);
      const record = {
        seq,
        received_at: c.at,
        method: 'POST',
        url: m[3],
        headers: c.headers,
        body_base64: Buffer.from(c.body).toString('base64'),
        target: u.origin + m[1],
        host_address: s.escrow.slots[slot]!.host,
        response: { status: c.status },
      };
      writeFileSync(join(dir, 'caps', `${String(seq).padStart(4, '0')}-POST.json`), JSON.stringify(record));
    });
    if (settlementFile) writeFileSync(join(dir, 'settlement.json'), settlementFile);
    writeFileSync(join(dir, 'session.json'), JSON.stringify({ creator: s.escrow.creator, slots: s.escrow.slots.map((x) => x.host), amount: String(s.escrow.amount), token_price: String(s.replica.config.tokenPrice) }));
  });
});

describe('the devshard protocol diffs in the log (DevshardDiffSent)', () => {
  let gw: TestGateway;
  let escrowId: string;

  beforeAll(async () => {
    ({ gw, escrowId } = await startGatewayWithEscrow({ env: { DEVSHARD_HOST_PROTOCOL: 'devshard' } }));
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  const session = () => (gw.ctx.network as ProtocolTransport).session(escrowId)!;
  const ask = (i: number, stream = false) => gw.call('/v1/chat/completions', { body: chat(i, stream ? { stream: true } : {}) });

  it('records every diff before it is sent; replay of the log rebuilds the replica; verify passes', async () => {
    for (let i = 0; i < 4; i++) expect((await ask(i, i % 2 === 0)).status).toBe(200);
    await gw.ctx.engine.idle();
    const recorded = await recordedDiffs(gw.ctx.engine, escrowId);
    expect(recorded.map((d) => d.nonce)).toEqual([1n, 2n, 3n, 4n]);
    const s = session();
    const rebuilt = replay(s.replica.params, recorded, { checkUserSig: true });
    expect(rebuilt.latestNonce).toBe(4n);
    expect(bytesEqual(rebuilt.stateRoot(), s.replica.stateRoot())).toBe(true);
    // the session's chain facts first (DevshardSessionOpened), then the diffs
    const types = gw.store.readStream(devshardSessionStream(escrowId)).map((r) => [r.type, r.schemaVersion]);
    expect(types[0]).toEqual(['DevshardSessionOpened', 1]);
    expect(types.filter(([t]) => t === 'DevshardDiffSent')).toEqual(Array(4).fill(['DevshardDiffSent', 1]));
    // every host tx taken from an answer is in the log, and each one the diffs carried was taken first
    const taken = gw.store.readStream(devshardSessionStream(escrowId)).filter((r) => r.type === 'DevshardHostTxsReceived').flatMap((r) => (r.data as { txs: string[] }).txs);
    expect(taken.length).toBeGreaterThan(0);
    expect(types.filter(([t]) => t === 'DevshardHostTxsReceived').every(([, v]) => v === 1)).toBe(true);
    const v = await verifyLog(eventsFile(gw.storageDir), [projectionsCheck()]);
    expect(v.ok, JSON.stringify(v)).toBe(true);
  }, 60_000);

  it('after a restart the session is rebuilt from the log: nonces continue, every host catches up, receipts match', async () => {
    const before = session().replica.stateRoot();
    gw = await gw.restart();
    for (let i = 4; i < 8; i++) {
      const r = await ask(i, i % 2 === 0);
      expect(r.status, r.text).toBe(200);
    }
    const s = session();
    // the replica went on from the recorded root; gaps (nonces the restart skipped) are empty diffs
    const recorded = await recordedDiffs(gw.ctx.engine, escrowId);
    expect(recorded.map((d) => Number(d.nonce))).toEqual([...Array(Number(s.latestNonce)).keys()].map((k) => k + 1));
    expect(bytesEqual(recorded[3]!.postStateRoot, before)).toBe(true);
    expect(bytesEqual(replay(s.replica.params, recorded).stateRoot(), s.replica.stateRoot())).toBe(true);
    // 1-3 finished before the restart, 5-7 after; 4's ConfirmStart and Finish were taken from its
    // host's answer before the restart but no diff carried them yet: the log kept them
    // (DevshardHostTxsReceived), so they reach a diff although the embedded devnet's hosts, which
    // restart with the gateway, lost their mempools
    for (const id of [1n, 2n, 3n, 4n, 5n, 6n, 7n]) expect(s.replica.inference(id)?.status, `inference ${id}`).toBe(InferenceStatus.Finished);
    for (const url of [...new Set(s.escrow.slots.map((x) => x.url))]) {
      const list = (await (await fetch(`${url}/devshard/sessions/${escrowId}/diffs?from=1&to=100`)).json()) as HostDiff[];
      expect(list.length).toBeGreaterThan(0);
      expect(list.map((x) => x.diff.nonce)).toEqual(list.map((_, k) => k + 1));
      for (const x of list) expect(x.state_hash).toBe(x.diff.post_state_root);
    }
  }, 60_000);

  it('concurrent chats through the gateway: all answered, the hosts hold contiguous diffs with our roots', async () => {
    const results = await Promise.all(Array.from({ length: 6 }, (_, k) => ask(100 + k, k % 2 === 0)));
    expect(results.map((r) => r.status)).toEqual(Array(6).fill(200));
    const s = session();
    await gw.ctx.engine.idle();
    expect((await recordedDiffs(gw.ctx.engine, escrowId)).map((d) => Number(d.nonce))).toEqual([...Array(Number(s.latestNonce)).keys()].map((k) => k + 1));
    for (const url of [...new Set(s.escrow.slots.map((x) => x.url))]) {
      const list = (await (await fetch(`${url}/devshard/sessions/${escrowId}/diffs?from=1&to=100`)).json()) as HostDiff[];
      expect(list.length).toBeGreaterThan(0);
      expect(list.map((x) => x.diff.nonce)).toEqual(list.map((_, k) => k + 1));
      for (const x of list) expect(x.state_hash).toBe(x.diff.post_state_root);
    }
  }, 60_000);
});
