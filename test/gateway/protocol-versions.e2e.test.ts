/**
 * Two escrows of different protocol versions side by side in one gateway, end to end on the
 * devnet: a v2 escrow on the legacy route `/v1/devshard` (DEVNET_LEGACY_ROUTE=1 keeps it served,
 * as for an old log) and a v4.1 escrow on `/devshard/v4.1` (the default: the newest version we speak
 * that the chain approves). Each serves chats streamed and not and a tool call, is finalized and
 * settled; the devnet keeper accepts each settlement under its own state-root tag, which it checks
 * against the approved-versions store. The hosts bind a session's tag to its route's version, so a
 * diff hashed with another tag would have been refused at the first chat.
 *
 * GW41_CAPTURE_DIR: writes the v4.1 escrow's gateway→host traffic, its settlement file and its
 * facts in ../shared/tools/realnet's capture format (verify-request.mjs --prefix /devshard/v4.1,
 * verify-diffs.mjs --version v4.1, verify-finalize.mjs --approved v4.1).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Exchange, ProtocolTransport } from '../../src/network/devshard/protocol-transport.js';
import { devshardSessionStream, escrowStream } from '../../src/events/catalog.js';
import { eventsFile } from '../../src/events/sqlite-store.js';
import { runVerify } from '../../src/cli/commands/verify.js';
import { disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];

describe('a v2 escrow and a v4.1 escrow side by side', () => {
  let gw: TestGateway;
  const captured: Exchange[] = [];
  const ids: Record<'v2' | 'v4.1', string> = { v2: '', 'v4.1': '' };
  const files: Record<string, any> = {};

  beforeAll(async () => {
    gw = await startTestGateway({ env: { DEVSHARD_HOST_PROTOCOL: 'devshard', DEVNET_LEGACY_ROUTE: '1' } });
    (gw.ctx.network as ProtocolTransport).setExchangeListener((x) => captured.push(x));
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  const create = async (body: Record<string, unknown>) => {
    const r = await gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key: gw.keys.privateKey, register: true, ...body } });
    expect(r.status, r.text).toBe(200);
    return r.json.id as string;
  };

  /** Four chats (streamed, plain, a tool call streamed and plain) on whichever escrow is routable. */
  async function chats(tag: string) {
    for (let i = 0; i < 4; i++) {
      const body: Record<string, unknown> = { model: MODEL, messages: [{ role: 'user', content: `${tag} question ${i}: "quotes", emoji 🦊, U+2028 \u2028 end` }], max_tokens: 48 };
      if (i >= 2) Object.assign(body, { tools, tool_choice: 'required' });
      if (i % 2 === 0) {
        const res = await fetch(`${gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ ...body, stream: true }),
        });
        const text = await res.text();
        expect(res.status, text).toBe(200);
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
  }

  it('each escrow records its version, route and tag, and its chats go to its route', async () => {
    ids.v2 = await create({ protocol_version: 'v2' });
    await chats('v2');
    // The v2 escrow stops taking traffic (still unsettled); the v4.1 one is created by default.
    expect((await gw.call(`/v1/admin/devshards/${ids.v2}/deactivate`, { method: 'POST' })).status).toBe(200);
    ids['v4.1'] = await create({});
    await chats('v4.1');

    const first = (id: string) => gw.store.readStream(escrowStream(id))[0]!.data as { protocol?: unknown };
    expect(first(ids.v2).protocol).toEqual({ version: 'v2', route: '/v1/devshard', tag: 'v2' });
    expect(first(ids['v4.1']).protocol).toEqual({ version: 'v4.1', route: '/devshard/v4.1', tag: 'v4.1' });
    const paths = (id: string) => captured.filter((x) => new URL(x.url).pathname.includes(`/sessions/${id}/`)).map((x) => new URL(x.url).pathname.replace(/^\/hosts\/\d+/, ''));
    expect(paths(ids.v2)).toHaveLength(4);
    expect(paths(ids.v2).every((p) => p === `/v1/devshard/sessions/${ids.v2}/chat/completions`)).toBe(true);
    expect(paths(ids['v4.1'])).toHaveLength(4);
    expect(paths(ids['v4.1']).every((p) => p === `/devshard/v4.1/sessions/${ids['v4.1']}/chat/completions`)).toBe(true);
    expect(captured.every((x) => x.status === 200)).toBe(true);
    // Operators see each one's version and route.
    const list = await gw.call('/v1/admin/devshards');
    const row = (id: string) => list.json.devshards.find((d: any) => d.id === id);
    expect(row(ids.v2)).toMatchObject({ protocol_version: 'v2', route_prefix: '/v1/devshard', state_root_version: 'v2' });
    expect(row(ids['v4.1'])).toMatchObject({ protocol_version: 'v4.1', route_prefix: '/devshard/v4.1', state_root_version: 'v4.1' });
    const status = await gw.call('/v1/status');
    const live = status.json.devshards.find((d: any) => d.id === ids['v4.1']);
    expect(live).toMatchObject({ protocol_version: 'v4.1', route_prefix: '/devshard/v4.1' });
    // Each host acknowledged the last diff it was sent: nonce n goes to slot n % 3 (with every diff
    // before it as catch-up), so slot 0 has applied through 3, slot 1 through 4, slot 2 through 2.
    expect(live.hosts_applied.map((h: any) => h.nonce)).toEqual([3, 4, 2]);
  }, 120_000);

  it('finalizes and settles each one under its own tag; the keeper accepts both', async () => {
    for (const [version, id] of Object.entries(ids)) {
      const f = await gw.call(`/devshard/${id}/v1/finalize`, { method: 'POST' });
      expect(f.status, f.text).toBe(200);
      expect(f.json.version).toBe(version);
      files[version] = f.json;
      const s = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { private_key: gw.keys.privateKey } });
      expect(s.status, s.text).toBe(200);
      const onChain = await gw.ctx.chain.escrow(id);
      expect(onChain!.settled).toBe(true);
      // The settle tx's event names the tag the keeper checked.
      const hash = gw.store.readStream(escrowStream(id)).find((r) => r.type === 'EscrowSettled')!.data as { txHash: string };
      const tx = (await (await fetch(`${gw.devnet!.url}/cosmos/tx/v1beta1/txs/${hash.txHash}`)).json()) as any;
      const settled = (tx.tx_response.events as { type: string; attributes: { key: string; value: string }[] }[]).find((e) => e.type.endsWith('devshard_escrow_settled'))!;
      const attr = settled.attributes.find((a) => a.key === 'state_root_and_protocol_version')!.value;
      expect(attr.replace(/^"|"$/g, '')).toBe(version);
    }
  }, 120_000);

  it('verify tells the diffs composed from the diffs each host applied', async () => {
    await gw.ctx.engine.idle();
    const hostsAcked = gw.store.readStream(devshardSessionStream(ids['v4.1'])).filter((r) => r.type === 'DevshardHostAcknowledged');
    expect(hostsAcked.length).toBeGreaterThan(0);
    let out = '';
    const code = await runVerify(eventsFile(gw.storageDir), (s) => (out += s), (s) => (out += s));
    expect(code, out).toBe(0);
    expect(out).toMatch(new RegExp(`devshard escrow ${ids['v4.1']} \\(v4\\.1 on /devshard/v4\\.1, tag "v4\\.1"\\): composed \\d+ diffs`));
    expect(out).toMatch(new RegExp(`devshard escrow ${ids.v2} \\(v2 on /v1/devshard, tag "v2"\\)`));
    expect(out).toMatch(/applied by the hosts: http:\/\/[^ ]+ to nonce \d+/);
  }, 60_000);

  afterAll(async () => {
    const dir = process.env.GW41_CAPTURE_DIR;
    if (!dir) return;
    const id = ids['v4.1'];
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
    writeFileSync(join(dir, 'settlement.json'), JSON.stringify(files['v4.1']));
    writeFileSync(join(dir, 'session.json'), JSON.stringify({ creator: s.escrow.creator, slots: s.escrow.slots.map((x) => x.host), amount: String(s.escrow.amount), token_price: String(s.replica.config.tokenPrice) }));
  });
});
