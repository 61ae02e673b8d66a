/**
 * Restarts across versions, on one storage directory with the embedded devnet's state kept:
 * - a v2 escrow on `/v1/devshard` (what every escrow of a log older than protocol versions is):
 *   restarted without DEVNET_LEGACY_ROUTE, the embedded devnet keeps that route for it, so an old
 *   quick-start directory still serves; its finalize names "v2";
 * - a session binds once, as a host does: when the chain's escrow fields change between runs, the
 *   next run keeps the facts the session was bound to (no second DevshardSessionOpened with other
 *   facts), so `verify` still passes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { devshardSessionStream } from '../../src/events/catalog.js';
import { eventsFile } from '../../src/events/sqlite-store.js';
import { runVerify } from '../../src/cli/commands/verify.js';
import { generateKeys } from '../../src/config/init-file.js';
import { MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const chat = { model: MODEL, messages: [{ role: 'user', content: 'hello again' }], max_tokens: 16 };

describe('restarts of an escrow recorded at one version', () => {
  const storageDir = mkdtempSync(join(tmpdir(), 'shardgate-restart-versions-'));
  const keys = generateKeys();
  let gw: TestGateway | undefined;
  afterAll(async () => {
    await gw?.stop();
    rmSync(storageDir, { recursive: true, force: true });
  });
  const start = (env: Record<string, string>) => startTestGateway({ storageDir, keys, env: { DEVSHARD_HOST_PROTOCOL: 'devshard', ...env } });

  it('a v2 escrow on /v1/devshard keeps being served after a restart without DEVNET_LEGACY_ROUTE', async () => {
    gw = await start({ DEVNET_LEGACY_ROUTE: '1' });
    const c = await gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key: keys.privateKey, register: true, protocol_version: 'v2' } });
    expect(c.status, c.text).toBe(200);
    expect((await gw.call('/v1/chat/completions', { body: chat })).status).toBe(200);
    await gw.stop();
    gw = await start({});
    const r = await gw.call('/v1/chat/completions', { body: chat });
    expect(r.status, r.text).toBe(200);
    expect(gw.logs.some((l) => l.includes('the embedded devnet keeps that route for them'))).toBe(true);
  }, 120_000);

  it('the session keeps the facts it was bound to when the chain\'s escrow fields change between runs', async () => {
    const id = '1';
    const opened = () => gw!.store.readStream(devshardSessionStream(id)).filter((r) => r.type === 'DevshardSessionOpened').map((r) => JSON.stringify(r.data));
    const before = opened();
    expect(before.length).toBeGreaterThan(0);
    // The chain's frozen fields of this escrow change (as a legacy row read before and after a chain upgrade would).
    const row = gw!.devnet!.chain.state.escrows[id]!;
    row.validationRate = (row.validationRate ?? 0) + 4242;
    await gw!.stop();
    gw = await start({});
    expect((await gw.call('/v1/chat/completions', { body: chat })).status).toBe(200);
    const after = opened();
    // No reopening with other facts: the latest recorded facts are the ones bound first.
    expect(after.at(-1)).toBe(before.at(-1));
    const f = await gw.call(`/devshard/${id}/v1/finalize`, { method: 'POST' });
    expect(f.status, f.text).toBe(200);
    expect(f.json.version).toBe('v2');
    let out = '';
    const code = await runVerify(eventsFile(storageDir), (s) => (out += s), (s) => (out += s));
    expect(code, out).toBe(0);
  }, 120_000);
});
