import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearerToken, createAuthenticator, keyId, safeEqual } from '../../src/http/auth.js';
import { ADMIN_KEY, bearer, buildTestApp, CLIENT_KEY } from './helpers.js';

describe('auth helpers', () => {
  const auth = createAuthenticator({ adminApiKey: ADMIN_KEY, apiKeys: [CLIENT_KEY, 'sk-second'] });

  it('classifies admin, client and unknown keys', () => {
    expect(auth.classify(`Bearer ${ADMIN_KEY}`)).toEqual({ kind: 'admin', keyId: 'admin' });
    expect(auth.classify(`bearer ${CLIENT_KEY}`)).toEqual({ kind: 'client', keyId: keyId(CLIENT_KEY) });
    expect(auth.classify('Bearer sk-second').kind).toBe('client');
    expect(auth.classify('Bearer sk-wrong')).toMatchObject({ kind: 'none', reason: 'unknown' });
    expect(auth.classify(undefined)).toMatchObject({ kind: 'none', reason: 'missing' });
    expect(auth.classify(`Basic ${CLIENT_KEY}`)).toMatchObject({ kind: 'none', reason: 'malformed' });
    // a prefix of a key is not the key
    expect(auth.classify(`Bearer ${CLIENT_KEY.slice(0, -1)}`).kind).toBe('none');
  });

  it('looks a presented key up by its exact text: near misses are unknown, a key that is both client and admin is admin', () => {
    const both = createAuthenticator({ adminApiKey: 'sk-both-0123456789', apiKeys: ['sk-both-0123456789', 'sk-client-0123456789'] });
    expect(both.classify('Bearer sk-both-0123456789')).toEqual({ kind: 'admin', keyId: 'admin' });
    expect(both.classify('Bearer sk-client-0123456789')).toEqual({ kind: 'client', keyId: keyId('sk-client-0123456789') });
    for (const near of ['sk-client-012345678', 'sk-client-01234567890', 'SK-CLIENT-0123456789', 'sk-client-0123456788']) {
      expect(both.classify(`Bearer ${near}`)).toEqual({ kind: 'none', keyId: null, reason: 'unknown' });
    }
    // What a request is given is shared between requests: it cannot be changed by one of them.
    expect(Object.isFrozen(both.classify('Bearer sk-client-0123456789'))).toBe(true);
  });

  it('key ids are stable, short and not the key', () => {
    expect(keyId(CLIENT_KEY)).toMatch(/^key-[0-9a-f]{8}$/);
    expect(keyId(CLIENT_KEY)).toBe(keyId(CLIENT_KEY));
    expect(keyId(CLIENT_KEY)).not.toBe(keyId('sk-second'));
  });

  it('compares in constant time over digests, whatever the lengths', () => {
    expect(safeEqual('abc', 'abc')).toBe(true);
    expect(safeEqual('abc', 'abcd')).toBe(false); // different lengths do not throw (timingSafeEqual would)
    expect(safeEqual('', 'x')).toBe(false);
  });

  it('without an admin key configured, nothing is admin', () => {
    const noAdmin = createAuthenticator({ adminApiKey: undefined, apiKeys: [] });
    expect(noAdmin.classify('Bearer ').kind).toBe('none');
    expect(noAdmin.classify('Bearer anything').kind).toBe('none');
  });

  it('parses the Bearer header strictly', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('Bearer a b')).toBe('');
    expect(bearerToken(undefined)).toBeNull();
  });
});

describe('auth on routes', () => {
  const { app } = buildTestApp();
  beforeAll(() => app.ready());
  afterAll(() => app.close());
  const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

  it('no key -> 401 OpenAI body with WWW-Authenticate: Bearer', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: body });
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toBe('Bearer');
    expect(res.json()).toEqual({ error: { message: expect.stringContaining('API key'), type: 'invalid_request_error', param: null, code: 'invalid_api_key' } });
  });

  it('matrix: client route takes client and admin keys; admin route only the admin key', async () => {
    const cases: [string, Record<string, string>, number, number][] = [
      ['none', {}, 401, 401],
      ['wrong', bearer('sk-nope'), 401, 401],
      ['client', bearer(CLIENT_KEY), 200, 401],
      ['admin', bearer(ADMIN_KEY), 200, 200],
    ];
    for (const [name, headers, chatStatus, adminStatus] of cases) {
      const chat = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers, payload: body });
      expect(chat.statusCode, `chat with ${name}`).toBe(chatStatus);
      const admin = await app.inject({ method: 'POST', url: '/v1/admin/settings', headers, payload: {} });
      expect(admin.statusCode, `admin with ${name}`).toBe(adminStatus);
      if (adminStatus === 401) expect(admin.json().error.code).toBe('invalid_api_key');
    }
  });

  it('a client key on an admin route is told an admin key is needed', async () => {
    const res = await app.inject({ method: 'POST', url: '/devshard/3/v1/finalize', headers: bearer(CLIENT_KEY) });
    expect(res.statusCode).toBe(401);
    expect(res.json().error.message).toContain('requires an admin API key');
  });

  it('as onRequest hooks, auth runs before the body is parsed or validated', async () => {
    const invalid = await app.inject({ method: 'POST', url: '/v1/admin/escrows', payload: { amount: -1 } });
    expect(invalid.statusCode).toBe(401);
    const garbage = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, payload: '{not json' });
    expect(garbage.statusCode).toBe(401);
  });
});
