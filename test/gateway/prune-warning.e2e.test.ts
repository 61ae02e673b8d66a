/**
 * Issue 27: the chain prunes an unsettled escrow once its epoch is two past the escrow's
 * (k/devshard_pruning.go), paying the whole deposit to the hosts. The gateway shows each unsettled
 * escrow's prune point in /v1/status and GET /v1/admin/devshards, warns once per escrow when it is
 * within DEVSHARD_PRUNE_WARN_BLOCKS blocks of it, and reads a settle after it as the closed window.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEscrowViaApi, disposeTestGateway, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const EPOCH = 1000;
const WARN = 100;

describe('the warning before the prune, and what not settling costs', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ env: { DEVNET_EPOCH_BLOCKS: String(EPOCH), DEVNET_POC_BLOCKS: '10', DEVSHARD_PRUNE_WARN_BLOCKS: String(WARN) } });
  });
  afterAll(() => disposeTestGateway(gw));

  const warnings = (id: string) =>
    gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'escrow_prune_approaching' && l.escrow_id === id);
  const runtime = async (id: string) => ((await gw.call('/v1/status')).json.devshards as Record<string, unknown>[]).find((d) => d.id === id);
  const adminView = async (id: string) => ((await gw.call('/v1/admin/devshards')).json.data as Record<string, unknown>[]).find((d) => d.escrow_id === id);

  it('shows the prune point, warns once near it, and after it the deposit is the hosts\' and the settle is refused as pruned', async () => {
    const left = await createEscrowViaApi(gw);
    const settled = await createEscrowViaApi(gw);
    const epoch = (await gw.call(`/v1/admin/devshards/${left}`)).json.epoch_index as number;
    expect((await gw.call(`/v1/admin/devshards/${settled}/settle`, { body: {} })).status).toBe(200);

    // The height before the tick: the tick reads its own, at or after this one (blocks keep coming).
    const { height } = await gw.ctx.chain.epoch();
    await gw.tasks.pruneWatch.tick();
    const early = await runtime(left);
    expect(early).toMatchObject({ prune_epoch: epoch + 2, settle_deadline_epoch: epoch + 1 });
    // Two epoch switches away: the rest of this epoch plus a whole one.
    expect(early!.blocks_until_prune).toBeGreaterThan(EPOCH);
    expect(early!.blocks_until_prune).toBeLessThanOrEqual((epoch + 2) * EPOCH - height);
    expect((await adminView(left))!.prune).toMatchObject({ prune_epoch: epoch + 2, settle_deadline_epoch: epoch + 1 });
    const listed = ((await gw.call('/v1/admin/devshards')).json.devshards as { id: string; runtime: Record<string, unknown> }[]).find((d) => d.id === left);
    expect(listed!.runtime.prune_epoch).toBe(epoch + 2);
    // A settled escrow has no prune point.
    expect((await runtime(settled))?.prune_epoch).toBeUndefined();
    expect((await adminView(settled))!.prune).toBeNull();
    expect(warnings(left)).toEqual([]);

    // Within WARN blocks of the prune point: one warning, not one per tick.
    gw.devnet!.chain.jumpTo((epoch + 2) * EPOCH - WARN + 10);
    await gw.tasks.pruneWatch.tick();
    await gw.tasks.pruneWatch.tick();
    expect(warnings(left)).toEqual([expect.objectContaining({ level: 40, prune_epoch: epoch + 2, note: expect.stringContaining('settle it before epoch') })]);
    expect((await runtime(left))!.blocks_until_prune).toBeLessThanOrEqual(WARN);
    expect(warnings(settled)).toEqual([]);

    // What not settling costs: at the prune point the whole deposit goes to the hosts, split per
    // unique slot address; the creator gets nothing back.
    const creator = (await gw.call(`/v1/admin/devshards/${left}`)).json.creator as string;
    const hosts = [...new Set(gw.devnet!.hosts.map((h) => h.address))];
    const before = await Promise.all([creator, ...hosts].map((a) => gw.ctx.chain.balance(a)));
    gw.devnet!.chain.jumpTo((epoch + 2) * EPOCH + 1);
    expect(await gw.ctx.chain.escrow(left)).toBeNull();
    const after = await Promise.all([creator, ...hosts].map((a) => gw.ctx.chain.balance(a)));
    const deposit = 10_000_000_000n;
    expect(after[0]).toBe(before[0]);
    expect(after.slice(1).map((b, i) => b - before[i + 1]!)).toEqual(hosts.map(() => deposit / BigInt(hosts.length)));
    await gw.tasks.pruneWatch.tick();
    expect((await runtime(left))!.blocks_until_prune).toBe(0);

    // The settle now: refused before any tx (no fee), naming the prune; nothing returns.
    const r = await gw.call(`/v1/admin/devshards/${left}/settle`, { body: {} });
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe('wrong_epoch');
    expect(r.json.error.message).toContain(`escrow ${left} of epoch ${epoch} was pruned by the chain`);
    expect(r.json.error.message).toContain('its whole deposit went to its hosts');
    expect(await gw.ctx.chain.balance(creator)).toBe(before[0]);
  }, 60_000);
});
