/**
 * A v5 (height-sync) escrow end to end on the devnet, beside the default v4.1 one: created with
 * `protocol_version: "v5"`, its session seeded (`POST /devshard/v5/sessions/{id}/height-sync` to each
 * host, /v1/status height_seed ok), chats streamed and not and a tool call on `/devshard/v5` with
 * the executors' stamps carried into the ConfirmStarts, a client max_tokens below v5's floor of 64
 * raised toward the host and the answer cut at the client's own limit, then finalize and settle
 * with the tag "v5", which the devnet keeper accepts; `verify` rebuilds the session.
 *
 * GW5_CAPTURE_DIR: writes the escrow's gateway→host traffic, its settlement file and its facts in
 * ../shared/tools/realnet's capture format (verify-request.mjs --prefix /devshard/v5,
 * verify-diffs.mjs --version v5 --settlement).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fromBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Exchange, ProtocolTransport } from '../../src/network/devshard/protocol-transport.js';
import { devshardSessionStream, escrowStream } from '../../src/events/catalog.js';
import { eventsFile } from '../../src/events/sqlite-store.js';
import { runVerify } from '../../src/cli/commands/verify.js';
import { DevshardTxSchema, DiffContentSchema } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { planCompletion } from '../../src/devnet/hosts/completion-plan.js';
import { disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];

// A prompt the simulated host answers at length: more tokens than the client's limit below.
const longAsk = (() => {
  for (let i = 0; ; i++) {
    const m = [{ role: 'user', content: `tell me a story ${i}` }];
    if (planCompletion({ model: MODEL, messages: m }).pieces.length >= 40) return m;
  }
})();

describe('a v5 escrow on the devnet', () => {
  let gw: TestGateway;
  let id = '';
  let file: any;
  const captured: Exchange[] = [];

  beforeAll(async () => {
    // Idle spans as soon as the session is quiet (ticks driven below, and every second in the background).
    gw = await startTestGateway({ env: { GATEWAY_HEARTBEAT_IDLE_MS: '1' } });
    (gw.ctx.network as ProtocolTransport).setExchangeListener((x) => captured.push(x));
    const r = await gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key: gw.keys.privateKey, register: true, protocol_version: 'v5' } });
    expect(r.status, r.text).toBe(200);
    id = r.json.id;
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  const paths = () => captured.filter((x) => new URL(x.url).pathname.includes(`/sessions/${id}/`)).map((x) => new URL(x.url).pathname.replace(/^\/hosts\/\d+/, ''));

  it('records v5 on /devshard/v5 with the tag "v5"; an escrow created without a version is still v4.1', async () => {
    expect((gw.store.readStream(escrowStream(id))[0]!.data as { protocol?: unknown }).protocol).toEqual({ version: 'v5', route: '/devshard/v5', tag: 'v5' });
    expect(gw.ctx.engine.escrow(id)).toBeDefined();
  });

  it('seeds the session at its first chat, then serves chats streamed and not and tool calls on /devshard/v5', async () => {
    for (let i = 0; i < 4; i++) {
      const body: Record<string, unknown> = { model: MODEL, messages: [{ role: 'user', content: `v5 question ${i}: "quotes", emoji 🦊` }], max_tokens: 96 };
      if (i >= 2) Object.assign(body, { tools, tool_choice: 'required' });
      if (i % 2 === 0) {
        const res = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }) });
        const text = await res.text();
        expect(res.status, text).toBe(200);
        expect(res.headers.get('x-devshard-escrow-id')).toBe(id);
        expect(text).toContain('data: [DONE]');
        if (i >= 2) expect(text).toContain('"tool_calls"');
      } else {
        const r = await gw.call('/v1/chat/completions', { body });
        expect(r.status, r.text).toBe(200);
        if (i >= 2) expect(r.json.choices[0].finish_reason).toBe('tool_calls');
        else expect(r.json.choices[0].message.content.length).toBeGreaterThan(0);
      }
    }
    await gw.ctx.engine.idle();
    const p = paths();
    expect(p.filter((x) => x.endsWith('/height-sync')).length).toBeGreaterThanOrEqual(2);
    expect(p.every((x) => x.startsWith(`/devshard/v5/sessions/${id}/`))).toBe(true);
    expect(captured.every((x) => x.status === 200)).toBe(true);
    const status = await gw.call('/v1/status');
    const row = status.json.devshards.find((d: any) => d.id === id);
    expect(row).toMatchObject({ protocol_version: 'v5', route_prefix: '/devshard/v5', state_root_version: 'v5', height_seed: { state: 'ok', slots: 3 } });
    expect(row.height_seed.seeded).toBeGreaterThanOrEqual(2);
    // The seed is in the log.
    expect(gw.store.readStream(devshardSessionStream(id)).filter((r) => r.type === 'DevshardHeightSeeded').map((r) => (r.data as { state: string }).state)).toEqual(['ok']);
  }, 120_000);

  it('carries each executor stamp into its ConfirmStart', async () => {
    // The diffs after the chats carry ConfirmStarts: each with the height and block hash its receipt signed.
    const confirms = gw.store
      .readStream(devshardSessionStream(id))
      .filter((r) => r.type === 'DevshardDiffSent')
      .flatMap((r) => {
        const wire = Buffer.from((r.data as { txs: string }).txs, 'base64');
        return [wire];
      });
    expect(confirms.length).toBeGreaterThan(0);
    const s = (gw.ctx.network as ProtocolTransport).session(id)!;
    const records = s.replica.liveRecords().filter((x) => x.confirmedAt > 0n);
    expect(records.length).toBeGreaterThan(0);
    for (const rec of records) expect(rec.confirmedAtHeight).toBeGreaterThan(0n);
    expect(s.replica.floor().height).toBeGreaterThan(0n);
    void fromBinary;
    void DevshardTxSchema;
  });

  it('raises a max_tokens below 64 toward the host and cuts the answer at the client\'s own limit', async () => {
    const before = captured.length;
    const res = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, messages: longAsk, max_tokens: 10, stream: true }) });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    // Exchanges are captured as they end: an earlier request's drain (or a heartbeat) may end after
    // `before`, so the one sent is found by its messages, not by its place.
    const prompts = captured
      .slice(before)
      .filter((x) => x.url.endsWith('/chat/completions'))
      .map((x) => (JSON.parse(x.body) as { payload?: { prompt?: string } }).payload?.prompt)
      .filter((p): p is string => typeof p === 'string')
      .map((p) => JSON.parse(Buffer.from(p, 'base64').toString()) as { messages?: unknown });
    const sent = prompts.find((p) => JSON.stringify(p.messages) === JSON.stringify(longAsk));
    expect(sent).toMatchObject({ max_tokens: 64, min_tokens: 64 });
    const frames = text.split('\n\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
    const pieces = frames.flatMap((f) => f.choices).filter((c: any) => typeof c.delta?.content === 'string' && c.delta.content !== '');
    expect(pieces.length).toBeLessThanOrEqual(10);
    expect(frames.flatMap((f) => f.choices).some((c: any) => c.finish_reason === 'length')).toBe(true);
  }, 60_000);

  /** The tx kinds of each recorded diff, by nonce. */
  const diffKinds = () =>
    gw.store
      .readStream(devshardSessionStream(id))
      .filter((r) => r.type === 'DevshardDiffSent')
      .map((r) => {
        const d = fromBinary(DiffContentSchema, Buffer.from((r.data as { txs: string }).txs, 'base64'));
        return { nonce: Number(d.nonce), kinds: d.txs.map((t) => t.tx.case as string) };
      });

  it('runs idle heartbeat spans: a heartbeat diff per slot (the first opening a forced turn), the hosts\' acks in a later diff, the nonces recorded', async () => {
    const spans = () => diffKinds().filter((d) => d.kinds.includes('forceHeightSyncTurn')).length;
    for (let i = 0; i < 20 && spans() < 2; i++) {
      await gw.tasks.heartbeats.tick();
      await gw.ctx.engine.idle();
    }
    expect(spans()).toBeGreaterThanOrEqual(2);
    const kinds = diffKinds();
    const first = kinds.findIndex((d) => d.kinds.includes('forceHeightSyncTurn'));
    // Three slots: three heartbeat diffs, payload-less, the first with the forced turn.
    expect(kinds.slice(first, first + 3).map((d) => d.kinds)).toEqual([['forceHeightSyncTurn', 'heartbeat'], ['heartbeat'], ['heartbeat']]);
    // Each host acked the heartbeat addressed to its slot; a later diff carries the acks.
    const acks = kinds.slice(first + 3).flatMap((d) => d.kinds).filter((k) => k === 'heightAck');
    expect(acks.length).toBeGreaterThanOrEqual(3);
    // The span's nonces are recorded on the escrow before its diffs (no gap, no reuse after a crash).
    const skipped = gw.store.readStream(escrowStream(id)).filter((r) => r.type === 'NoncesSkipped' && (r.data as { reason: string }).reason === 'heartbeat span');
    expect(skipped.length).toBeGreaterThanOrEqual(2);
    // (The first span also drains the host txs still pending into a diff of its own, just before.)
    const span = skipped[0]!.data as { from: number; upTo: number };
    expect(span.upTo).toBe(kinds[first]!.nonce + 2);
    expect(kinds[first]!.nonce - span.from).toBeLessThanOrEqual(1);
    // Nonces stay contiguous, and a chat after the spans is served.
    expect(kinds.map((d) => d.nonce)).toEqual(kinds.map((_, i) => i + 1));
    const r = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'after the spans' }], max_tokens: 80 } });
    expect(r.status, r.text).toBe(200);
  }, 60_000);

  it('finalizes and settles with the tag "v5"; the keeper accepts it, and verify rebuilds the session', async () => {
    const f = await gw.call(`/devshard/${id}/v1/finalize`, { method: 'POST' });
    expect(f.status, f.text).toBe(200);
    expect(f.json.version).toBe('v5');
    file = f.json;
    const s = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { private_key: gw.keys.privateKey } });
    expect(s.status, s.text).toBe(200);
    expect((await gw.ctx.chain.escrow(id))!.settled).toBe(true);
    await gw.ctx.engine.idle();
    let out = '';
    const code = await runVerify(eventsFile(gw.storageDir), (x) => (out += x), (x) => (out += x));
    expect(code, out).toBe(0);
    expect(out).toMatch(new RegExp(`devshard escrow ${id} \\(v5 on /devshard/v5, tag "v5"\\): composed \\d+ diffs`));
    expect(out).toMatch(/settlement at nonce \d+ equals the replica/);
  }, 120_000);

  afterAll(async () => {
    const dir = process.env.GW5_CAPTURE_DIR;
    if (!dir || !file) return;
    const s = (gw.ctx.network as ProtocolTransport).session(id)!;
    mkdirSync(join(dir, 'caps'), { recursive: true });
    captured
      .filter((c) => new URL(c.url).pathname.includes(`/sessions/${id}/`))
      .forEach((c, seq) => {
        const u = new URL(c.url);
        const m = /^(\/hosts\/(\d+))(\/.*)$/.exec(u.pathname)!;
        const slot = s.escrow.slots.findIndex((x) => x.url === u.origin + m[1]);
        const record = { seq, received_at: c.at, method: 'POST', url: m[3], headers: c.headers, body_base64: Buffer.from(c.body).toString('base64'), target: u.origin + m[1], host_address: s.escrow.slots[slot]!.host, response: { status: c.status } };
        writeFileSync(join(dir, 'caps', `${String(seq).padStart(4, '0')}-POST.json`), JSON.stringify(record));
      });
    writeFileSync(join(dir, 'settlement.json'), JSON.stringify(file));
    writeFileSync(join(dir, 'session.json'), JSON.stringify({ creator: s.escrow.creator, slots: s.escrow.slots.map((x) => x.host), amount: String(s.escrow.amount), token_price: String(s.replica.config.tokenPrice) }));
  });
});
