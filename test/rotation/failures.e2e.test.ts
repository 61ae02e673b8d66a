import { afterEach, describe, expect, it } from 'vitest';
import { runExplainRotation } from '../../src/cli/commands/explain.js';
import { createEscrowViaApi, disposeTestGateway } from '../helpers/gateway.js';
import { enableRotation, MODEL, ofType, startRotationGateway, waitFor, type RotationGateway } from './helpers.js';

const explainText = (gw: RotationGateway, opts: { model?: string; epoch?: number } = {}) => {
  let text = '';
  runExplainRotation(gw.store, opts, (s) => (text += s));
  return text;
};

const chatOnce = (gw: RotationGateway) => gw.call('/v1/chat/completions', { key: 'client', body: { model: MODEL, messages: [{ role: 'user', content: 'still there?' }], max_tokens: 8 } });

describe('rotation failures on a fast devnet', () => {
  let gw: RotationGateway | undefined;
  afterEach(async () => {
    await disposeTestGateway(gw);
    gw = undefined;
  });

  it('temporary creation refused (per-epoch limit) -> the regular is promoted, keeps serving, and is settled after phase 2 replaced it', async () => {
    gw = await startRotationGateway({ env: { DEVNET_MAX_ESCROWS_PER_EPOCH: '1' } });
    const g = gw;
    const first = await createEscrowViaApi(g, '1000000000');
    await enableRotation(g, { temp_count: 1, target_count: 1 });
    await waitFor('a completed cycle', () => ofType(g, 'RotationPhaseCompleted').some((e) => e.data.phase === 2), 20_000);
    const promoted = ofType(g, 'RotationPromoted');
    expect(promoted.map((e) => e.data.escrowIds)).toEqual([[first]]);
    const failed = ofType(g, 'RotationFailed');
    expect(failed).toHaveLength(1);
    expect(failed[0]!.data).toMatchObject({ step: 'create_temporary', role: 'temporary', suppress: true, error: { kind: 'epoch_limit' } });
    await waitFor('the promoted escrow settled on chain', async () => (await g.ctx.chain.escrow(first))?.settled === true, 10_000);
    expect((await chatOnce(g)).status).toBe(200);
    const text = explainText(g, { model: MODEL, epoch: 0 });
    expect(text).toContain('epoch_limit');
    expect(text).toContain(`regular escrow(s) ${first} promoted to the temporary role`);
    expect(text).toMatch(/temporary creates for .* in epoch 0/);
  }, 30_000);

  it('an underfunded creator -> exactly one failed create per model, role and epoch; traffic keeps its escrow; explain names the reason', async () => {
    gw = await startRotationGateway({ env: { DEVNET_CREATOR_FUNDS: '1500000000' } });
    const g = gw;
    const first = await createEscrowViaApi(g, '1000000000');
    await enableRotation(g, { temp_count: 2, target_count: 2 });
    // Cycle of epoch 0 (both creates refused), then phase 1 of epoch 1 (refused again, once).
    await waitFor('the next cycle', () => ofType(g, 'RotationPhaseStarted').filter((e) => e.data.phase === 1).length >= 2, 20_000);
    await waitFor('its phase 1 done', () => ofType(g, 'RotationPhaseCompleted').filter((e) => e.data.phase === 1).length >= 2, 10_000);
    // Several more ticks, driven here rather than waited for: nothing repeats.
    for (let i = 0; i < 3; i++) await g.rotation.tick();

    const byKey = (xs: { role?: string; epoch: number }[]) => xs.reduce<Record<string, number>>((m, x) => ({ ...m, [`${x.role}@${x.epoch}`]: (m[`${x.role}@${x.epoch}`] ?? 0) + 1 }), {});
    // The balance pre-check refuses them before any tx: no create intent, no fee spent.
    expect(ofType(g, 'EscrowCreateRequested').filter((e) => e.data.origin !== 'admin')).toEqual([]);
    expect(ofType(g, 'EscrowCreateFailed')).toEqual([]);
    const suppressing = ofType(g, 'RotationFailed').filter((e) => e.data.suppress).map((e) => ({ role: e.data.role, epoch: e.data.chain.epoch }));
    expect(byKey(suppressing)).toEqual({ 'temporary@0': 1, 'regular@1': 1, 'temporary@1': 1 });
    // The only escrow was promoted, never settled: chat still has it.
    expect(g.ctx.engine.escrow(first)?.value).toBe('active');
    expect((await chatOnce(g)).status).toBe(200);

    const text = explainText(g, { model: MODEL });
    expect(text).toContain('insufficient_funds');
    expect(text).toContain('step create_temporary (temporary): the chain said insufficient_funds');
    expect(text).toContain('step create_target (regular): the chain said insufficient_funds');
    expect(text).toMatch(/Suppressed:\n\s+temporary creates for .* in epoch 0/);
    expect(text).toContain('keep serving');
    // The spec's "per-model errors appear in the latest field": each refused create, once.
    const debug = await g.call('/v1/debug/rotation');
    expect(debug.status).toBe(200);
    const latest = debug.json.latest_by_model[MODEL];
    expect(latest.stage).toBeTypeOf('string');
    expect(latest.counts).toMatchObject({ target: 2, existing: 1 });
    // Refused by the pre-check (no create intent), so only the rotation's own failures are listed.
    expect(latest.errors.length).toBeGreaterThanOrEqual(2);
    expect(latest.errors.every((e: { event: string; error: { kind: string } }) => e.event === 'RotationFailed' && e.error.kind === 'insufficient_funds')).toBe(true);
    expect(latest.last_error.kind).toBe('insufficient_funds');
  }, 30_000);
});
