/**
 * DEVSHARD_GATEWAY_DISABLED*: applied on the first start only (the gateway database does not exist
 * yet), never without a URL (the settings POST's rule); the 308 body's new_url is always a string;
 * a settings POST of only `disabled.message` works while a URL is in effect. Real gateways.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, generateKeys } from '../../src/config/index.js';
import { newEvent, settingsStream } from '../../src/events/catalog.js';
import { eventsFile, openSqliteEventStore } from '../../src/events/sqlite-store.js';
import { disposeTestGateway, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const NEW_URL = 'https://next.example.org/v1';
const OTHER_URL = 'https://other.example.org/v1';
const DISABLED = { DEVSHARD_GATEWAY_DISABLED: '1', DEVSHARD_GATEWAY_DISABLED_MESSAGE: 'moved', DEVSHARD_GATEWAY_DISABLED_NEW_URL: NEW_URL };

describe('DEVSHARD_GATEWAY_DISABLED bootstrap', () => {
  let gw: TestGateway | undefined;
  const keys = generateKeys();
  let storageDir: string;
  const start = async (env: Record<string, string> = {}) => {
    await gw?.stop();
    gw = await startTestGateway({ storageDir, keys, env });
    return gw;
  };
  afterEach(async () => {
    await disposeTestGateway(gw);
    gw = undefined;
  });
  const fresh = () => (storageDir = mkdtempSync(join(tmpdir(), 'shardgate-disabled-')));

  it('first start: 308 with Location and string members; a POST of only the message keeps the URL', async () => {
    fresh();
    const g = await start(DISABLED);
    for (const path of ['/v1/status', '/v1/models']) {
      const r = await g.call(path, { key: 'client' });
      expect(r.status, path).toBe(308);
      expect(r.headers.get('location')).toBe(NEW_URL);
      expect(r.json).toEqual({ status: 'disabled', message: 'moved', new_url: NEW_URL });
    }
    const msg = await g.call('/v1/admin/settings', { body: { disabled: { message: 'moved for good' } } });
    expect(msg.status, msg.text).toBe(200);
    expect(msg.json.disabled).toEqual({ enabled: true, message: 'moved for good', new_url: NEW_URL });
    const r = await g.call('/v1/status', { key: 'none' });
    expect(r.status).toBe(308);
    expect(r.json).toEqual({ status: 'disabled', message: 'moved for good', new_url: NEW_URL });
  });

  it('later starts: the variables have no effect, the recorded state holds', async () => {
    fresh();
    await start(DISABLED);
    // Removed: still disabled (recorded), with the message and URL of the log.
    let g = await start();
    let r = await g.call('/v1/status', { key: 'none' });
    expect(r.status).toBe(308);
    expect(r.json).toEqual({ status: 'disabled', message: 'moved', new_url: NEW_URL });
    // Turned off by POST, then a start with the variable set (another URL): stays off.
    expect((await g.call('/v1/admin/settings', { body: { disabled: { enabled: false } } })).status).toBe(200);
    g = await start({ ...DISABLED, DEVSHARD_GATEWAY_DISABLED_NEW_URL: OTHER_URL });
    expect((await g.call('/v1/status', { key: 'none' })).status).toBe(200);
    expect((await g.call('/v1/admin/settings')).json.disabled).toEqual({ enabled: false, message: 'moved', new_url: NEW_URL });
    r = await g.call('/v1/status', { key: 'none' });
    expect(r.status).toBe(200);
  });

  it('a first start that appended nothing still counts: a restart with the variable set does not apply it', async () => {
    fresh();
    let g = await start();
    expect(g.store.lastPosition()).toBe(0);
    await g.stop();
    gw = undefined;
    expect(existsSync(eventsFile(storageDir))).toBe(true);
    g = await start(DISABLED);
    expect((await g.call('/v1/status', { key: 'none' })).status).toBe(200);
    expect((await g.call('/v1/admin/settings')).json.disabled.enabled).toBe(false);
  });

  it('on without DEVSHARD_GATEWAY_DISABLED_NEW_URL: the gateway refuses to start, naming the variable', async () => {
    fresh();
    const { DEVSHARD_GATEWAY_DISABLED_NEW_URL: _url, ...withoutUrl } = DISABLED;
    const err = await startTestGateway({ storageDir, keys, env: withoutUrl }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain('DEVSHARD_GATEWAY_DISABLED_NEW_URL');
    expect(existsSync(eventsFile(storageDir))).toBe(false);
    // The settings POST has the same rule.
    const g = await start();
    const r = await g.call('/v1/admin/settings', { body: { disabled: { enabled: true, message: 'x' } } });
    expect(r.status).toBe(400);
    expect(r.json.error.param).toBe('disabled.new_url');
  });

  it('on without a URL on a later start: no effect, the gateway starts and serves', async () => {
    fresh();
    await start();
    const { DEVSHARD_GATEWAY_DISABLED_NEW_URL: _url, ...withoutUrl } = DISABLED;
    const g = await start(withoutUrl);
    expect((await g.call('/v1/status', { key: 'none' })).status).toBe(200);
    expect((await g.call('/v1/admin/settings')).json.disabled.enabled).toBe(false);
  });

  it('a log of an older version holding the switch on without a URL: new_url is "" (a string), no Location', async () => {
    fresh();
    await (await start()).stop();
    gw = undefined;
    const store = openSqliteEventStore(eventsFile(storageDir));
    const metadata = { actor: { kind: 'startup' as const } };
    await store.append(settingsStream, [newEvent('GatewayDisabled', { message: 'old', newUrl: '' }, metadata)], { expectedVersion: store.streamVersion(settingsStream) });
    await store.close();
    const g = await start();
    const r = await g.call('/v1/status', { key: 'none' });
    expect(r.status).toBe(308);
    expect(r.headers.get('location')).toBeNull();
    expect(r.json).toEqual({ status: 'disabled', message: 'old', new_url: '' });
    // Changing only the message needs a URL in effect: none here, so the POST names it.
    expect((await g.call('/v1/admin/settings', { body: { disabled: { message: 'newer' } } })).status).toBe(400);
    const fixed = await g.call('/v1/admin/settings', { body: { disabled: { message: 'newer', new_url: NEW_URL } } });
    expect(fixed.status, fixed.text).toBe(200);
    expect((await g.call('/v1/status', { key: 'none' })).headers.get('location')).toBe(NEW_URL);
  });
});
