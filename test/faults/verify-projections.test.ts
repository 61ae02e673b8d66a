/**
 * `shardgate verify` also checks the stored projections checkpoint against a rebuild from the log
 * (up to the checkpoint's position) and names the projection that differs.
 */
import Database from 'better-sqlite3';
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventsFile } from '../../src/events/sqlite-store.js';
import { PROJECTIONS_CHECKPOINT } from '../../src/projections/projections.js';
import { ensureBuilt, repoRoot } from '../helpers/store-dist.js';
import { createEscrowViaApi, MODEL, startTestGateway } from '../helpers/gateway.js';

const run = promisify(execFile);
let cli: string;
let dir: string;
let original: string;

async function cliVerify(): Promise<{ code: number; out: string }> {
  try {
    const { stdout } = await run(process.execPath, [cli, 'verify', '--storage', dir], { cwd: repoRoot });
    return { code: 0, out: stdout };
  } catch (e) {
    const err = e as { code: number; stdout: string };
    return { code: err.code, out: err.stdout };
  }
}

function editCheckpoint(edit: (state: any) => void): void {
  const db = new Database(eventsFile(dir));
  const state = JSON.parse(original);
  edit(state);
  db.prepare('UPDATE checkpoints SET state = ? WHERE name = ?').run(JSON.stringify(state), PROJECTIONS_CHECKPOINT);
  db.close();
}

describe('shardgate verify: projections checkpoint vs rebuild', () => {
  beforeAll(async () => {
    cli = ensureBuilt('dist/src/cli/main.js');
    const gw = await startTestGateway();
    dir = gw.storageDir;
    const id = await createEscrowViaApi(gw);
    await gw.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }] } });
    for (let i = 0; i < 3; i++) {
      const r = await gw.call('/v1/chat/completions', { key: 'client', body: { model: MODEL, messages: [{ role: 'user', content: `q${i}` }], max_tokens: 8 } });
      expect(r.status).toBe(200);
    }
    expect((await gw.call(`/devshard/${id}/v1/finalize`, { method: 'POST' })).status).toBe(200);
    await gw.stop(); // checkpoints the projections
    const db = new Database(eventsFile(dir), { readonly: true });
    original = db.prepare('SELECT state FROM checkpoints WHERE name = ?').pluck().get(PROJECTIONS_CHECKPOINT) as string;
    db.close();
    expect(original).toBeTruthy();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('passes when the checkpoint equals the rebuild', async () => {
    const r = await cliVerify();
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/projections checkpoint at position \d+ equals the rebuild/);
  });

  it('names the pool projection when an escrow balance was edited', async () => {
    editCheckpoint((s) => {
      const [id] = Object.keys(s.pool.escrows);
      s.pool.escrows[id!].context.spent = '1';
    });
    const r = await cliVerify();
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/pool projection differs/);
    expect(r.out).not.toMatch(/settings projection/);
  });

  it('names the settings projection when an access mode was edited', async () => {
    editCheckpoint((s) => {
      s.settings.base.request_max_tokens_cap = 1;
    });
    const r = await cliVerify();
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/settings projection differs/);
    expect(r.out).not.toMatch(/pool projection/);
  });

  it('passes again once the original checkpoint is restored', async () => {
    editCheckpoint(() => undefined);
    expect((await cliVerify()).code).toBe(0);
  });
});
