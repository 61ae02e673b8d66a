/**
 * The gateway on a PostgreSQL event log (DEVSHARD_STORAGE_MODE=postgres, issue 42), through the
 * whole stack: HTTP, the engine, the PostgreSQL store on a throwaway cluster, the chain client and
 * the devnet over loopback. Chats are served and billed, an escrow is finalized and settled, the
 * gateway restarts on the same database and continues the nonces, a second gateway on that log is
 * refused when it runs under the same instance name (one process per name; several instances
 * share a log under their own names, test/gateway/scale-out.e2e.test.ts), and the log verifies (`shardgate verify`). The
 * admin answers' `storage_path` names the database without its password.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runVerifyCommand } from '../../src/cli/commands/verify.js';
import { generateKeys, loadConfig } from '../../src/config/index.js';
import { escrowStream } from '../../src/events/catalog.js';
import type { RecordedEvent } from '../../src/events/envelope.js';
import { verifyPostgresLog } from '../../src/events/postgres/verify.js';
import { PostgresLogInUseError } from '../../src/events/postgres/writer-lock.js';
import { startGateway, type RunningGateway } from '../../src/main/start.js';
import { capturingLogger, httpCaller, MODEL, testGatewayEnv } from '../helpers/gateway.js';
import { startPgCluster, type PgCluster } from '../helpers/pg-cluster.js';
import { requestRecords } from '../helpers/request-records.js';

let cluster: PgCluster;
/** With a password (the cluster trusts local connections): it must show nowhere. */
const PASSWORD = 'pg-Secret-42';
let url = '';
/** The URL as answers and messages show it. */
let shown = '';
const keys = generateKeys();
const dirs: string[] = [];

beforeAll(async () => {
  cluster = await startPgCluster();
  const database = await cluster.createDatabase();
  url = cluster.url(database).replace('postgres@', `postgres:${PASSWORD}@`);
  shown = `postgres://postgres:***@127.0.0.1:${cluster.config().port}/${database}`;
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A gateway on the cluster's database (its storage dir holds only the devnet's state and the keys). */
async function start(storageDir = mkdtempSync(join(tmpdir(), 'shardgate-pg-'))): Promise<RunningGateway & { storageDir: string; call: ReturnType<typeof httpCaller> }> {
  dirs.push(storageDir);
  const env = testGatewayEnv(keys, storageDir, { DEVSHARD_STORAGE_MODE: 'postgres', DATABASE_URL: url, GATEWAY_SHUTDOWN_TIMEOUT_MS: '5000' });
  const { logger } = await capturingLogger('warn');
  const gw = await startGateway(loadConfig({ env, cwd: storageDir }), { logger });
  return { ...gw, storageDir, call: httpCaller(gw.url, keys, () => gw.ctx.engine.idle()) };
}

async function all(records: Iterable<RecordedEvent> | AsyncIterable<RecordedEvent>): Promise<RecordedEvent[]> {
  const out: RecordedEvent[] = [];
  for await (const r of records) out.push(r);
  return out;
}

describe('the gateway on a PostgreSQL event log', () => {
  it('serves, settles, restarts on the same log, refuses a second gateway, and the log verifies', async () => {
    let gw = await start();
    const created = await gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key: keys.privateKey, chain_id: 'shardgate-devnet', register: true } });
    expect(created.status, created.text).toBe(200);
    const a = created.json.id as string;
    // devshardctl's storage_path: where the escrow's state is kept, the database without its password.
    expect(created.json.storage_path).toBe(shown);
    const listed = await gw.call('/v1/admin/devshards');
    expect(listed.status, listed.text).toBe(200);
    expect((listed.json.devshards as { id: string; storage_path: string }[]).find((d) => d.id === a)?.storage_path).toBe(shown);
    const status = await gw.call('/v1/status');
    expect(status.status, status.text).toBe(200);
    for (const r of [created, listed, status]) expect(r.text).not.toContain(PASSWORD);
    // The log's disk is the database server's: not the local directory's free space, which would mislead.
    expect(status.json.storage).toEqual({ log: 'postgres', free_bytes: null, low: false });
    for (let i = 0; i < 3; i++) {
      const r = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: `hello ${i}` }], max_tokens: 8 } });
      expect(r.status, r.text).toBe(200);
    }
    const nonceBefore = gw.ctx.engine.escrow(a)!.context.nonce;
    expect(nonceBefore).toBe(3);

    // A second process under the same instance name is refused: it would take this one's leases as its own.
    await expect(start()).rejects.toBeInstanceOf(PostgresLogInUseError);

    // Restart (the devnet keeps its state in the first storage dir): the nonces continue.
    const dir = gw.storageDir;
    await gw.stop();
    gw = await start(dir);
    expect(gw.ctx.engine.escrow(a)!.context.nonce).toBe(nonceBefore);
    const r = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'after restart' }], max_tokens: 8 } });
    expect(r.status, r.text).toBe(200);
    expect(gw.ctx.engine.escrow(a)!.context.nonce).toBe(nonceBefore + 1);

    const settled = await gw.call(`/v1/admin/devshards/${a}/settle`, { body: {} });
    expect(settled.status, settled.text).toBe(200);
    expect(settled.json.status).toBe('settled');

    const records = await all(gw.store.readAll(0));
    const stream = records.filter((x) => x.streamId === escrowStream(a));
    expect(requestRecords(stream).filter((x) => x.type === 'InferenceFinished')).toHaveLength(4);
    expect(stream.at(-1)!.type).toBe('EscrowSettled');
    // The admin view reads the settled money from the log (an asynchronous read on this store).
    const view = await gw.call(`/v1/admin/devshards/${a}`);
    expect(view.json.state).toBe('settled');
    await gw.stop();
    expect(await verifyPostgresLog(url)).toMatchObject({ ok: true });
    // `shardgate verify` in postgres mode: SQLite's summary, the URL without its password.
    let out = '';
    let err = '';
    expect(await runVerifyCommand({}, { DEVSHARD_STORAGE_MODE: 'postgres', DATABASE_URL: url }, (x) => (out += x), (x) => (err += x)), out + err).toBe(0);
    expect(out.startsWith(`ok: `) && out.includes(` events verified in ${shown}, last position `), out).toBe(true);
    expect(out).toMatch(/; projections checkpoint at position \d+ equals the rebuild/);
    expect(out).toContain(`devshard escrow ${a}`);
    expect(out + err).not.toContain(PASSWORD);
  }, 120_000);
});
