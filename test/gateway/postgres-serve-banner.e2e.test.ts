/**
 * `shardgate serve --devnet` on a PostgreSQL log, as an operator starts it: the banner says where
 * the event log is (the database, its password masked) rather than pointing at the local directory
 * as if the log were there, and a chat answered through it lands in that database (verify sees it).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { verifyPostgresLog } from '../../src/events/postgres/verify.js';
import { usePgCluster } from '../helpers/pg-cluster.js';
import { ensureBuilt } from '../helpers/store-dist.js';

const cluster = usePgCluster();
const dir = mkdtempSync(join(tmpdir(), 'pg-serve-banner-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const PASSWORD = 's3cret-banner';

describe('serve --devnet on PostgreSQL', () => {
  it('names the database (password masked) as the event log, and serves from it', { timeout: 120_000 }, async () => {
    const db = await cluster.createDatabase();
    const admin = new pg.Client(cluster.config(db));
    await admin.connect();
    await admin.query(`ALTER USER postgres PASSWORD '${PASSWORD}'`);
    await admin.end();
    const url = cluster.url(db).replace('postgres@', `postgres:${PASSWORD}@`);
    const child = spawn(process.execPath, [ensureBuilt('dist/src/cli/main.js'), 'serve', '--devnet'], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', DEVSHARD_PORT: '0', DEVSHARD_STORAGE_DIR: join(dir, 'state'), LOG_LEVEL: 'warn', DEVNET_BLOCK_TIME_MS: '50', DEVSHARD_STORAGE_MODE: 'postgres', DATABASE_URL: url },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      let stderr = '';
      const listening = await new Promise<string>((resolve, reject) => {
        child.stderr!.on('data', (c: Buffer) => {
          stderr += c.toString();
          const m = /shardgate is listening on (http:\/\/\S+) {2}\((.*)\)/.exec(stderr);
          if (m && /Try it:/.test(stderr)) resolve(m[0]);
        });
        void exited.then((code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
      });
      expect(listening).toContain(`event log: postgres://postgres:***@127.0.0.1:${cluster.config().port}/${db}`);
      expect(listening).toContain('instance ');
      expect(stderr).not.toContain(PASSWORD);

      const base = /listening on (http:\/\/\S+)/.exec(listening)![1]!;
      const adminKey = /^DEVSHARD_ADMIN_API_KEY=(.*)$/m.exec(readFileSync(join(dir, 'shardgate.env'), 'utf8'))![1]!;
      const model = /"model":"([^"]+)"/.exec(stderr)![1]!;
      const r = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8 }),
      });
      expect(r.status, await r.clone().text()).toBe(200);
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
    const verified = await verifyPostgresLog(url);
    expect(verified).toMatchObject({ ok: true });
    expect((verified as { events: number }).events).toBeGreaterThan(3);
  });
});
