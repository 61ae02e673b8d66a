/**
 * Issue 27: DEVSHARD_POC_REQUEST_MODE as devshardctl applies it (ctl/poc_mode.go, ctl/phase_gate.go)
 * and rotation's pre_poc_blocks, both from the epoch the client reads (/v1/epochs/latest, the
 * devnet's: epoch i is heights [i·E, (i+1)·E), a PoC window of P blocks after each switch).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { enableRotation, ofType } from '../rotation/helpers.js';

const E = 1000;
const P = 50;
const CHAIN = { DEVNET_EPOCH_BLOCKS: String(E), DEVNET_POC_BLOCKS: String(P), DEVNET_BLOCK_TIME_MS: '200' };

let gw: TestGateway | undefined;
afterEach(async () => {
  await disposeTestGateway(gw);
  gw = undefined;
});

const chat = (g: TestGateway) => g.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 } });

describe('DEVSHARD_POC_REQUEST_MODE', () => {
  it('off: chat is refused with 503 during the PoC window (devshardctl\'s text), /v1/status says requests_blocked: poc; served again after it', async () => {
    gw = await startTestGateway({ env: { ...CHAIN, DEVSHARD_POC_REQUEST_MODE: 'off' } });
    const id = await createEscrowViaApi(gw);
    await gw.tasks.pruneWatch.tick();
    expect((await chat(gw)).status).toBe(200);

    gw.devnet!.chain.jumpTo(E + 5); // inside the PoC window after the switch
    await gw.tasks.pruneWatch.tick();
    expect((await gw.ctx.chain.epoch()).phase).toBe('PoCGenerate');
    const r = await chat(gw);
    expect(r.status).toBe(503);
    expect(r.json.error.code).toBe('poc_active');
    expect(r.json.error.message).toContain('devshard temporarily unavailable during PoC generation');
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    const status = (await gw.call('/v1/status', { key: 'none' })).json;
    expect(status.devshards.find((d: { id: string }) => d.id === id)).toMatchObject({ requests_blocked: true, block_reason: 'poc', chain_phase: 'PoCGenerate' });
    // With one devshard, devshardctl's single-runtime fields at the top (proxy.go statusResponse).
    expect(status).toMatchObject({ chain_phase: 'PoCGenerate', confirmation_poc_phase: 'CONFIRMATION_POC_INACTIVE', requests_blocked: true, block_reason: 'poc' });

    gw.devnet!.chain.jumpTo(E + P + 5);
    await gw.tasks.pruneWatch.tick();
    expect((await chat(gw)).status).toBe(200);
    expect((await gw.call('/v1/status', { key: 'none' })).json.devshards.find((d: { id: string }) => d.id === id).requests_blocked).toBe(false);
  }, 60_000);

  it('relaxed (the reference value): chat keeps being served during the PoC window', async () => {
    gw = await startTestGateway({ env: { ...CHAIN, DEVSHARD_POC_REQUEST_MODE: 'relaxed' } });
    await createEscrowViaApi(gw);
    gw.devnet!.chain.jumpTo(E + 5);
    await gw.tasks.pruneWatch.tick();
    expect((await gw.ctx.chain.epoch()).pocActive).toBe(true);
    expect((await chat(gw)).status).toBe(200);
  }, 60_000);
});

describe("rotation's pre_poc_blocks from /v1/epochs/latest", () => {
  it('phase 1 starts only once the blocks to the epoch switch the client reads are at most pre_poc_blocks', async () => {
    gw = await startTestGateway({ env: { ...CHAIN, GATEWAY_ROTATION_INTERVAL_MS: '600000' } });
    await createEscrowViaApi(gw);
    await enableRotation(gw, { temp_count: 1, target_count: 1, pre_poc_blocks: 100 });
    const started = () => ofType(gw!, 'RotationPhaseStarted');

    gw.devnet!.chain.jumpTo(E - 150);
    await gw.tasks.rotation.tick();
    expect(started()).toEqual([]);
    const debug = (await gw.call('/v1/debug/rotation')).json;
    const e = await gw.ctx.chain.epoch();
    expect(e.nextBoundaryHeight).toBe(E); // set_new_validators of epoch 0
    expect(debug.chain.blocks_to_epoch_switch).toBeGreaterThan(100);

    gw.devnet!.chain.jumpTo(E - 90);
    await gw.tasks.rotation.tick();
    const s = started();
    expect(s.length).toBeGreaterThanOrEqual(1);
    expect(s[0]!.data).toMatchObject({ phase: 1, chain: { epoch: 0, nextBoundaryHeight: E } });
    expect(s[0]!.data.chain.blocksUntilBoundary).toBeLessThanOrEqual(100);
    expect(s[0]!.data.chain.blocksUntilBoundary).toBeGreaterThan(80);
  }, 60_000);
});
