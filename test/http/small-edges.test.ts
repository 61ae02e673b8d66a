/**
 * Issue 38 item 9: small edges of the HTTP surface. A `__proto__` key is refused with a 400 that
 * names the rule, a known path under another method is a 405 with Allow, `/` answers a JSON index,
 * the 413 names the limit, an anyOf refusal names the forms, and the admin_only refusal says so in
 * its code.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refuse } from '../../src/gateway/errors.js';
import { answerFor } from '../../src/http/gateway-answers.js';
import { registerRootRoute } from '../../src/http/routes/root.js';
import { ADMIN_KEY, bearer, buildTestApp, CLIENT_KEY } from './helpers.js';

const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

describe('small edges', () => {
  const { app } = buildTestApp({ app: { bodyLimit: 2048 } });
  registerRootRoute(app);
  beforeAll(() => app.ready());
  afterAll(() => app.close());
  const json = { ...bearer(CLIENT_KEY), 'content-type': 'application/json' };

  it("a valid JSON body with a '__proto__' key is a 400 naming the rule, not 'could not parse'", async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: json, payload: '{"model":"m","messages":[{"role":"user","content":"hi"}],"__proto__":{"admin":true}}' });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: 'forbidden_json_key', type: 'invalid_request_error' });
    expect(res.json().error.message).toContain("'__proto__'");
    // Nested, and constructor.prototype, too.
    const nested = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: json, payload: '{"model":"m","messages":[{"role":"user","content":"hi"}],"user":null,"x":{"constructor":{"prototype":{}}}}' });
    expect(nested.json().error.code).toBe('forbidden_json_key');
    // Invalid JSON is still invalid JSON.
    const broken = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: json, payload: '{"__proto__":' });
    expect(broken.json().error.code).toBe('invalid_json');
    // And the same words as a string value are fine.
    const fine = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: json, payload: JSON.stringify({ ...chat, user: '__proto__' }) });
    expect(fine.statusCode).toBe(200);
  });

  it('GET /v1/chat/completions is a 405 with Allow: POST; an unknown path stays a 404', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/chat/completions', headers: bearer(CLIENT_KEY) });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('POST');
    expect(res.json().error).toMatchObject({ code: 'method_not_allowed', type: 'invalid_request_error' });
    expect(res.json().error.message).toContain('POST');
    const models = await app.inject({ method: 'DELETE', url: '/v1/models', headers: bearer(CLIENT_KEY) });
    expect(models.statusCode).toBe(405);
    expect(models.headers.allow).toBe('GET, HEAD');
    // A parametric route matches by its pattern.
    const finalize = await app.inject({ method: 'GET', url: '/devshard/12/v1/finalize', headers: bearer(ADMIN_KEY) });
    expect(finalize.statusCode).toBe(405);
    expect(finalize.headers.allow).toBe('POST');
    const unknown = await app.inject({ method: 'GET', url: '/v1/nothing-here' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error.code).toBe('unknown_route');
  });

  it('GET / answers a small JSON index pointing to /docs and the routes that are served', async () => {
    const res = await app.inject({ method: 'GET', url: '/' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ object: 'index', name: 'shardgate' });
    expect(body.links.docs).toEqual({ method: 'GET', path: '/docs', description: expect.any(String) });
    expect(body.links.chat_completions.path).toBe('/v1/chat/completions');
    // The console is linked once a route serves it, not before.
    expect(body.links.console).toBeUndefined();
  });

  it('GET / links the console once /console is served', async () => {
    const { app: withConsole } = buildTestApp();
    registerRootRoute(withConsole);
    withConsole.get('/console', async () => 'console');
    const body = (await withConsole.inject({ method: 'GET', url: '/' })).json();
    expect(body.links.console.path).toBe('/console');
    await withConsole.close();
  });

  it('the 413 names the limit of the route', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: json, payload: JSON.stringify({ ...chat, user: 'x'.repeat(4096) }) });
    expect(res.statusCode).toBe(413);
    expect(res.json().error.code).toBe('request_too_large');
    expect(res.json().error.message).toContain('2 KiB (2048 bytes)');
  });

  it('an anyOf refusal names the accepted forms', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/admin/devshards/5/settle', headers: { ...bearer(ADMIN_KEY), 'content-type': 'application/json' }, payload: { fee_amount: true } });
    expect(res.statusCode).toBe(400);
    const { message, param } = res.json().error;
    expect(param).toBe('fee_amount');
    expect(message).not.toContain('does not match any accepted form');
    expect(message).toContain('an integer >= 0');
    expect(message).toContain('a string matching ^[0-9]{1,20}$');
  });

  it("the admin_only refusal of a valid client key: 401, code model_admin_only, message 'requires an admin API key'", () => {
    const answer = answerFor(refuse.adminOnlyModel('some/model'));
    expect(answer.status).toBe(401);
    expect(answer.code).toBe('model_admin_only');
    expect(answer.param).toBe('model');
    expect(answer.message).toContain('requires an admin API key');
    expect(answer.headers['www-authenticate']).toBe('Bearer');
  });
});
