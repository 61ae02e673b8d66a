/**
 * GATEWAY_DEFAULT_MAX_TOKENS / GATEWAY_MAX_TOKENS_CAP are the max-tokens settings until a settings
 * POST sets them, recorded in the log (a rebuild equals the live settings without the config); a
 * lower cap alone is accepted and the default is clamped to it. Through a real gateway: what the
 * host is asked for shows in the answer (the simulated hosts cut their text at max_tokens) and in
 * InferenceStarted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Projections } from '../../src/projections/index.js';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { requestRecords } from '../helpers/request-records.js';

/** Answers of the simulated hosts are at least 5 tokens long: any max_tokens below cuts them. */
const noMax = { model: MODEL, messages: [{ role: 'user', content: 'tell me a long story' }] };

async function chat(gw: TestGateway, body: object) {
  const r = await gw.call('/v1/chat/completions', { body });
  expect(r.status, r.text).toBe(200);
  const started = requestRecords(gw.store.readAll()).filter((e) => e.type === 'InferenceStarted').at(-1)!.data as { maxTokens: number };
  return { completionTokens: r.json.usage.completion_tokens as number, finish: r.json.choices[0].finish_reason as string, maxTokens: started.maxTokens };
}

const settings = async (gw: TestGateway) => (await gw.call('/v1/admin/settings')).json;
const post = (gw: TestGateway, body: object) => gw.call('/v1/admin/settings', { body });

/** The settings projection rebuilt from the log alone equals the live one. */
function expectRebuildEqualsLive(gw: TestGateway) {
  expect(Projections.rebuild(gw.store.readAll()).settings.effective()).toEqual(gw.ctx.projections.settings.effective());
}

describe('GATEWAY_DEFAULT_MAX_TOKENS and GATEWAY_MAX_TOKENS_CAP', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ env: { GATEWAY_DEFAULT_MAX_TOKENS: '3', GATEWAY_MAX_TOKENS_CAP: '4' } });
    await createEscrowViaApi(gw);
  });
  afterAll(() => disposeTestGateway(gw));

  it('are the settings and what requests get', async () => {
    expect(await settings(gw)).toMatchObject({ default_request_max_tokens: 3, request_max_tokens_cap: 4 });
    expect(await chat(gw, noMax)).toEqual({ completionTokens: 3, finish: 'length', maxTokens: 3 });
    expect(await chat(gw, { ...noMax, max_tokens: 50 })).toEqual({ completionTokens: 4, finish: 'length', maxTokens: 4 });
    expectRebuildEqualsLive(gw);
  });

  it('a settings POST overrides them; configuration changes at a restart apply to what the POST did not set', async () => {
    const r = await post(gw, { default_request_max_tokens: 2 });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ default_request_max_tokens: 2, request_max_tokens_cap: 4 });
    expect((await chat(gw, noMax)).maxTokens).toBe(2);

    const { storageDir, keys } = gw;
    await gw.stop();
    gw = await startTestGateway({ storageDir, keys, env: { GATEWAY_DEFAULT_MAX_TOKENS: '3', GATEWAY_MAX_TOKENS_CAP: '5' } });
    // The default stays the operator's; the cap follows the new configuration.
    expect(await settings(gw)).toMatchObject({ default_request_max_tokens: 2, request_max_tokens_cap: 5 });
    expect((await chat(gw, noMax)).maxTokens).toBe(2);
    expect((await chat(gw, { ...noMax, max_tokens: 50 })).maxTokens).toBe(5);
    const recorded = [...gw.store.readAll()].filter((e) => e.type === 'SettingsDefaultsConfigured').map((e) => e.data);
    expect(recorded).toEqual([
      { default_request_max_tokens: 3, request_max_tokens_cap: 4 },
      { default_request_max_tokens: 3, request_max_tokens_cap: 5 },
    ]);
    expectRebuildEqualsLive(gw);
  });

  it('an unchanged configuration records nothing at a restart', async () => {
    const before = gw.store.streamVersion('settings');
    const { storageDir, keys } = gw;
    await gw.stop();
    gw = await startTestGateway({ storageDir, keys, env: { GATEWAY_DEFAULT_MAX_TOKENS: '3', GATEWAY_MAX_TOKENS_CAP: '5' } });
    expect(gw.store.streamVersion('settings')).toBe(before);
  });
});

describe('a lower cap alone', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
    await createEscrowViaApi(gw);
  });
  afterAll(() => disposeTestGateway(gw));

  it('is accepted below the default; the default is clamped to it and comes back when the cap is raised', async () => {
    expect(await settings(gw)).toMatchObject({ default_request_max_tokens: 3072, request_max_tokens_cap: 4096 });
    const lower = await post(gw, { request_max_tokens_cap: 2048 });
    expect(lower.status, lower.text).toBe(200);
    expect(lower.json).toMatchObject({ default_request_max_tokens: 2048, request_max_tokens_cap: 2048 });
    expect(await settings(gw)).toMatchObject({ default_request_max_tokens: 2048, request_max_tokens_cap: 2048 });
    expect((await chat(gw, noMax)).maxTokens).toBe(2048);

    const raised = await post(gw, { request_max_tokens_cap: 4096 });
    expect(raised.json).toMatchObject({ default_request_max_tokens: 3072, request_max_tokens_cap: 4096 });
    expect((await chat(gw, noMax)).maxTokens).toBe(3072);
  });

  it('a default above the cap is accepted too, applied as the cap', async () => {
    const r = await post(gw, { default_request_max_tokens: 5000 });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ default_request_max_tokens: 4096, request_max_tokens_cap: 4096 });
    expect((await chat(gw, noMax)).maxTokens).toBe(4096);
    expectRebuildEqualsLive(gw);
  });
});
