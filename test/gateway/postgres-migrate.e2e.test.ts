/**
 * `shardgate migrate` (issue 42): a gateway's SQLite log copied into an empty PostgreSQL database
 * as stored; both verify; a second copy into the same database is refused; and a gateway started
 * on the copy continues the escrow at its next nonce and settles it.
 */
import Database from 'better-sqlite3';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runMigrate } from '../../src/cli/commands/migrate.js';
import { loadConfig } from '../../src/config/index.js';
import { MigrationRefusedError, copySqliteLogToPostgres } from '../../src/events/postgres/copy-log.js';
import { verifyPostgresLog } from '../../src/events/postgres/verify.js';
import { eventsFile } from '../../src/events/sqlite-store.js';
import { startGateway } from '../../src/main/start.js';
import { capturingLogger, httpCaller, MODEL, startGatewayWithEscrow, testGatewayEnv } from '../helpers/gateway.js';
import { startPgCluster, type PgCluster } from '../helpers/pg-cluster.js';

let cluster: PgCluster;
const dirs: string[] = [];
beforeAll(async () => {
  cluster = await startPgCluster();
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('shardgate migrate: SQLite to PostgreSQL', () => {
  it('copies the log as stored, both verify, a second copy is refused, and the gateway continues from the copy', async () => {
    const { gw, escrowId } = await startGatewayWithEscrow();
    dirs.push(gw.storageDir);
    for (let i = 0; i < 2; i++) expect((await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: `before ${i}` }], max_tokens: 8 } })).status).toBe(200);
    const nonce = gw.ctx.engine.escrow(escrowId)!.context.nonce;
    await gw.stop();
    const source = new Database(eventsFile(gw.storageDir), { readonly: true });
    const tail = source.prepare('SELECT MAX(position) FROM events').pluck().get() as number;
    source.close();

    const url = cluster.url(await cluster.createDatabase());
    const out: string[] = [];
    expect(await runMigrate(gw.storageDir, url, (s) => out.push(s))).toBe(0);
    expect(out.join('')).toContain(`migrated ${tail} events`);
    expect(await verifyPostgresLog(url)).toMatchObject({ ok: true });
    await expect(copySqliteLogToPostgres(eventsFile(gw.storageDir), url)).rejects.toBeInstanceOf(MigrationRefusedError);

    // The same keys, the devnet's state in the same storage dir; the log now in PostgreSQL.
    const env = testGatewayEnv(gw.keys, gw.storageDir, { DEVSHARD_STORAGE_MODE: 'postgres', DATABASE_URL: url, GATEWAY_SHUTDOWN_TIMEOUT_MS: '5000' });
    const { logger } = await capturingLogger('warn');
    const pgw = await startGateway(loadConfig({ env, cwd: gw.storageDir }), { logger });
    try {
      const call = httpCaller(pgw.url, gw.keys, () => pgw.ctx.engine.idle());
      expect(pgw.ctx.engine.escrow(escrowId)!.context.nonce).toBe(nonce);
      const r = await call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'after the move' }], max_tokens: 8 } });
      expect(r.status, r.text).toBe(200);
      expect(pgw.ctx.engine.escrow(escrowId)!.context.nonce).toBe(nonce + 1);
      const settled = await call(`/v1/admin/devshards/${escrowId}/settle`, { body: {} });
      expect(settled.status, settled.text).toBe(200);
    } finally {
      await pgw.stop();
    }
    expect(await verifyPostgresLog(url)).toMatchObject({ ok: true });
  }, 120_000);

  it('refuses a source log that fails verification, naming the position, and copies nothing', async () => {
    const { gw } = await startGatewayWithEscrow();
    dirs.push(gw.storageDir);
    await gw.stop();
    const raw = new Database(eventsFile(gw.storageDir));
    raw.exec('DROP TRIGGER IF EXISTS events_no_update');
    raw.prepare("UPDATE events SET data = replace(data, '10000000000', '90000000000') WHERE position = (SELECT MIN(position) FROM events WHERE type = 'EscrowCreated')").run();
    raw.close();
    const url = cluster.url(await cluster.createDatabase());
    await expect(copySqliteLogToPostgres(eventsFile(gw.storageDir), url)).rejects.toThrow(/fails verification at position \d+/);
    const out: string[] = [];
    expect(await runMigrate(gw.storageDir, url, (s) => out.push(s))).toBe(1);
    expect(out.join('')).toMatch(/refused: the source log .* fails verification at position \d+/);
    expect(await verifyPostgresLog(url)).toMatchObject({ ok: true }); // empty: nothing was copied
  }, 60_000);
});
