/**
 * The v5 seed RPC, `POST /devshard/v5/sessions/{id}/height-sync` (zpoken/gonka@86cff503
 * devshard/transport/server_heightsync.go `HandleHeightSync`; server/routes.go `withOwnerChat`;
 * client_heightsync.go `SeedHeightSync` sends `{}`): the escrow owner gets one signed Anchor of the
 * host's oracle as `{"height_sync":{…}}`, the session is bound, no nonce is spent; a bound session
 * survives a restart through the host's store (the host manager's `SessionServerExisting`). Real HTTP.
 */
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerSimulatedHosts } from '../../src/devnet/hosts/index.js';
import type { HostSessionStore } from '../../src/devnet/hosts/protocol/session.js';
import type { ReceivedDiff } from '../../src/devnet/hosts/protocol/wire.js';
import { heightSyncOriginBytes, type HeightSyncSection } from '../../src/devnet/hosts/protocol/height-section.js';
import { recoverAddress, requestHeaderMessage, signMessage, toHex } from '../../src/protocol/index.js';
import { clearFaults, newKey } from '../network/fixtures.js';
import { MODEL, ProtocolClient, startTestNet, type TestNet } from './host-protocol-client.js';

describe('v5 hosts: the height-sync seed RPC', () => {
  let net: TestNet;
  let client: ProtocolClient;
  beforeAll(async () => {
    net = await startTestNet({ route: '/devshard/v5', oracle: true });
    client = new ProtocolClient(net);
  });
  afterAll(async () => net.close());

  it("answers the owner's {} with the host's signed Anchor, exactly as Go writes it, and spends no nonce", async () => {
    net.chainTip.height = 4242n;
    const before = client.now();
    const res = await fetch(`${net.hostUrl(1)}/devshard/v5/sessions/42/height-sync`, signedInit(client, '{}'));
    const after = client.now();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    const text = await res.text();
    const s = (JSON.parse(text) as { height_sync: HeightSyncSection }).height_sync;
    const host = net.hosts[1]!;
    expect(s.timestamp_unix_ms).toBeGreaterThanOrEqual(before);
    expect(s.timestamp_unix_ms).toBeLessThanOrEqual(after);
    const unsigned =
      `{"height_sync":{"chain_id":"gonka-testnet","proof_type":"height-anchor-v1","mainnet_height":4242,` +
      `"mainnet_block_hash_hex":"${toHex(net.header(4242n).hash)}","timestamp_unix_ms":${s.timestamp_unix_ms},"direction":"response",` +
      `"originator_sender_id":"${host.address}","originator_timestamp_unix_ms":${s.timestamp_unix_ms},"sender_signature":"${s.sender_signature}"}}`;
    expect(text).toBe(unsigned);
    expect(recoverAddress(heightSyncOriginBytes(s), new Uint8Array(Buffer.from(s.sender_signature!, 'base64')))).toBe(host.address);
    // bound, nothing applied
    expect(net.sim.protocol.peek(1, '42', 'v5')!.latestNonce).toBe(0n);
    expect((await client.get(1, 'diffs?from=0&to=10')).text).toBe('[]');
    expect((await client.get(1, 'mempool')).text).toBe('{"txs":[]}');
  });

  it('does not read the body: any signed body is a seed', async () => {
    const r = await client.post(0, 'height-sync', 'not json at all');
    expect(r.status).toBe(200);
    expect((JSON.parse(r.text) as { height_sync: HeightSyncSection }).height_sync.originator_sender_id).toBe(net.hosts[0]!.address);
  });

  it('refuses anyone but the owner (members included) and unsigned requests', async () => {
    const member = { ...newKey(), address: net.hosts[2]!.address, privateKey: net.hosts[2]!.privateKey, pubKey: net.hosts[2]!.pubKey };
    expect(await client.post(2, 'height-sync', '{}', { key: member })).toEqual({ status: 403, text: '{"message":"restricted to escrow owner"}' });
    expect(await client.post(2, 'height-sync', '{}', { key: newKey() })).toEqual({ status: 403, text: '{"message":"restricted to escrow owner"}' });
    // once bound too
    expect(await client.post(1, 'height-sync', '{}', { key: member })).toEqual({ status: 403, text: '{"message":"restricted to escrow owner"}' });
    expect(await client.post(1, 'height-sync', '{}', { headers: { 'content-type': 'application/json' } })).toEqual({ status: 401, text: '{"message":"missing auth headers"}' });
    expect(await client.post(1, 'height-sync', '{}', { tsOffset: 31 })).toEqual({ status: 401, text: '{"message":"timestamp drift 31s exceeds maximum 30s"}' });
    expect(net.sim.protocol.peek(2, '42', 'v5')).toBeUndefined();
  });

  it('a host with the seed RPC off answers 404 after binding the session', async () => {
    net.faults.hosts = [2];
    net.faults.seedRpcOff = true;
    expect(await client.post(2, 'height-sync', '{}')).toEqual({ status: 404, text: '{"message":"height-sync seed RPC disabled"}' });
    clearFaults(net.faults);
    expect(net.sim.protocol.peek(2, '42', 'v5')!.latestNonce).toBe(0n);
  });

  it('the seeded session serves chat as usual', async () => {
    const a = await client.infer({ model: MODEL, messages: [{ role: 'user', content: 'after the seed' }], max_tokens: 64 });
    expect(a.status, a.text).toBe(200);
    expect(client.mismatches).toEqual([]);
  });
});

/** A fetch init signed by the client's key, as its `post` signs (for reading the raw response). */
function signedInit(client: ProtocolClient, body: string): RequestInit {
  const ts = BigInt(Math.floor(client.now() / 1000));
  const sig = signMessage(requestHeaderMessage('42', new TextEncoder().encode(body), ts), client.key.privateKey);
  return { method: 'POST', headers: { 'content-type': 'application/json', 'x-devshard-signature': Buffer.from(sig).toString('hex'), 'x-devshard-timestamp': String(ts) }, body };
}

describe('v5 hosts: a session bound before a restart stays bound', () => {
  it('a second mount of the same hosts over their store resolves the sessions they had bound (GETs, verify routes); the others 404', async () => {
    const rows = new Map<string, ReceivedDiff['json'][]>();
    const key = (h: string, e: string, v = 'v2') => `${h}/${v}/${e}`;
    const store: HostSessionStore = {
      load: (h, e, v) => [...(rows.get(key(h, e, v)) ?? [])],
      save: (h, e, d, v) => void rows.set(key(h, e, v), [...(rows.get(key(h, e, v)) ?? []), d]),
    };
    const net = await startTestNet({ route: '/devshard/v5', oracle: true, sessionStore: store });
    const client = new ProtocolClient(net);
    try {
      const a = await client.infer({ model: MODEL, messages: [{ role: 'user', content: 'before the restart' }], max_tokens: 64 });
      expect(a.status, a.text).toBe(200);
      // only the executor got a diff: the other two never bound the session
      const app = Fastify({ logger: false });
      registerSimulatedHosts(app, { chain: net.chain, hosts: net.hosts, tokenDelayMs: 0, versions: ['v5'], sessionStore: store });
      await app.listen({ host: '127.0.0.1', port: 0 });
      try {
        const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
        for (let i = 0; i < 3; i++) {
          const res = await fetch(`${base}/hosts/${i}/devshard/v5/sessions/42/diffs?from=1&to=1`);
          if (i === a.host) expect(((await res.json()) as unknown[]).length).toBe(1);
          else expect([res.status, await res.text()]).toEqual([404, '{"message":"session not found"}']);
          const vote = await fetch(`${base}/hosts/${i}/devshard/v5/sessions/42/verify-error-miss`, signedInit(client, '{"inference_id":1}'));
          const expected = i === a.host ? [200, '{"accept":false,"voter_slot":0,"reject_cause":"no_finish_tx"}'] : [404, '{"message":"session not found"}'];
          expect([vote.status, await vote.text()]).toEqual(expected);
        }
      } finally {
        await app.close();
      }
    } finally {
      await net.close();
    }
  });
});
