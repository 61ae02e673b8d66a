/**
 * Issue 39 item 4: hostile `private_key_env` names. `"__proto__"` or `"constructor"` read
 * Object.prototype's member out of the environment object and answered 500. Now every body's
 * `private_key_env` must match ^[A-Z_][A-Z0-9_]*$ (a 400 naming the rule), and the lookup reads the
 * environment's own members only (keyring.ts envValue), whatever name reaches it (a recorded
 * settings event, a recorded key source).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envValue, Keyring } from '../../src/gateway/keyring.js';
import { envKeyProblem } from '../../src/gateway/settings/settings.js';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const HOSTILE = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', '__defineGetter__'];

describe('env lookups read own members only', () => {
  const env: Record<string, string> = { DEVSHARD_PRIVATE_KEY: '1'.repeat(64) };

  it('envValue: prototype names are unset', () => {
    for (const name of HOSTILE) expect(envValue(env, name), name).toBeUndefined();
    expect(envValue(env, 'DEVSHARD_PRIVATE_KEY')).toBe('1'.repeat(64));
  });

  it('Keyring.fromEnv and envKeyProblem answer "unset", never throw', async () => {
    const keyring = new Keyring(env, async () => 'addr');
    for (const name of HOSTILE) {
      await expect(keyring.fromEnv(name), name).resolves.toBeUndefined();
      expect(envKeyProblem(env, name), name).toBe('is unset');
    }
  });
});

describe('hostile private_key_env names through HTTP: 400 naming the rule', () => {
  let gw: TestGateway;
  let id: string;
  beforeAll(async () => {
    gw = await startTestGateway({ env: { LOG_LEVEL: 'warn' } });
    id = await createEscrowViaApi(gw);
  });
  afterAll(() => disposeTestGateway(gw));

  function expectRule(r: { status: number; json: any; text: string }, param: string) {
    expect(r.status, r.text).toBe(400);
    expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param });
    expect(r.json.error.message).toContain('^[A-Z_][A-Z0-9_]*$');
  }

  it('create, register, settle, import and rotation settings refuse them', async () => {
    for (const name of [...HOSTILE, 'lower_case_key', 'Devshard_Private_Key']) {
      expectRule(await gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key_env: name } }), 'private_key_env');
      expectRule(await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { private_key_env: name } }), 'private_key_env');
      expectRule(await gw.call('/v1/admin/devshards', { body: { id: '999', private_key_env: name } }), 'private_key_env');
      expectRule(await gw.call('/v1/admin/devshards/import', { body: { id: '999', storage_path: '/nonexistent', private_key_env: name } }), 'private_key_env');
      expectRule(
        await gw.call('/v1/admin/settings', { body: { escrow_rotation: { models: [{ model_id: MODEL, temp_count: 1, target_count: 1, amount: '10000000000', private_key_env: name }] } } }),
        'escrow_rotation.models[0].private_key_env',
      );
    }
  });

  it('an upper-case name that is unset is a 400 creator_key_unavailable, as before', async () => {
    const r = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { private_key_env: 'NO_SUCH_PRIVATE_KEY' } });
    expect(r.status, r.text).toBe(400);
    expect(r.json.error.code).toBe('creator_key_unavailable');
  });
});
