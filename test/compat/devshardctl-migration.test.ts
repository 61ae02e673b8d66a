/**
 * Migration from devshardctl (issue 30): POST /v1/admin/devshards/import with devshardctl's body
 * (gateway.go handleAdminImportDevshard: id, storage_path, private_key_env, model,
 * protocol_version, active) adopts a live escrow from devshardctl's escrow state store
 * (devshard/storage/sqlite.go), written here by our fixture generator (devshardctl-store.ts) for an
 * escrow that exists on the devnet. Its diffs are replayed by the protocol replica: the balance and
 * the state root are exact, the next request uses the next nonce. Refusals are clear 4xx bodies.
 *
 * The main scenario is a modern store: devshardctl bound the session at v4.1 (sessions.version
 * 'v4.1', roots hashed with the tag "v4.1"), imported without protocol_version, so the version is
 * the store's; the devnet's hosts serve /devshard/v4.1 and answer the legacy /v1/devshard with 410.
 * A v2-era store (body protocol_version 'v2') still imports and serves where the hosts keep the
 * legacy route (DEVNET_LEGACY_ROUTE=1).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeys } from '../../src/config/index.js';
import { startDevnet, type Devnet } from '../../src/devnet/chain/index.js';
import { verifyLog } from '../../src/events/verify.js';
import { devshardSessionStream } from '../../src/events/catalog.js';
import { runVerify } from '../../src/cli/commands/verify.js';
import { projectionsCheck } from '../../src/projections/verify-check.js';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { writeDevshardctlStore, type StoreSpec } from './devshardctl-store.js';

describe('migration from devshardctl: import from its escrow state store', () => {
  const keys = generateKeys();
  const root = mkdtempSync(join(tmpdir(), 'shardgate-migrate-'));
  let devnet: Devnet;
  let source: TestGateway; // only creates escrows on the shared chain, as devshardctl did
  let gw: TestGateway;
  let escrowId: string;
  let spec: Omit<StoreSpec, 'dir'>;

  const specFor = async (id: string): Promise<Omit<StoreSpec, 'dir'>> => {
    const escrow = (await gw.ctx.chain.escrow(id))!;
    const hostKeys = new Map(devnet.hosts.map((h) => [h.address, h.privateKey]));
    return {
      escrowId: id,
      epochId: escrow.epochIndex,
      creator: escrow.creator,
      creatorPrivateKeyHex: keys.privateKey,
      amount: escrow.amount,
      slots: escrow.slots.map((s) => s.host),
      keyOf: (a) => hostKeys.get(a)!,
      requests: 6,
      closeLast: true,
      // devshardctl bound the session at v4.1: its sessions.version column and its roots' tag.
      version: 'v4.1',
    };
  };
  const importBody = (id: string, dir: string, extra: Record<string, unknown> = {}) => ({
    id,
    storage_path: dir,
    private_key_env: 'DEVSHARD_PRIVATE_KEY',
    model: MODEL,
    // No protocol_version: the store's sessions.version column names it.
    active: false,
    ...extra,
  });
  const importCall = (body: object) => gw.call('/v1/admin/devshards/import', { body });

  beforeAll(async () => {
    devnet = await startDevnet({ env: { DEVNET_BLOCK_TIME_MS: '50', DEVNET_TOKEN_DELAY_MS: '0' }, creators: [keys.privateKey], statePath: join(root, 'devnet.sqlite'), port: 0 });
    const chainEnv = { NODE_RPC: devnet.rpcUrl, NODE_CHAIN_API: devnet.url, NODE_BASE: devnet.url };
    source = await startTestGateway({ keys, env: { ...chainEnv, DEVSHARD_INSTANCE_NAME: 'devshardctl-stand-in' } });
    // storage_path must lie inside DEVSHARD_IMPORT_DIR (issue 39): the stores are written under root.
    gw = await startTestGateway({ keys, env: { ...chainEnv, DEVSHARD_IMPORT_DIR: root } });
    escrowId = await createEscrowViaApi(source);
    spec = await specFor(escrowId);
  });
  afterAll(async () => {
    await disposeTestGateway(source);
    await disposeTestGateway(gw);
    await devnet?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('refuses a missing store, a file that is not a store, and a corrupt one with 400s naming the rule', async () => {
    const missing = await importCall(importBody(escrowId, join(root, 'nowhere')));
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatchObject({ code: 'store_not_found', param: 'storage_path' });
    expect(missing.json.error.message).toContain('does not exist');

    const empty = join(root, 'empty');
    mkdirSync(empty);
    const notStore = await importCall(importBody(escrowId, empty));
    expect(notStore.status).toBe(400);
    expect(notStore.json.error.code).toBe('store_not_found');
    expect(notStore.json.error.message).toContain('epoch_<n>.db');

    const corrupt = join(root, 'corrupt');
    mkdirSync(corrupt);
    writeFileSync(join(corrupt, `epoch_${spec.epochId}.db`), 'this is not an sqlite file, devshardctl would not write it'.repeat(100));
    const bad = await importCall(importBody(escrowId, corrupt));
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('store_corrupt');
    expect(gw.ctx.engine.escrow(escrowId)).toBeUndefined();
  });

  it('refuses a store of another escrow (escrow id mismatch) and a store with a gap in its nonces', async () => {
    const other = join(root, 'other');
    writeDevshardctlStore({ ...spec, dir: other, escrowId: '999999' });
    const mismatch = await importCall(importBody(escrowId, other));
    expect(mismatch.status).toBe(400);
    expect(mismatch.json.error.code).toBe('escrow_id_mismatch');
    expect(mismatch.json.error.message).toContain('999999');

    const gap = join(root, 'gap');
    writeDevshardctlStore({ ...spec, dir: gap, dropNonce: 3 });
    const gapped = await importCall(importBody(escrowId, gap));
    expect(gapped.status).toBe(400);
    expect(gapped.json.error.code).toBe('nonce_gap');
    expect(gapped.json.error.message).toContain('nonce 3 is missing');

    // The right store with a protocol_version this gateway does not speak: refused before the replay.
    const good = join(root, 'wrong-version');
    writeDevshardctlStore({ ...spec, dir: good });
    const unknown = await importCall(importBody(escrowId, good, { protocol_version: 'v9' }));
    expect(unknown.status).toBe(400);
    expect(unknown.json.error).toMatchObject({ code: 'unsupported_protocol_version', param: 'protocol_version' });
    expect(unknown.json.error.message).toContain('v4.1');
    // The right store with the wrong protocol_version (its tag "v3", not the store's "v4.1"): the
    // replay diverges at the first root.
    const diverged = await importCall(importBody(escrowId, good, { protocol_version: 'v3' }));
    expect(diverged.status).toBe(400);
    expect(diverged.json.error).toMatchObject({ code: 'replay_diverged', param: 'protocol_version' });
    expect(diverged.json.error.message).toMatch(/diff of nonce 1 .*now v3 with the tag 'v3'/);
    // Without protocol_version the store's sessions.version column is read: a store whose column
    // says v3 over roots tagged "v4.1" diverges the same way (the default, v4.1, would replay).
    const column = join(root, 'column-v3');
    writeDevshardctlStore({ ...spec, dir: column, sessionVersion: 'v3' });
    const byColumn = await importCall(importBody(escrowId, column));
    expect(byColumn.status).toBe(400);
    expect(byColumn.json.error).toMatchObject({ code: 'replay_diverged', param: 'protocol_version' });
    expect(byColumn.json.error.message).toContain("now v3 with the tag 'v3'");
    // A store made under another session config than the chain's (the hosts bound the chain's): its
    // own roots are consistent, but our session could not continue it; the first nonce is named.
    const otherConfig = join(root, 'other-config');
    writeDevshardctlStore({ ...spec, dir: otherConfig, config: { tokenPrice: 999n } });
    const mismatched = await importCall(importBody(escrowId, otherConfig));
    expect(mismatched.status).toBe(400);
    expect(mismatched.json.error.code).toBe('replay_diverged');
    expect(mismatched.json.error.message).toMatch(/diff of nonce 1 .*does not replay against the chain's facts/);
    expect(gw.store.readStream(devshardSessionStream(escrowId))).toEqual([]);
    // A key that is not the creator's.
    const strangerKey = generateKeys().privateKey;
    const stranger = await importCall(importBody(escrowId, good, { private_key_env: undefined, private_key: strangerKey }));
    expect(stranger.status).toBe(400);
    expect(stranger.json.error.code).toBe('wrong_creator_key');
    expect(stranger.text).not.toContain(strangerKey);
    // Refused before it is held: a key that is not the creator's is not kept in memory.
    expect(gw.ctx.keyring.originOf(await gw.ctx.keyring.address(strangerKey))).toEqual({ kind: 'not_held' });
    expect(gw.ctx.engine.escrow(escrowId)).toBeUndefined();
  });

  let written: ReturnType<typeof writeDevshardctlStore>;
  it('adopts the escrow: devshardctl\'s answer, the replica\'s balance and root, inactive, recorded as EscrowImported', async () => {
    const dir = join(root, 'escrow-store');
    written = writeDevshardctlStore({ ...spec, dir, noMeta: true });
    // devshardctl's storage_path may name the state.db in the directory.
    const r = await importCall(importBody(escrowId, join(dir, 'state.db')));
    expect(r.status, r.text).toBe(200);
    // gateway.go handleAdminImportDevshard: id, active, model, storage_path, perf_path, accounting counts.
    expect(r.json).toMatchObject({ id: escrowId, active: false, model: MODEL, storage_path: dir, accounting_records_imported: 0 });
    expect(r.json.adopted).toMatchObject({ diffs: written.diffs, last_nonce: written.lastNonce, next_nonce: written.lastNonce + 1, state_root: written.stateRoot, balance: written.balance.toString(), open_inferences: 0 });
    // The protocol is the store's (no protocol_version in the body): v4.1, its route and tag.
    expect(r.json.adopted).toMatchObject({ protocol_version: 'v4.1', state_root_version: 'v4.1', route_prefix: '/devshard/v4.1' });
    // Ours: the devshard view, with the balance exact and the escrow's protocol.
    expect(r.json).toMatchObject({ escrow_id: escrowId, state: 'imported', nonce: written.lastNonce, balance: written.balance.toString() });
    expect(r.json).toMatchObject({ protocol_version: 'v4.1', route_prefix: '/devshard/v4.1', state_root_version: 'v4.1' });
    const escrowEvents = gw.store.readStream(`escrow-${escrowId}`);
    // The EscrowImported is the escrow's first event: it records the protocol the escrow speaks.
    expect(escrowEvents[0]!.type).toBe('EscrowImported');
    const imported = escrowEvents[0]!;
    expect((imported.data as any).protocol).toEqual({ version: 'v4.1', route: '/devshard/v4.1', tag: 'v4.1' });
    expect((imported.data as any).adopted).toMatchObject({ from: 'devshardctl', storagePath: dir, lastNonce: written.lastNonce, stateRoot: written.stateRoot, balance: written.balance.toString(), protocolVersion: 'v4.1' });
    // The session continues devshardctl's: its diffs recorded as ours (after the chain's facts they
    // were replayed against), before the EscrowImported.
    const session = gw.store.readStream(devshardSessionStream(escrowId));
    expect(session.map((e) => e.type)).toEqual(['DevshardSessionOpened', ...Array(written.diffs).fill('DevshardDiffSent')]);
    expect(session.slice(1).map((e) => (e.data as any).nonce)).toEqual(Array.from({ length: written.diffs }, (_, i) => String(i + 1)));
    expect(Buffer.from((session.at(-1)!.data as any).postStateRoot, 'base64').toString('hex')).toBe(written.stateRoot);
    expect(session.at(-1)!.position).toBeLessThan(imported.position);
    const tally = (imported.data as any).hostStats as { requests: number }[];
    expect(tally.reduce((n, h) => n + h.requests, 0)).toBe(spec.requests);
    expect(JSON.stringify([...gw.store.readAll()])).not.toContain(keys.privateKey);
    // Not routable until activated; a second import is refused.
    expect((await gw.call('/v1/status', { key: 'none' })).json.devshards.find((d: any) => d.id === escrowId)).toMatchObject({ active: false, protocol_version: 'v4.1', route_prefix: '/devshard/v4.1', state_root_version: 'v4.1' });
    const again = await importCall(importBody(escrowId, dir));
    expect(again.status).toBe(409);
  });

  it("active:true activates at import; the last request's finish is not in any diff yet: it stays open, its reservation in the balance", async () => {
    const id = await createEscrowViaApi(source);
    const dir = join(root, 'open-store');
    const w = writeDevshardctlStore({ ...(await specFor(id)), dir, requests: 3, closeLast: false });
    const r = await importCall(importBody(id, dir, { active: true }));
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ id, active: true, state: 'active', nonce: 3, balance: w.balance.toString() });
    expect(r.json.adopted).toMatchObject({ last_nonce: 3, next_nonce: 4, open_inferences: 1, state_root: w.stateRoot, protocol_version: 'v4.1' });
    await gw.call(`/v1/admin/devshards/${id}/deactivate`, { method: 'POST' });
  });

  it('activated, the next request uses the next nonce; the log still verifies', async () => {
    const act = await gw.call('/v1/admin/devshards', { body: { id: escrowId } });
    expect(act.status, act.text).toBe(200);
    expect(act.json).toMatchObject({ id: escrowId, active: true });
    const chat = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'after the migration' }], max_tokens: 8 } });
    expect(chat.status, chat.text).toBe(200);
    expect(chat.headers.get('x-devshard-escrow-id')).toBe(escrowId);
    expect(chat.headers.get('x-devshard-nonce')).toBe(String(written.lastNonce + 1));
    const view = (await gw.call(`/v1/admin/devshards/${escrowId}`)).json;
    expect(view.nonce).toBe(written.lastNonce + 1);
    expect(BigInt(view.balance)).toBeLessThan(written.balance);
    // The session rebuilt from devshardctl's diffs: the request's diff follows them, and the hosts
    // (which never saw devshardctl's diffs: the fixture only wrote the store) took them as catch-up.
    const diffs = gw.store.readStream(devshardSessionStream(escrowId)).filter((e) => e.type === 'DevshardDiffSent');
    expect(diffs.map((e) => Number((e.data as any).nonce))).toEqual(Array.from({ length: written.lastNonce + 1 }, (_, i) => i + 1));
    // Served on /devshard/v4.1 (the devnet answers /v1/devshard with 410): the status names the
    // protocol and how far the hosts applied the diffs; the host that served the request applied
    // devshardctl's diffs and ours.
    const entry = (await gw.call('/v1/status', { key: 'none' })).json.devshards.find((d: any) => d.id === escrowId);
    expect(entry).toMatchObject({ protocol_version: 'v4.1', route_prefix: '/devshard/v4.1', state_root_version: 'v4.1' });
    expect(entry.protocol_error).toBeUndefined();
    expect(entry.hosts_applied).toEqual(expect.arrayContaining([{ host: expect.any(String), nonce: written.lastNonce + 1 }]));
    await gw.ctx.projections.checkpoint(gw.store);
    expect(await verifyLog(`${gw.storageDir}/events.sqlite`, [projectionsCheck()])).toMatchObject({ ok: true });
  });

  it("finalizes and settles the adopted escrow: the hosts sign a settlement over devshardctl's and our requests; shardgate verify passes", async () => {
    const f = await gw.call(`/devshard/${escrowId}/v1/finalize`, { method: 'POST' });
    expect(f.status, f.text).toBe(200);
    // MsgFinalizeRound after our request, then one diff per slot to the Settlement phase.
    expect(f.json.nonce).toBe(written.lastNonce + 1 + 1 + spec.slots.length);
    expect(f.json.signatures).toHaveLength(spec.slots.length);
    // devshardctl's requests are paid too: every slot's cost at least what its finishes there charged.
    const costs = f.json.host_stats.reduce((n: bigint, h: { cost: string | number }) => n + BigInt(h.cost), 0n);
    expect(costs).toBeGreaterThan(0n);
    const s = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: {} });
    expect(s.status, s.text).toBe(200);
    expect(devnet.chain.state.escrows[escrowId]!.settled).toBe(true);
    expect(BigInt(s.json.total_payout)).toBe(costs + BigInt(f.json.fees));
    expect(BigInt(s.json.total_payout) + BigInt(s.json.refund)).toBe(spec.amount);
    let out = '';
    let err = '';
    const code = await runVerify(`${gw.storageDir}/events.sqlite`, (x) => void (out += x), (x) => void (err += x));
    expect(code, out + err).toBe(0);
    expect(out).toContain(`devshard escrow ${escrowId} (v4.1 on /devshard/v4.1, tag "v4.1"): composed ${f.json.nonce} diffs, nonces 1..${f.json.nonce}`);
    expect(out).toMatch(new RegExp(`devshard escrow ${escrowId} .*; applied by the hosts: .*to nonce \\d+`));
    expect(out).toMatch(new RegExp(`settlement at nonce ${f.json.nonce} equals the replica, ${spec.slots.length}/${spec.slots.length} signatures recover to their slots`));
  });
});

describe('migration from devshardctl: a v2-era store, where the hosts keep the legacy route', () => {
  const keys = generateKeys();
  const root = mkdtempSync(join(tmpdir(), 'shardgate-migrate-v2-'));
  let devnet: Devnet;
  let source: TestGateway;
  let gw: TestGateway;

  beforeAll(async () => {
    // DEVNET_LEGACY_ROUTE=1: the simulated hosts still serve v2 on /v1/devshard (tag "v2").
    devnet = await startDevnet({ env: { DEVNET_BLOCK_TIME_MS: '50', DEVNET_TOKEN_DELAY_MS: '0', DEVNET_LEGACY_ROUTE: '1' }, creators: [keys.privateKey], statePath: join(root, 'devnet.sqlite'), port: 0 });
    const chainEnv = { NODE_RPC: devnet.rpcUrl, NODE_CHAIN_API: devnet.url, NODE_BASE: devnet.url };
    source = await startTestGateway({ keys, env: { ...chainEnv, DEVSHARD_INSTANCE_NAME: 'devshardctl-stand-in' } });
    // storage_path must lie inside DEVSHARD_IMPORT_DIR (issue 39): the stores are written under root.
    gw = await startTestGateway({ keys, env: { ...chainEnv, DEVSHARD_IMPORT_DIR: root } });
  });
  afterAll(async () => {
    await disposeTestGateway(source);
    await disposeTestGateway(gw);
    await devnet?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("imports it with protocol_version 'v2' (v2 on /v1/devshard, tag \"v2\") and serves the next request on the legacy route", async () => {
    const created = await source.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key: keys.privateKey, chain_id: 'shardgate-devnet', register: false, protocol_version: 'v2' } });
    expect(created.status, created.text).toBe(200);
    const id = created.json.id as string;
    const escrow = (await gw.ctx.chain.escrow(id))!;
    const hostKeys = new Map(devnet.hosts.map((h) => [h.address, h.privateKey]));
    const dir = join(root, 'v2-store');
    // devshardctl at 8a35022: roots tagged "v2", its sessions.version column its v2-era stamp "v1".
    const w = writeDevshardctlStore({
      dir,
      escrowId: id,
      epochId: escrow.epochIndex,
      creator: escrow.creator,
      creatorPrivateKeyHex: keys.privateKey,
      amount: escrow.amount,
      slots: escrow.slots.map((s) => s.host),
      keyOf: (a) => hostKeys.get(a)!,
      requests: 4,
      closeLast: true,
      version: 'v2',
    });
    const r = await gw.call('/v1/admin/devshards/import', { body: { id, storage_path: dir, private_key_env: 'DEVSHARD_PRIVATE_KEY', model: MODEL, protocol_version: 'v2', active: true } });
    expect(r.status, r.text).toBe(200);
    expect(r.json.adopted).toMatchObject({ last_nonce: w.lastNonce, state_root: w.stateRoot, balance: w.balance.toString(), protocol_version: 'v2', route_prefix: '/v1/devshard', state_root_version: 'v2' });
    expect(r.json).toMatchObject({ id, active: true, state: 'active', protocol_version: 'v2', route_prefix: '/v1/devshard', state_root_version: 'v2' });
    const imported = gw.store.readStream(`escrow-${id}`)[0]!;
    expect(imported.type).toBe('EscrowImported');
    expect((imported.data as any).protocol).toEqual({ version: 'v2', route: '/v1/devshard', tag: 'v2' });

    const chat = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'after a v2 migration' }], max_tokens: 8 } });
    expect(chat.status, chat.text).toBe(200);
    expect(chat.headers.get('x-devshard-escrow-id')).toBe(id);
    expect(chat.headers.get('x-devshard-nonce')).toBe(String(w.lastNonce + 1));
    const entry = (await gw.call('/v1/status', { key: 'none' })).json.devshards.find((d: any) => d.id === id);
    expect(entry).toMatchObject({ protocol_version: 'v2', route_prefix: '/v1/devshard', state_root_version: 'v2' });
    expect(entry.protocol_error).toBeUndefined();
    expect(entry.hosts_applied).toEqual(expect.arrayContaining([{ host: expect.any(String), nonce: w.lastNonce + 1 }]));
  });
});
