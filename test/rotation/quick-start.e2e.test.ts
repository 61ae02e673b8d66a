/**
 * Issue 38 (1): `npm start` must not strand its user. The quick start (nothing configured) creates
 * a first escrow; the chain prunes an unsettled escrow two epochs on (about 20 minutes on the
 * devnet's defaults), after which every chat failed. With rotation on for the devnet's model, the
 * first escrow is settled before the epoch switch and replaced, and chat keeps working.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { disposeTestGateway, startTestGateway } from '../helpers/gateway.js';
import { attach, chatLoad, FAST_CHAIN, MODEL, ofType, waitFor, type RotationGateway } from './helpers.js';

/** A quick start (first escrow, rotation on) on 90-block epochs (4.5 s): as the rotation cycle test, a loaded machine still settles in the window. */
const startQuickStart = async (): Promise<RotationGateway> =>
  attach(
    await startTestGateway({
      quickStartEscrow: true,
      quickStartRotation: true,
      env: { GATEWAY_ROTATION_INTERVAL_MS: '100', GATEWAY_BALANCE_CHECK_INTERVAL_MS: '300', ...FAST_CHAIN, DEVNET_EPOCH_BLOCKS: '90' },
    }),
  );

describe('the quick start', { retry: 1 }, () => {
  let gw: RotationGateway | undefined;
  afterEach(async () => {
    await disposeTestGateway(gw);
    gw = undefined;
  });

  it('turns rotation on for its first escrow\'s model; the escrow is settled and replaced before it could be pruned, and chat keeps working', async () => {
    gw = await startQuickStart();
    const g = gw;
    const q = g.quickStart!;
    expect(q).toMatchObject({ rotation: true });
    const settings = (await g.call('/v1/admin/settings')).json;
    expect(settings.escrow_rotation).toMatchObject({ enabled: true, models: [{ model_id: MODEL, temp_count: 1, target_count: 1, private_key_env: 'DEVSHARD_PRIVATE_KEY' }] });
    await waitFor('a completed rotation cycle', () => ofType(g, 'RotationPhaseCompleted').some((e) => e.data.phase === 2), 30_000);
    await waitFor('the first escrow settled on chain', async () => (await g.ctx.chain.escrow(q.escrowId))?.settled === true, 15_000);
    const r = await g.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'still served?' }], max_tokens: 8 } });
    expect(r.status, r.text).toBe(200);
    expect(r.json.id).not.toMatch(new RegExp(`^devshard-${q.escrowId}-`));
    expect(ofType(g, 'RotationFailed')).toEqual([]);
  }, 60_000);


  it('serves chat under load through four epoch switches with no 5xx; every escrow it leaves behind is settled, none pruned with its deposit', async () => {
    gw = await startQuickStart();
    const g = gw;
    expect((await g.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }] } })).status).toBe(200);
    const startHeight = g.devnet!.chain.state.height;
    const load = chatLoad(g, 3);
    // Four completed cycles: the first escrow's prune point (its epoch + 2) and three more are passed.
    try {
      await waitFor('four completed rotation cycles', () => ofType(g, 'RotationPhaseCompleted').filter((e) => e.data.phase === 2).length >= 4, 120_000);
    } finally {
      await load.stop();
    }
    const result = await load.stop();
    expect(result.total).toBeGreaterThan(20);
    expect(result.failures.filter((f) => f.startsWith('5'))).toEqual([]);
    expect(result.failures).toEqual([]);
    expect(g.devnet!.chain.state.height - startHeight).toBeGreaterThan(4 * 90);
    // Every escrow but the newest regular was settled on chain (a pruned one reads null: none was).
    const created = ofType(g, 'EscrowCreated').map((e) => e.data);
    const newest = created.filter((e) => e.role === 'regular').at(-1)!.escrowId;
    await waitFor('old escrows settled on chain', async () => {
      for (const e of created) if (e.escrowId !== newest && !(await g.ctx.chain.escrow(e.escrowId))?.settled) return false;
      return true;
    }, 15_000);
    expect(ofType(g, 'RotationFailed')).toEqual([]);
  }, 180_000);
});
