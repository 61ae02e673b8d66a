/**
 * Choosing an escrow's protocol version, and what is refused, through the whole stack on the devnet:
 * - a create at a version (or state-root tag) the chain's approved-versions store does not list is
 *   refused before anything is signed: 400 naming the listed versions, no intent in the log, no fee;
 * - a version or route we do not speak is a 400 naming the member (devshardctl's words for a route);
 * - without a choice the escrow speaks the newest version we speak that the chain approves;
 * - a host that refuses the escrow's route (410, the host API's deprecation) or its first diff's
 *   root (a state-root tag other than the hosts' stamp) fails the chat with an operator's error that
 *   names the escrow, its route or tag and the remedy, shows in /v1/status and is in the log.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devshardSessionStream, escrowStream } from '../../src/events/catalog.js';
import { disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const chat = { model: MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 };

async function create(gw: TestGateway, body: Record<string, unknown>) {
  return gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key: gw.keys.privateKey, register: true, ...body } });
}

describe('a chain that approves only v4.1 and v3', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ env: { DEVSHARD_HOST_PROTOCOL: 'devshard', DEVNET_APPROVED_VERSIONS: 'v3,v4.1' } });
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  const intents = () => [...gw.store.readAll(0)].filter((r) => r.type === 'EscrowCreateRequested').length;

  it('refuses a version or a tag the chain does not list before any fee, naming the list', async () => {
    const creator = await gw.ctx.chain.addressOf(gw.keys.privateKey);
    const before = await gw.ctx.chain.balance(creator);
    for (const body of [{ protocol_version: 'v2' }, { protocol_version: '4' }, { protocol_version: 'v4.1', state_root_version: 'v2' }]) {
      const r = await create(gw, body);
      expect(r.status, r.text).toBe(400);
      expect(r.json.error.code).toBe('version_not_approved');
      expect(r.json.error.param).toBe('protocol_version');
      expect(r.json.error.message).toMatch(/refused before any transaction was sent \(no fee spent\)/);
      expect(r.json.error.message).toContain('(listed: v3, v4.1)');
    }
    expect(intents()).toBe(0);
    expect(await gw.ctx.chain.balance(creator)).toBe(before);
  }, 60_000);

  it('refuses what this gateway does not speak, naming the member', async () => {
    const v9 = await create(gw, { protocol_version: 'v9' });
    expect(v9.status).toBe(400);
    expect(v9.json.error).toMatchObject({ code: 'unsupported_protocol_version', param: 'protocol_version' });
    expect(v9.json.error.message).toContain('"v9" is not one this gateway speaks (v2, v3, v4, v4.1, v5)');
    const route = await create(gw, { route_prefix: '/api/devshard' });
    expect(route.status).toBe(400);
    expect(route.json.error).toMatchObject({ code: 'unsupported_protocol_version', param: 'route_prefix' });
    expect(route.json.error.message).toContain('unsupported devshard route prefix "/api/devshard"');
    const clash = await create(gw, { protocol_version: 'v4.1', route_prefix: '/devshard/v3' });
    expect(clash.status).toBe(400);
    expect(clash.json.error.message).toContain('serves v3, not the escrow\'s protocol version v4.1');
    expect(intents()).toBe(0);
  }, 60_000);

  it('without a choice: the newest version we speak that the chain approves; a route names its version', async () => {
    const a = await create(gw, {});
    expect(a.status, a.text).toBe(200);
    const b = await create(gw, { route_prefix: '/devshard/v3', register: false });
    expect(b.status, b.text).toBe(200);
    const protocolOf = (id: string) => (gw.store.readStream(escrowStream(id))[0]!.data as { protocol?: unknown }).protocol;
    expect(protocolOf(a.json.id)).toEqual({ version: 'v4.1', route: '/devshard/v4.1', tag: 'v4.1' });
    expect(protocolOf(b.json.id)).toEqual({ version: 'v3', route: '/devshard/v3', tag: 'v3' });
    // Registering it later keeps what it recorded; naming another version is refused.
    const other = await gw.call('/v1/admin/devshards', { body: { escrow_id: b.json.id, protocol_version: 'v4.1' } });
    expect(other.status).toBe(400);
    expect(other.json.error.code).toBe('protocol_version_fixed');
    const same = await gw.call('/v1/admin/devshards', { body: { escrow_id: b.json.id } });
    expect(same.status, same.text).toBe(200);
    expect(same.json).toMatchObject({ protocol_version: 'v3', route_prefix: '/devshard/v3', state_root_version: 'v3' });
  }, 60_000);
});

describe('hosts that refuse an escrow\'s route or its tag', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    // The simulated hosts answer /v1/devshard with the host API's 410 (no legacy route).
    gw = await startTestGateway({ env: { DEVSHARD_HOST_PROTOCOL: 'devshard', DEVNET_LEGACY_ROUTE: '0' } });
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  it('a v2 escrow on /v1/devshard: the 410 is an operator error naming the route and the remedy, in status and the log', async () => {
    const c = await create(gw, { protocol_version: 'v2' });
    expect(c.status, c.text).toBe(200);
    const id = c.json.id as string;
    const r = await gw.call('/v1/chat/completions', { body: chat });
    expect(r.status).toBe(502);
    expect(r.json.error.message).toContain('the network retired the route /v1/devshard');
    expect(r.json.error.message).toContain(`escrow ${id} speaks v2 on /v1/devshard`);
    expect(r.json.error.message).toContain(`POST /v1/admin/devshards/${id}/deactivate`);
    const status = await gw.call('/v1/status');
    const d = status.json.devshards.find((x: any) => x.id === id);
    expect(d.protocol_error).toMatchObject({ rule: 'route_retired', status: 410 });
    await gw.ctx.engine.idle();
    const refused = gw.store.readStream(devshardSessionStream(id)).filter((e) => e.type === 'DevshardHostRefused');
    expect(refused.length).toBe(1);
    expect(refused[0]!.data).toMatchObject({ escrowId: id, status: 410, rule: 'route_retired' });
    expect(gw.logs.filter((l) => l.includes('route_retired')).length).toBe(1);
    expect((await gw.call(`/v1/admin/devshards/${id}/deactivate`, { method: 'POST' })).status).toBe(200);
  }, 60_000);

  it('an escrow whose tag is not the hosts\' stamp: the first diff\'s root mismatch names the tag and the setting', async () => {
    const c = await create(gw, { protocol_version: 'v4.1', state_root_version: 'v4' });
    expect(c.status, c.text).toBe(200);
    const id = c.json.id as string;
    const r = await gw.call('/v1/chat/completions', { body: chat });
    expect(r.status).toBe(502);
    expect(r.json.error.message).toContain(`refused escrow ${id}'s first diff: post_state_root does not match computed state root`);
    expect(r.json.error.message).toContain('state-root tag "v4"');
    expect(r.json.error.message).toContain('state_root_version');
    expect(r.json.error.message).toContain('DEVSHARD_STATE_ROOT_VERSION');
    const status = await gw.call('/v1/status');
    expect(status.json.devshards.find((x: any) => x.id === id).protocol_error).toMatchObject({ rule: 'state_root_tag_mismatch' });
  }, 60_000);
});
