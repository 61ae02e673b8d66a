/**
 * Migration from devshardctl (issue 30): POST /v1/admin/devshards/import with devshardctl's body
 * (gateway.go handleAdminImportDevshard: id, storage_path, private_key_env, model,
 * protocol_version, active) adopts a live escrow from devshardctl's escrow state store
 * (devshard/storage/sqlite.go), written here by our fixture generator (devshardctl-store.ts) for an
 * escrow that exists on the devnet. Its diffs are replayed by the protocol replica: the balance and
 * the state root are exact, the next request uses the next nonce. Refusals are clear 4xx bodies.
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
    };
  };
  const importBody = (id: string, dir: string, extra: Record<string, unknown> = {}) => ({
    id,
    storage_path: dir,
    private_key_env: 'DEVSHARD_PRIVATE_KEY',
    model: MODEL,
    protocol_version: 'v2',
    active: false,
    ...extra,
  });
  const importCall = (body: object) => gw.call('/v1/admin/devshards/import', { body });

  beforeAll(async () => {
    devnet = await startDevnet({ env: { DEVNET_BLOCK_TIME_MS: '50', DEVNET_TOKEN_DELAY_MS: '0' }, creators: [keys.privateKey], statePath: join(root, 'devnet.sqlite'), port: 0 });
    const chainEnv = { NODE_RPC: devnet.rpcUrl, NODE_CHAIN_API: devnet.url, NODE_BASE: devnet.url };
    source = await startTestGateway({ keys, env: { ...chainEnv, DEVSHARD_INSTANCE_NAME: 'devshardctl-stand-in' } });
    gw = await startTestGateway({ keys, env: chainEnv });
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

    // The right store with the wrong protocol_version: the replay diverges at the first root.
    const good = join(root, 'wrong-version');
    writeDevshardctlStore({ ...spec, dir: good });
    const diverged = await importCall(importBody(escrowId, good, { protocol_version: 'v9' }));
    expect(diverged.status).toBe(400);
    expect(diverged.json.error.code).toBe('replay_diverged');
    expect(diverged.json.error.param).toBe('protocol_version');
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
    // Ours: the devshard view, with the balance exact.
    expect(r.json).toMatchObject({ escrow_id: escrowId, state: 'imported', nonce: written.lastNonce, balance: written.balance.toString() });
    const imported = gw.store.readStream(`escrow-${escrowId}`).find((e) => e.type === 'EscrowImported')!;
    expect((imported.data as any).adopted).toMatchObject({ from: 'devshardctl', storagePath: dir, lastNonce: written.lastNonce, stateRoot: written.stateRoot, balance: written.balance.toString(), protocolVersion: 'v2' });
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
    expect((await gw.call('/v1/status', { key: 'none' })).json.devshards.find((d: any) => d.id === escrowId)).toMatchObject({ active: false });
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
    expect(r.json.adopted).toMatchObject({ last_nonce: 3, next_nonce: 4, open_inferences: 1, state_root: w.stateRoot });
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
    gw.ctx.projections.checkpoint(gw.store);
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
    expect(out).toContain(`devshard escrow ${escrowId}: ${f.json.nonce} diffs, nonces 1..${f.json.nonce}`);
    expect(out).toMatch(new RegExp(`settlement at nonce ${f.json.nonce} equals the replica, ${spec.slots.length}/${spec.slots.length} signatures recover to their slots`));
  });
});
