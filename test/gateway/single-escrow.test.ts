/**
 * Single-escrow mode on a real gateway: DEVSHARD_ESCROW_ID (DEVSHARDS_JSON unset) registers an
 * escrow that exists on chain at start-up; /v1/status names it; chat is routed to it; the bare
 * POST /v1/finalize finalizes it (exactly one escrow configured). The escrow is created by a first
 * gateway on the same devnet state, as an operator would create it before configuring the id.
 */
import { join } from 'node:path';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

describe('single-escrow mode (DEVSHARD_ESCROW_ID)', () => {
  let gw: TestGateway;
  let escrowId: string;
  let creatorDir: string;

  beforeAll(async () => {
    const creator = await startTestGateway();
    escrowId = await createEscrowViaApi(creator);
    creatorDir = creator.storageDir;
    await creator.stop();
    gw = await startTestGateway({
      keys: creator.keys,
      // '' counts as unset: no pool, single-escrow mode.
      env: { DEVSHARDS_JSON: '', DEVSHARD_ESCROW_ID: escrowId, DEVNET_STATE: join(creatorDir, 'devnet.sqlite') },
    });
  });
  afterAll(async () => {
    await disposeTestGateway(gw);
    rmSync(creatorDir, { recursive: true, force: true });
  });

  it('registers the escrow at start-up and names it in /v1/status', async () => {
    const status = await gw.call('/v1/status', { key: 'none' });
    expect(status.status).toBe(200);
    expect(status.json).toMatchObject({ mode: 'single', escrow_id: escrowId, active_requests: 0 });
    // The pooled shape always (devshardctl's scripts read `.devshards[]`), with the one escrow's fields on top.
    expect(status.json.devshards.map((d: { id: string }) => d.id)).toEqual([escrowId]);
    expect(status.json.runtimes).toBe(1);
    expect(status.json.capacity.models[MODEL]).toBeDefined();
    const list = (await gw.call('/v1/admin/devshards')).json.data as { escrow_id: string; routable: boolean }[];
    expect(list.map((d) => [d.escrow_id, d.routable])).toEqual([[escrowId, true]]);
    const registered = [...gw.store.readAll()].filter((e) => e.type === 'EscrowRegistered');
    expect(registered.map((e) => e.metadata.actor)).toEqual([{ kind: 'startup' }]);
  });

  it('routes chat to it', async () => {
    const r = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 } });
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('x-devshard-escrow-id')).toBe(escrowId);
    expect(r.headers.get('x-devshard-nonce')).toBe('1');
  });

  it('a restart does not register it twice', async () => {
    gw = await gw.restart();
    expect([...gw.store.readAll()].filter((e) => e.type === 'EscrowRegistered')).toHaveLength(1);
    expect((await gw.call('/v1/status', { key: 'none' })).json).toMatchObject({ mode: 'single', escrow_id: escrowId });
  });

  it('POST /v1/finalize finalizes the one configured escrow: escrow_id, version, fees', async () => {
    const f = await gw.call('/v1/finalize', { method: 'POST' });
    expect(f.status, f.text).toBe(200);
    // The settlement file: the one request at nonce 1, MsgFinalizeRound at 2, Settlement at 2 + 3 slots.
    expect(f.json).toMatchObject({ escrow_id: escrowId, version: 'v4.1', nonce: 5 });
    expect(f.json).toHaveProperty('version');
    expect(f.json).toHaveProperty('fees');
    const view = (await gw.call(`/v1/admin/devshards/${escrowId}`)).json;
    expect(view).toMatchObject({ state: 'finalized', routable: false });
  });
});
