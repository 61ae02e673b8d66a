/**
 * Issue 38 items 2 and 3: rotation settings are checked when posted (the key's env variable, the
 * chain's amount range), model_limits names only models the gateway serves (and an entry can be
 * removed), and a create held up by an unusable key variable at run time is a configuration error
 * the cycle waits on (explain and debug say so) and retries at the first tick after the fix.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { changeSettings } from '../../src/gateway/settings/settings.js';
import { createEscrowViaApi, disposeTestGateway } from '../helpers/gateway.js';
import { events, explainText, MODEL, ofType, startRotationGateway, waitFor, type RotationGateway } from './helpers.js';

const OTHER = 'no-such/model';

function expectError(res: { status: number; json: any; text: string }, status: number, param: string | null, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.json.error).toMatchObject({ param, code });
  expect(typeof res.json.error.message).toBe('string');
  return res.json.error as { message: string; param: string | null; code: string };
}

const rotationModel = (o: Partial<{ amount: string; private_key_env: string }> = {}) => ({
  model_id: MODEL,
  temp_count: 1,
  target_count: 1,
  amount: o.amount ?? '1000000000',
  private_key_env: o.private_key_env ?? 'DEVSHARD_PRIVATE_KEY',
});

/** Settings events recorded so far (a refused POST records none). */
const settingsEvents = (gw: RotationGateway) => events(gw).filter((e) => e.type === 'SettingsChanged' || e.type === 'ModelAccessModeChanged').length;

describe('issue 38: rotation and model settings are checked; a configuration error is retried once fixed', () => {
  let gw: RotationGateway | undefined;
  afterEach(async () => {
    await disposeTestGateway(gw);
    gw = undefined;
  });

  it('escrow_rotation.models: an unset or malformed private_key_env, an amount outside [min_amount, max_amount] -> 400 naming the member, nothing recorded', async () => {
    gw = await startRotationGateway({ env: { DEVNET_MAX_AMOUNT: '20000000000', BAD_KEY_VAR: 'not-a-key-0123' } });
    const g = gw;
    const before = (await g.call('/v1/admin/settings')).json;
    const count = settingsEvents(g);
    const post = (m: object) => g.call('/v1/admin/settings', { body: { escrow_rotation: { enabled: true, models: [m] } } });

    let err = expectError(await post(rotationModel({ private_key_env: 'NO_SUCH_VAR' })), 400, 'escrow_rotation.models[0].private_key_env', 'private_key_env_unusable');
    expect(err.message).toContain('NO_SUCH_VAR is unset');
    err = expectError(await post(rotationModel({ private_key_env: 'BAD_KEY_VAR' })), 400, 'escrow_rotation.models[0].private_key_env', 'private_key_env_unusable');
    expect(err.message).toContain('64 hex digits');
    expect(err.message).not.toContain('not-a-key-0123'); // the value is never echoed
    err = expectError(await post(rotationModel({ amount: '999999999' })), 400, 'escrow_rotation.models[0].amount', 'amount_out_of_range');
    expect(err.message).toContain('escrow amount 999999999 out of range [1000000000, 20000000000]');
    err = expectError(await post(rotationModel({ amount: '30000000000' })), 400, 'escrow_rotation.models[0].amount', 'amount_out_of_range');
    expect(err.message).toContain('min_amount/max_amount');
    // The member of the second model is named.
    expectError(
      await g.call('/v1/admin/settings', { body: { escrow_rotation: { models: [rotationModel(), { ...rotationModel({ private_key_env: 'NO_SUCH_VAR' }), model_id: 'other' }] } } }),
      400,
      'escrow_rotation.models[1].private_key_env',
      'private_key_env_unusable',
    );

    expect(settingsEvents(g)).toBe(count);
    expect((await g.call('/v1/admin/settings')).json).toEqual(before);
    // A good one is accepted; turning rotation off needs no check.
    expect((await post(rotationModel())).status).toBe(200);
    expect((await g.call('/v1/admin/settings', { body: { escrow_rotation: { enabled: false } } })).status).toBe(200);
  }, 30_000);

  it('model_limits: an unknown model -> 400 naming the served models; a stale entry is not in /v1/models and is removed with access_mode null', async () => {
    gw = await startRotationGateway();
    const g = gw;
    const count = settingsEvents(g);
    const err = expectError(await g.call('/v1/admin/settings', { body: { model_limits: [{ model_id: OTHER, access_mode: 'api_key' }] } }), 400, 'model_limits[0].model_id', 'model_not_served');
    expect(err.message).toContain(`served: ${MODEL}`);
    expect(err.message).toContain('access_mode null');
    expect(settingsEvents(g)).toBe(count);
    expect((await g.call('/v1/models', { key: 'client' })).json.data.map((m: { id: string }) => m.id)).not.toContain(OTHER);

    // Named in escrow_rotation.models of the same request: the gateway will keep escrows of it.
    const rotated = { ...rotationModel(), model_id: OTHER };
    expect((await g.call('/v1/admin/settings', { body: { model_limits: [{ model_id: OTHER, access_mode: 'api_key' }], escrow_rotation: { models: [rotated] } } })).status).toBe(200);
    expect((await g.call('/v1/admin/settings', { body: { escrow_rotation: { models: [] } } })).status).toBe(200);

    // An entry recorded before this check (the use case without it): not served, so a chat gets 404, not 503 forever.
    await changeSettings(g.ctx, { model_limits: [{ model_id: 'stale/model', access_mode: 'api_key' }] }, { actor: { kind: 'admin' } } as never);
    expect((await g.call('/v1/admin/settings')).json.model_limits).toContainEqual({ model_id: 'stale/model', access_mode: 'api_key' });
    expect((await g.call('/v1/models', { key: 'client' })).json.data.map((m: { id: string }) => m.id)).not.toContain('stale/model');
    const chat = await g.call('/v1/chat/completions', { key: 'client', body: { model: 'stale/model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 } });
    expect(chat.status).toBe(404);
    expect(chat.headers.get('retry-after')).toBeNull();

    // Removal: access_mode null (accepted for a model not served: that is how stale entries go).
    const removed = await g.call('/v1/admin/settings', { body: { model_limits: [{ model_id: 'stale/model', access_mode: null }, { model_id: OTHER, access_mode: null }] } });
    expect(removed.status, removed.text).toBe(200);
    expect(removed.json.model_limits.map((l: { model_id: string }) => l.model_id)).not.toContain('stale/model');
    expect(removed.json.model_limits.map((l: { model_id: string }) => l.model_id)).not.toContain(OTHER);
    expect(g.ctx.projections.settings.accessMode('stale/model')).toBe('admin_only');
    // Removing the served model's entry: back to admin_only, a client key is refused again.
    expect((await g.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }] } })).status).toBe(200);
    expect((await g.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: null }] } })).json.model_limits).toEqual([]);
    expect(g.ctx.projections.settings.accessMode(MODEL)).toBe('admin_only');
    // The rebuild from the log equals the live settings.
    const restarted = await g.restart();
    gw = restarted;
    expect((await restarted.call('/v1/admin/settings')).json.model_limits).toEqual([]);
  }, 30_000);

  it('the key variable unset at run time -> a configuration error: explain and debug say so, the cycle waits, and a settings POST naming a usable variable retries the create at the next tick', async () => {
    gw = await startRotationGateway();
    const g = gw;
    await createEscrowViaApi(g, '1000000000');
    const env = g.ctx.config.env as Record<string, string>;
    env.ROTATION_KEY = env.DEVSHARD_PRIVATE_KEY!;
    // Accepted while set (rotation off), then the variable goes away before rotation runs.
    const accepted = await g.call('/v1/admin/settings', {
      body: { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }], escrow_rotation: { enabled: false, pre_poc_blocks: 20, models: [rotationModel({ private_key_env: 'ROTATION_KEY' })] } },
    });
    expect(accepted.status, accepted.text).toBe(200);
    delete env.ROTATION_KEY;
    expect((await g.call('/v1/admin/settings', { body: { escrow_rotation: { enabled: true } } })).status).toBe(200);
    g.rotation.reconfigure();

    const configFailures = () => ofType(g, 'RotationFailed').filter((e) => e.data.configuration);
    await waitFor('the configuration error recorded', () => configFailures().length > 0);
    expect(configFailures()[0]!.data).toMatchObject({ step: 'create_temporary', role: 'temporary', configuration: { variable: 'ROTATION_KEY' }, suppress: false });
    // Several more ticks: recorded once, nothing sent, the phase not moved on (no promote, no settle).
    const height = g.devnet!.chain.state.height;
    await waitFor('more ticks', async () => {
      await g.rotation.tick();
      return g.devnet!.chain.state.height >= height + 5;
    });
    expect(configFailures()).toHaveLength(1);
    expect(ofType(g, 'EscrowCreateRequested').filter((e) => e.data.origin === 'rotation')).toEqual([]);
    expect(ofType(g, 'RotationPromoted')).toEqual([]);
    expect(ofType(g, 'RotationPhaseCompleted')).toEqual([]);
    expect(g.logs.some((l) => l.includes('"escrow_rotation_configuration_error"'))).toBe(true);

    const text = explainText(g);
    expect(text).toContain('configuration: the variable ROTATION_KEY is unset');
    expect(text).toContain('set it to the creator');
    expect(text).not.toContain('the chain said rejected');

    const debug = (await g.call('/v1/debug/rotation')).json;
    const mine = debug.latest_by_model[MODEL];
    expect(mine).toMatchObject({ completed: false, blocked: { step: 'create_temporary', variable: 'ROTATION_KEY' }, failure: { step: 'create_temporary', kind: 'configuration' } });
    expect(mine.blocked.reason).toContain('is unset');
    const statuses = (debug.latest as { model_id: string; completed: boolean; failed_step?: string }[]).filter((s) => s.model_id === MODEL);
    expect(statuses.length).toBeGreaterThan(0);
    expect(statuses.every((s) => s.completed === false)).toBe(true);
    expect(statuses[0]!.failed_step).toBe('create_temporary');

    // The fix: a settings POST naming a usable variable. The same decided create is sent at the next tick.
    const intentId = configFailures()[0]!.data.intentId!;
    expect((await g.call('/v1/admin/settings', { body: { escrow_rotation: { models: [rotationModel()] } } })).status).toBe(200);
    await waitFor('the held-up create sent and the phase on', () =>
      ofType(g, 'EscrowCreated').some((e) => e.data.intentId === intentId) && ofType(g, 'RotationSettleDecided').length > 0,
    );
    const fixed = (await g.call('/v1/debug/rotation')).json.latest_by_model[MODEL];
    expect(fixed.blocked).toBeNull();
    expect(fixed.failed_creates).toBe(0);
    expect(explainText(g)).toContain('fixed: the create was sent on a later tick');
  }, 40_000);

  it('the variable becomes set again -> the create is retried at the next tick', async () => {
    gw = await startRotationGateway();
    const g = gw;
    await createEscrowViaApi(g, '1000000000');
    const env = g.ctx.config.env as Record<string, string>;
    env.ROTATION_KEY = env.DEVSHARD_PRIVATE_KEY!;
    expect((await g.call('/v1/admin/settings', { body: { escrow_rotation: { enabled: false, pre_poc_blocks: 20, models: [rotationModel({ private_key_env: 'ROTATION_KEY' })] } } })).status).toBe(200);
    const key = env.ROTATION_KEY;
    delete env.ROTATION_KEY;
    expect((await g.call('/v1/admin/settings', { body: { escrow_rotation: { enabled: true } } })).status).toBe(200);
    g.rotation.reconfigure();
    await waitFor('the configuration error recorded', () => ofType(g, 'RotationFailed').some((e) => e.data.configuration));
    env.ROTATION_KEY = key;
    await waitFor('the temporary created', () => ofType(g, 'EscrowCreated').some((e) => e.data.role === 'temporary'));
    expect(ofType(g, 'RotationFailed').filter((e) => e.data.configuration)).toHaveLength(1);
  }, 40_000);
});
