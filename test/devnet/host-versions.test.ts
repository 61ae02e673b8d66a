/**
 * The simulated hosts serve each protocol version under its own route, as a real host behind
 * versiond does (../shared/notes/network-versions.md §1, §2): `/devshard/<name>` for each name in
 * DEVNET_HOST_VERSIONS (default every version we speak), a session there hashing `<name>` as its
 * state-root tag and living apart from the same escrow's session under another version; an
 * unserved version answered as versiond answers it; the retired `/v1/devshard` answered 410 exactly
 * as the host API answers it, unless DEVNET_LEGACY_ROUTE=1 keeps it for v2.
 */
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseHostVersions, parseLegacyRoute, registerSimulatedHosts } from '../../src/devnet/hosts/index.js';
import { HOST_VERSION_NAMES } from '../../src/devnet/hosts/protocol/host-versions.js';
import { SUPPORTED_VERSION_NAMES } from '../../src/protocol/versions.js';
import { newKey } from '../network/fixtures.js';
import { MODEL, ProtocolClient, startTestNet, type TestNet } from './host-protocol-client.js';

const chat = (i: number) => ({ model: MODEL, messages: [{ role: 'user', content: `question ${i}` }], max_tokens: 64 }) // v5's floor (every version takes 64);

/**
 * The host API's answer to the retired prefix, byte for byte: gonka 59b1ee7e
 * decentralized-api/internal/server/public/server.go `legacyDevshardDeprecated`
 * (`Deprecation: true`, `Link: </devshard/{version}>; rel="successor-version"`, 410, the map below
 * through echo v4.15.1's c.JSON: application/json, Go's encoding with sorted keys and a newline),
 * whose test devshard_deprecation_test.go asks it for these three paths.
 */
const GONE_BODY = '{"error":"deprecated","message":"/v1/devshard is deprecated; use /devshard/{version}"}\n';
const GONKA_TEST_PATHS = ['/v1/devshard', '/v1/devshard/stats/shards', '/v1/devshard/sessions/escrow-1/mempool'];

async function expectGone(res: Response): Promise<void> {
  expect(res.status).toBe(410);
  expect(res.headers.get('deprecation')).toBe('true');
  expect(res.headers.get('link')).toBe('</devshard/{version}>; rel="successor-version"');
  expect(res.headers.get('content-type')).toBe('application/json');
  const text = await res.text();
  expect(text).toBe(GONE_BODY);
  // gonka's own assertions (devshard_deprecation_test.go)
  expect(res.headers.get('link')).toContain('/devshard/{version}');
  const body = JSON.parse(text) as Record<string, string>;
  expect(body.error).toBe('deprecated');
  expect(body.message).toContain('/devshard/{version}');
}

describe('simulated hosts: /v1/devshard is gone (410, as the host API since #1386)', () => {
  let net: TestNet;
  beforeAll(async () => (net = await startTestNet({ legacyRoute: false })));
  afterAll(async () => net.close());

  it("answers gonka's deprecation test paths with its exact status, headers and body", async () => {
    for (const path of GONKA_TEST_PATHS) await expectGone(await fetch(`${net.hostUrl(0)}${path}`));
  });

  it('answers every method and path under it alike, whatever the body; ?pretty indents as echo does', async () => {
    const sessionPath = `${net.hostUrl(1)}/v1/devshard/sessions/${net.escrow.id}/chat/completions`;
    await expectGone(await fetch(sessionPath, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"diffs":[],"nonce":0}' }));
    await expectGone(await fetch(sessionPath, { method: 'POST', headers: { 'content-type': 'application/x-protobuf' }, body: new Uint8Array([1, 2, 3]) }));
    await expectGone(await fetch(`${net.hostUrl(2)}/v1/devshard/`, { method: 'DELETE' }));
    const pretty = await fetch(`${net.hostUrl(0)}/v1/devshard/sessions/1/diffs?pretty`);
    expect(pretty.status).toBe(410);
    expect(await pretty.text()).toBe('{\n  "error": "deprecated",\n  "message": "/v1/devshard is deprecated; use /devshard/{version}"\n}\n');
    // no session was opened by any of it
    expect(net.sim.protocol.peek(1, net.escrow.id)).toBeUndefined();
  });
});

describe('simulated hosts: one route per version, each session with its own tag', () => {
  let net: TestNet;
  beforeAll(async () => (net = await startTestNet({ legacyRoute: false })));
  afterAll(async () => net.close());

  it('serves every version we speak, and v5, by default', () => {
    expect(net.sim.versions).toEqual(HOST_VERSION_NAMES);
    expect(net.sim.legacyRoute).toBe(false);
  });

  it.each(SUPPORTED_VERSION_NAMES.map((v) => [v]))('/devshard/%s: a session hashing its name is accepted on every host', async (version) => {
    const client = new ProtocolClient(net, net.creator, { route: `/devshard/${version}` });
    expect(client.tag).toBe(version);
    for (let i = 0; i < 3; i++) {
      const a = await client.infer(chat(i));
      expect(a.status, a.text).toBe(200);
      expect(a.receipt!.nonce).toBe(a.nonce);
    }
    expect(client.mismatches).toEqual([]);
    for (let h = 0; h < 3; h++) {
      const s = net.sim.protocol.peek(h, net.escrow.id, version)!;
      expect(s.version).toBe(version);
      expect(s.replica.version).toBe(version);
    }
  });

  it("keeps each version's sessions apart (one devshardd and storage per version)", async () => {
    // the same escrow was opened under every version above: each host holds one session per version, each at nonce 3
    for (const v of SUPPORTED_VERSION_NAMES) expect(net.sim.protocol.peek(0, net.escrow.id, v)!.latestNonce).toBeGreaterThanOrEqual(1n);
    expect(net.sim.protocol.versionsOf(0, net.escrow.id)).toEqual([...SUPPORTED_VERSION_NAMES].reverse());
    const v3 = (await fetch(`${net.hostUrl(0)}/devshard/v3/sessions/${net.escrow.id}/diffs?from=1&to=9`).then((r) => r.json())) as { state_hash: string }[];
    const v4 = (await fetch(`${net.hostUrl(0)}/devshard/v4/sessions/${net.escrow.id}/diffs?from=1&to=9`).then((r) => r.json())) as { state_hash: string }[];
    expect(v3.length).toBeGreaterThan(0);
    expect(v3.length).toBe(v4.length);
    // same diffs' content, other tags: other roots
    for (let i = 0; i < v3.length; i++) expect(v3[i]!.state_hash).not.toBe(v4[i]!.state_hash);
  });

  it("refuses a diff whose root hashes another version's tag, with the host's root-mismatch text", async () => {
    const other = await startTestNet({ versions: ['v3', 'v4.1'], legacyRoute: false });
    try {
      const wrong = new ProtocolClient(other, other.creator, { route: '/devshard/v3', tag: 'v2' });
      const a = await wrong.infer(chat(1));
      expect(a.status).toBe(500);
      expect(JSON.parse(a.text).message).toMatch(/^apply diff nonce 1: post_state_root does not match computed state root: diff [0-9a-f]{64}, computed [0-9a-f]{64}$/);
      expect(other.sim.protocol.peek(a.host, other.escrow.id, 'v3')!.latestNonce).toBe(0n);
      // the tag of v4.1 on v3's route is refused alike; v3's own tag goes through
      const wrong41 = new ProtocolClient(other, other.creator, { route: '/devshard/v3', tag: 'v4.1' });
      expect((await wrong41.infer(chat(2))).status).toBe(500);
      const right = new ProtocolClient(other, other.creator, { route: '/devshard/v3' });
      expect((await right.infer(chat(3))).status).toBe(200);
      expect(right.mismatches).toEqual([]);
    } finally {
      await other.close();
    }
  });
});

describe('simulated hosts: what versiond answers around the versions', () => {
  let net: TestNet;
  let client: ProtocolClient;
  beforeAll(async () => {
    net = await startTestNet({ versions: ['v3', 'v4.1'], route: '/devshard/v3', legacyRoute: false });
    client = new ProtocolClient(net);
    expect((await client.infer(chat(1))).status).toBe(200);
  });
  afterAll(async () => net.close());

  const expectGoError = async (res: Response, status: number, text: string) => {
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await res.text()).toBe(`${text}\n`);
  };

  it('a version the host does not serve: 404 `version "<name>" not found` (versioned/internal/proxy/proxy.go)', async () => {
    await expectGoError(await fetch(`${net.hostUrl(0)}/devshard/v9/sessions/${net.escrow.id}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }), 404, 'version "v9" not found');
    // one we speak but this host was not given (DEVNET_HOST_VERSIONS=v3,v4.1)
    await expectGoError(await fetch(`${net.hostUrl(0)}/devshard/v4/sessions/${net.escrow.id}/mempool`), 404, 'version "v4" not found');
    await expectGoError(await fetch(`${net.hostUrl(0)}/devshard/v2`), 404, 'version "v2" not found');
    // the invented routes of old are no version either
    await expectGoError(await fetch(`${net.hostUrl(0)}/devshard/v1/sessions/5/sign`, { method: 'POST', body: '{}' }), 404, 'version "v1" not found');
    await expectGoError(await fetch(`${net.hostUrl(0)}/devshard/`), 400, 'version prefix required');
  });

  it("health: versiond's status at /devshard/healthz, a devshardd's `ok` at /devshard/<v>/healthz; a served version's unknown path is echo's 404", async () => {
    const status = await fetch(`${net.hostUrl(0)}/devshard/healthz`);
    expect(status.headers.get('content-type')).toBe('application/json');
    expect(await status.text()).toBe('[{"name":"v3","port":5000,"status":"running"},{"name":"v4.1","port":5001,"status":"running"}]\n');
    const ok = await fetch(`${net.hostUrl(0)}/devshard/v4.1/healthz`);
    expect([ok.status, await ok.text()]).toEqual([200, 'ok']);
    const nf = await fetch(`${net.hostUrl(0)}/devshard/v3/sessions/${net.escrow.id}/nothing`);
    expect([nf.status, await nf.text()]).toEqual([404, '{"message":"Not Found"}\n']);
  });

  it('versionless observability GETs answer from the version the session is bound to, else 404 page not found', async () => {
    const h = client.executorHost(1n);
    for (const route of ['diffs?from=1&to=5', 'mempool', 'signatures?nonce=1']) {
      const versioned = await fetch(`${net.hostUrl(h)}/devshard/v3/sessions/${net.escrow.id}/${route}`);
      const versionless = await fetch(`${net.hostUrl(h)}/devshard/sessions/${net.escrow.id}/${route}`);
      expect(versionless.status).toBe(200);
      expect(await versionless.text()).toBe(await versioned.text());
    }
    expect((await fetch(`${net.hostUrl(h)}/devshard/sessions/${net.escrow.id}/signatures`).then((r) => r.text()))).toBe(`{"message":"missing 'nonce' parameter"}`);
    // an escrow no session of this host is bound to
    await expectGoError(await fetch(`${net.hostUrl(h)}/devshard/sessions/777/mempool`), 404, '404 page not found');
    expect(net.sim.protocol.versionsOf(h, '777')).toEqual([]);
  });

  it('with the legacy route off, /v1/devshard is gone here too', async () => {
    await expectGone(await fetch(`${net.hostUrl(0)}/v1/devshard/sessions/${net.escrow.id}/mempool`));
  });
});

describe('simulated hosts: the legacy route kept (DEVNET_LEGACY_ROUTE=1)', () => {
  let net: TestNet;
  beforeAll(async () => (net = await startTestNet({ route: '/v1/devshard', legacyRoute: true })));
  afterAll(async () => net.close());

  it('serves v2 under /v1/devshard with the tag "v2", the same sessions as /devshard/v2', async () => {
    const client = new ProtocolClient(net);
    expect([client.route, client.tag]).toEqual(['/v1/devshard', 'v2']);
    for (let i = 0; i < 3; i++) expect((await client.infer(chat(i))).status).toBe(200);
    expect(client.mismatches).toEqual([]);
    const s = net.sim.protocol.peek(0, net.escrow.id, 'v2')!;
    expect(s.replica.version).toBe('v2');
    const legacy = await fetch(`${net.hostUrl(0)}/v1/devshard/sessions/${net.escrow.id}/diffs?from=1&to=9`).then((r) => r.text());
    const versioned = await fetch(`${net.hostUrl(0)}/devshard/v2/sessions/${net.escrow.id}/diffs?from=1&to=9`).then((r) => r.text());
    expect(JSON.parse(legacy)).toHaveLength(3);
    expect(legacy).toBe(versioned);
  });

  it('is read from DEVNET_LEGACY_ROUTE and DEVNET_HOST_VERSIONS when the options are absent', async () => {
    const k = newKey();
    const app = Fastify();
    const sim = registerSimulatedHosts(app, {
      chain: { escrow: () => undefined, tokenPrice: () => 1n },
      hosts: [{ index: 0, address: k.address, privateKey: k.privateKey, pubKey: k.pubKey, prefix: '/hosts/0' }],
      tokenDelayMs: 0,
      env: { DEVNET_LEGACY_ROUTE: '1', DEVNET_HOST_VERSIONS: ' v3 , v4.1,v3' },
    });
    await app.ready();
    try {
      expect([sim.versions, sim.legacyRoute]).toEqual([['v3', 'v4.1'], true]);
      // the legacy route is the v2 host's: an unknown escrow is its resolver's 500, not a 410
      const legacy = await app.inject({ method: 'GET', url: '/hosts/0/v1/devshard/sessions/5/mempool' });
      expect([legacy.statusCode, legacy.body]).toEqual([500, '{"message":"escrow 5 not found"}']);
      expect((await app.inject({ method: 'GET', url: '/hosts/0/devshard/v4/sessions/5/mempool' })).body).toBe('version "v4" not found\n');
    } finally {
      await app.close();
    }
  });
});

describe('DEVNET_HOST_VERSIONS and DEVNET_LEGACY_ROUTE', () => {
  it('read versions by name, default every version the hosts serve (ours and v5), refuse any other', () => {
    expect(HOST_VERSION_NAMES).toEqual([...new Set([...SUPPORTED_VERSION_NAMES, 'v5'])]);
    expect(parseHostVersions(undefined)).toEqual(HOST_VERSION_NAMES);
    expect(parseHostVersions('  ')).toEqual(HOST_VERSION_NAMES);
    expect(parseHostVersions('v4.1,,v3')).toEqual(['v4.1', 'v3']);
    expect(parseHostVersions('v5')).toEqual(['v5']);
    expect(() => parseHostVersions('v3,v6')).toThrow(`DEVNET_HOST_VERSIONS: "v6" is not a version the simulated hosts serve (${HOST_VERSION_NAMES.join(', ')})`);
    expect(() => parseHostVersions('4.1')).toThrow(/"4\.1" is not a version/);
  });

  it('read the legacy switch as a boolean, default off', () => {
    expect(parseLegacyRoute(undefined)).toBe(false);
    expect(parseLegacyRoute('0')).toBe(false);
    expect(parseLegacyRoute('off')).toBe(false);
    expect(parseLegacyRoute('1')).toBe(true);
    expect(parseLegacyRoute(' TRUE ')).toBe(true);
    expect(() => parseLegacyRoute('maybe')).toThrow('DEVNET_LEGACY_ROUTE must be 1 or 0 (true/false, on/off, yes/no), not "maybe"');
  });
});
