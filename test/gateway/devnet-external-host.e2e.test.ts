/**
 * Any implementation of the host side can stand in for a simulated host (issue 29): the devnet takes
 * a host it does not run (DEVNET_EXTERNAL_HOSTS=addr@url) and gives it escrow slot 2, after its two
 * simulated hosts. The external host here is a host server of its own on another port, built from
 * src/devnet/hosts with a key given to it (the devnet never sees the key; it knows the address only).
 * A real gateway (DEVSHARD_HOST_PROTOCOL=devshard) chats until the external slot has executed
 * (slots[nonce % 3]), finalizes and settles; the devnet keeper accepts only because the external
 * slot's signature recovers to its address. The simulated hosts' keys are given too
 * (DEVNET_HOST_KEYS), so each slot's address is one a process elsewhere can hold the key of.
 *
 * Not a second devnet's simulated host: a simulated host reads escrows from its own devnet's chain,
 * and a second devnet has none of the first one's escrows. The host server here reads the first
 * devnet's chain in process (as a real host reads its chain node).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Fastify, { type FastifyInstance } from 'fastify';
import { addressOfPrivateKey, addressOfPubKey, compressedPubKey, deterministicKeyHex, privateKeyBytes } from '../../src/chain/keys.js';
import { toChainSettlement } from '../../src/gateway/escrows/settlement.js';
import { signMessage, stateSignatureBytes } from '../../src/protocol/index.js';
import type { DevnetChainView, HostIdentity } from '../../src/devnet/hosts/chain-view.js';
import { registerSimulatedHosts, type SimulatedHosts } from '../../src/devnet/hosts/index.js';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';

const EXTERNAL_KEY = deterministicKeyHex('test/external-host/slot-2');
const HOST_KEYS = [deterministicKeyHex('test/given-host/0'), deterministicKeyHex('test/given-host/1')];

/** One host server on its own loopback port, holding `key`, reading the chain through `view()`. */
async function startExternalHost(key: string, view: () => DevnetChainView): Promise<{ app: FastifyInstance; url: string; address: string; hosts: SimulatedHosts; paths: string[] }> {
  const privateKey = privateKeyBytes(key);
  const pubKey = compressedPubKey(privateKey);
  const identity: HostIdentity = { index: 0, address: addressOfPubKey(pubKey), privateKey, pubKey, prefix: '/external' };
  const chain: DevnetChainView = {
    escrow: (id) => view().escrow(id),
    tokenPrice: () => view().tokenPrice(),
    sessionBindParams: () => view().sessionBindParams?.() ?? {},
  };
  const app = Fastify();
  const paths: string[] = [];
  app.addHook('onRequest', async (req) => {
    paths.push(`${req.method} ${req.url.replace(/\?.*$/, '')}`);
  });
  const hosts = registerSimulatedHosts(app, { chain, hosts: [identity], tokenDelayMs: 0 });
  const origin = await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, url: `${origin}${identity.prefix}`, address: identity.address, hosts, paths };
}

describe('an external host in an escrow slot, end to end over the devshard protocol', () => {
  let gw: TestGateway;
  let escrowId: string;
  let ext: Awaited<ReturnType<typeof startExternalHost>>;

  beforeAll(async () => {
    ext = await startExternalHost(EXTERNAL_KEY, () => gw.devnet!.chain);
    ({ gw, escrowId } = await startGatewayWithEscrow({
      env: {
        DEVSHARD_HOST_PROTOCOL: 'devshard',
        DEVNET_HOSTS: '2',
        DEVNET_HOST_KEYS: HOST_KEYS.join(','),
        DEVNET_EXTERNAL_HOSTS: `${ext.address}@${ext.url}`,
      },
    }));
  }, 60_000);
  afterAll(async () => {
    await disposeTestGateway(gw);
    await ext?.app.close();
  });

  it('the escrow has the simulated hosts (their given keys) in slots 0 and 1, the external host in slot 2 at its URL', async () => {
    expect(ext.address).toBe(addressOfPrivateKey(EXTERNAL_KEY));
    const slots = (await gw.ctx.chain.escrow(escrowId))!.slots;
    expect(slots.map((s) => s.host)).toEqual([addressOfPrivateKey(HOST_KEYS[0]!), addressOfPrivateKey(HOST_KEYS[1]!), ext.address]);
    expect(slots[2]!.url).toBe(ext.url);
    expect(gw.devnet!.hosts.map((h) => h.address)).toEqual(slots.slice(0, 2).map((s) => s.host));
  });

  it('chat reaches the external slot as executor; finalize collects its signature; the keeper accepts the settle and pays it', async () => {
    // nonces 1..4: executors slots 1, 2, 0, 1
    for (let i = 0; i < 4; i++) {
      const body = { model: MODEL, messages: [{ role: 'user', content: `external question ${i}` }], max_tokens: 16, ...(i % 2 === 0 ? { stream: true } : {}) };
      const r = await gw.call('/v1/chat/completions', { body });
      expect(r.status, r.text).toBe(200);
    }
    await gw.ctx.engine.idle();
    // the escrow speaks v4.1 (the newest the devnet approves): its route under the host's URL, never the retired /v1/devshard
    const executed = ext.paths.filter((p) => p === `POST /external/devshard/v4.1/sessions/${escrowId}/chat/completions`);
    expect(executed.length).toBeGreaterThan(0);
    expect(ext.paths.filter((p) => p.includes('/v1/devshard'))).toEqual([]);
    expect(ext.hosts.protocol.versionsOf(0, escrowId)).toEqual(['v4.1']);
    const session = ext.hosts.protocol.peek(0, escrowId)!;
    expect(session.ownSlots).toEqual([2]);

    const f = await gw.call(`/devshard/${escrowId}/v1/finalize`, { method: 'POST' });
    expect(f.status, f.text).toBe(200);
    const file = f.json;
    expect(file.signatures.map((x: any) => x.slot_id)).toEqual([0, 1, 2]);
    expect(ext.paths.some((p) => p === `GET /external/devshard/v4.1/sessions/${escrowId}/signatures`)).toBe(true);
    const extStat = file.host_stats.find((h: any) => h.slot_id === 2);
    expect(extStat.cost).toBeGreaterThan(0); // it executed (and its Finish was applied)

    // The keeper checks slot 2 against its address: the same settlement with slot 2 signed by
    // another key (over the same content) is refused with the keeper's text, nothing settled.
    const recorded = gw.ctx.engine.escrow(escrowId)!.context.settlement!;
    const other = privateKeyBytes(deterministicKeyHex('test/external-host/impostor'));
    const forged = signMessage(stateSignatureBytes(Buffer.from(recorded.stateRoot, 'hex'), escrowId, BigInt(recorded.nonce)), other);
    const bad = { ...recorded, signatures: recorded.signatures.map((x) => (x.slotId === 2 ? { ...x, signature: Buffer.from(forged).toString('base64') } : x)) };
    const outcome = await gw.ctx.chain.broadcast(await gw.ctx.chain.prepareSettleEscrow(gw.keys.privateKey, toChainSettlement(bad)));
    expect(outcome.code).toBe(1);
    expect(outcome.rawLog).toBe(`failed to execute message; message index: 0: signature for slot 2 recovered ${addressOfPrivateKey(deterministicKeyHex('test/external-host/impostor'))}, expected ${ext.address}`);
    expect((await gw.ctx.chain.escrow(escrowId))!.settled).toBe(false);

    const before = await gw.ctx.chain.balance(ext.address);
    const s = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: {} });
    expect(s.status, s.text).toBe(200);
    expect(s.json).toMatchObject({ status: 'settled', settled: true });
    expect((await gw.ctx.chain.escrow(escrowId))!.settled).toBe(true);
    // slot 2 is the third host_stats entry: its cost plus fees / 3 (plus one when fees % 3 > 2, never)
    const fees = BigInt(file.fees);
    const index = file.host_stats.findIndex((h: any) => h.slot_id === 2);
    const share = fees / 3n + (BigInt(index) < fees % 3n ? 1n : 0n);
    expect((await gw.ctx.chain.balance(ext.address)) - before).toBe(BigInt(extStat.cost) + share);
  }, 60_000);
});

describe('a devnet of external hosts only (DEVNET_HOSTS=0)', () => {
  let gw: TestGateway;
  let escrowId: string;
  const exts: Awaited<ReturnType<typeof startExternalHost>>[] = [];

  beforeAll(async () => {
    for (const k of ['a', 'b']) exts.push(await startExternalHost(deterministicKeyHex(`test/external-only/${k}`), () => gw.devnet!.chain));
    ({ gw, escrowId } = await startGatewayWithEscrow({
      env: { DEVSHARD_HOST_PROTOCOL: 'devshard', DEVNET_HOSTS: '0', DEVNET_EXTERNAL_HOSTS: exts.map((e) => `${e.address}@${e.url}`).join(',') },
    }));
  }, 60_000);
  afterAll(async () => {
    await disposeTestGateway(gw);
    for (const e of exts) await e.app.close();
  });

  it('every slot is an external host; chat, finalize and settle run on them alone', async () => {
    expect(gw.devnet!.hosts).toEqual([]);
    expect((await gw.ctx.chain.escrow(escrowId))!.slots.map((s) => s.host)).toEqual(exts.map((e) => e.address));
    for (let i = 0; i < 2; i++) {
      const r = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: `only external ${i}` }], max_tokens: 8 } });
      expect(r.status, r.text).toBe(200);
    }
    const s = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: {} });
    expect(s.status, s.text).toBe(200);
    expect(s.json).toMatchObject({ status: 'settled', settled: true });
    const file = (await gw.call(`/devshard/${escrowId}/v1/finalize`)).json;
    expect(file.signatures.map((x: any) => x.slot_id)).toEqual([0, 1]);
    expect(file.host_stats.every((h: any) => h.cost > 0)).toBe(true);
  }, 60_000);
});
