/**
 * `shardgate verify` on a PostgreSQL log (issue 42): a gateway's log moved into a throwaway
 * PostgreSQL database (`shardgate migrate`), then the registered `verify` command run on it with
 * `--database-url`, and with DEVSHARD_STORAGE_MODE=postgres (DATABASE_URL, or the PG* variables).
 * A good log passes (exit 0) with SQLite's summary; a row altered by the owner (guard triggers
 * disabled) fails naming its position (exit 1); the password is in no output, not even a driver's
 * error.
 */
import { Command } from 'commander';
import { rmSync } from 'node:fs';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { runMigrate } from '../../src/cli/commands/migrate.js';
import { registerVerify, runVerifyCommand } from '../../src/cli/commands/verify.js';
import { MODEL, startGatewayWithEscrow } from '../helpers/gateway.js';
import { startPgCluster, type PgCluster } from '../helpers/pg-cluster.js';

const PASSWORD = 'Sup3r-s3cret-pw';

let cluster: PgCluster;
let database = '';
/** The log's database, with a password (the cluster trusts local connections, so any password is accepted). */
let url = '';
let shown = '';
let port = 0;
let escrowId = '';
let events = 0;
const dirs: string[] = [];

beforeAll(async () => {
  cluster = await startPgCluster();
  const { gw, escrowId: id } = await startGatewayWithEscrow();
  escrowId = id;
  dirs.push(gw.storageDir);
  for (let i = 0; i < 2; i++) expect((await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: `hello ${i}` }], max_tokens: 8 } })).status).toBe(200);
  await gw.stop();
  database = await cluster.createDatabase();
  port = Number(cluster.config().port);
  url = cluster.url(database).replace('postgres@', `postgres:${PASSWORD}@`);
  shown = `postgres://postgres:***@127.0.0.1:${port}/${database}`;
  const out: string[] = [];
  expect(await runMigrate(gw.storageDir, url, (s) => out.push(s))).toBe(0);
  events = Number(/migrated (\d+) events/.exec(out.join(''))?.[1]);
  expect(events).toBeGreaterThan(0);
}, 120_000);
afterAll(async () => {
  await cluster?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
afterEach(() => {
  vi.restoreAllMocks();
  process.exitCode = undefined;
});

/** The registered command, as `shardgate verify <args>` runs it: its stdout, stderr and exit code. */
async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((s: string | Uint8Array) => ((out += String(s)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => ((err += String(s)), true));
  const program = new Command().exitOverride();
  registerVerify(program);
  try {
    await program.parseAsync(['verify', ...args], { from: 'user' });
  } finally {
    vi.restoreAllMocks();
  }
  const code = Number(process.exitCode ?? 0);
  process.exitCode = undefined;
  return { code, out, err };
}

/** The command under an environment (DEVSHARD_STORAGE_MODE and friends). */
async function withEnv(env: NodeJS.ProcessEnv, opts: { databaseUrl?: string; storage?: string } = {}): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runVerifyCommand(opts, env, (s) => (out += s), (s) => (err += s));
  return { code, out, err };
}

/** As the database owner: guard triggers off, one UPDATE, guard triggers back on. */
async function asOwner(sql: string, values: unknown[] = []): Promise<void> {
  const client = new pg.Client(cluster.config(database));
  await client.connect();
  try {
    await client.query('ALTER TABLE events DISABLE TRIGGER ALL');
    await client.query(sql, values);
    await client.query('ALTER TABLE events ENABLE TRIGGER ALL');
  } finally {
    await client.end();
  }
}

describe('shardgate verify on a PostgreSQL log', () => {
  it('--database-url: a good log passes (exit 0) with the SQLite summary, the URL shown without its password', async () => {
    const r = await cli(['--database-url', url]);
    expect(r.code, r.out + r.err).toBe(0);
    expect(r.out).toMatch(new RegExp(`^ok: ${events} events verified in ${shown.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, last position ${events}, last hash [0-9a-f]{64}; `));
    expect(r.out).toContain(`devshard escrow ${escrowId}`);
    expect(r.out).toMatch(/log anchor at position \d+ holds/);
    expect(r.out + r.err).not.toContain(PASSWORD);
  }, 60_000);

  it('DEVSHARD_STORAGE_MODE=postgres: the database of DATABASE_URL, or of the PG* variables', async () => {
    const byUrl = await withEnv({ DEVSHARD_STORAGE_MODE: 'postgres', DATABASE_URL: url });
    expect(byUrl.code, byUrl.out + byUrl.err).toBe(0);
    expect(byUrl.out).toContain(`ok: ${events} events verified in ${shown}, last position ${events}`);
    expect(byUrl.out + byUrl.err).not.toContain(PASSWORD);

    const byPg = await withEnv({ DEVSHARD_STORAGE_MODE: 'postgres', PGHOST: '127.0.0.1', PGPORT: String(port), PGUSER: 'postgres', PGPASSWORD: PASSWORD, PGDATABASE: database });
    expect(byPg.code, byPg.out + byPg.err).toBe(0);
    expect(byPg.out).toContain(`ok: ${events} events verified in postgres://postgres@127.0.0.1:${port}/${database}, last position ${events}`);
    expect(byPg.out + byPg.err).not.toContain(PASSWORD);

    // The flag wins over the environment; --storage still means the SQLite log.
    const flag = await withEnv({ DEVSHARD_STORAGE_MODE: 'postgres', DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' }, { databaseUrl: url });
    expect(flag.code, flag.out + flag.err).toBe(0);
    const sqlite = await withEnv({ DEVSHARD_STORAGE_MODE: 'postgres', DATABASE_URL: url }, { storage: dirs[0]! });
    expect(sqlite.code, sqlite.out + sqlite.err).toBe(0);
    expect(sqlite.out).toContain(`events verified in ${dirs[0]}/events.sqlite`);
  }, 60_000);

  it('refuses what it cannot use (exit 2), and an unreachable database is a failure (exit 1); no password in either', async () => {
    const both = await withEnv({}, { databaseUrl: url, storage: dirs[0]! });
    expect(both).toMatchObject({ code: 2, out: '' });
    expect(both.err).toContain('not both');
    const notPg = await withEnv({}, { databaseUrl: `mysql://root:${PASSWORD}@127.0.0.1/db` });
    expect(notPg.code).toBe(2);
    expect(notPg.err).toContain('--database-url must be a postgres:// or postgresql:// URL');
    const unset = await withEnv({ DEVSHARD_STORAGE_MODE: 'postgres' });
    expect(unset.code).toBe(2);
    expect(unset.err).toContain('DATABASE_URL or PGHOST is required with DEVSHARD_STORAGE_MODE=postgres');

    const wrongDb = await cli(['--database-url', `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/no_such_db`]);
    expect(wrongDb.code).toBe(1);
    expect(wrongDb.out).toMatch(/^FAILED: cannot verify the log: .*no_such_db.* \(postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/no_such_db\)\n$/);
    for (const r of [both, notPg, unset, wrongDb]) expect(r.out + r.err).not.toContain(PASSWORD);

    const empty = await cli(['--database-url', cluster.url(await cluster.createDatabase()).replace('postgres@', `postgres:${PASSWORD}@`)]);
    expect(empty.code).toBe(1);
    expect(empty.out).toMatch(/^FAILED: not an event log \(no events table\) \(postgres:\/\/postgres:\*\*\*@/);
  }, 60_000);

  // Last: it alters the log.
  it('a row altered by the owner (guard triggers disabled): exit 1, naming the position and why, without the password', async () => {
    const client = new pg.Client(cluster.config(database));
    await client.connect();
    // The escrow's deposit: what a dishonest operator would edit.
    const row = (await client.query<{ position: number }>("SELECT position FROM events WHERE type = 'EscrowCreated' ORDER BY position LIMIT 1")).rows[0]!;
    await client.end();
    const position = Number(row.position);
    // The append-only triggers refuse the UPDATE while they are on.
    const guarded = new pg.Client(cluster.config(database));
    await guarded.connect();
    await expect(guarded.query('UPDATE events SET data = data WHERE position = $1', [position])).rejects.toThrow(/append-only/);
    await guarded.end();
    await asOwner("UPDATE events SET data = replace(data, '10000000000', '90000000000') WHERE position = $1", [position]);

    const r = await cli(['--database-url', url]);
    expect(r.code).toBe(1);
    expect(r.out).toContain(`FAILED at position ${position}: hash mismatch: the event was altered after it was written (EscrowCreated in `);
    expect(r.out).toContain(`(${shown})`);
    expect(r.out + r.err).not.toContain(PASSWORD);

    const env = await withEnv({ DEVSHARD_STORAGE_MODE: 'postgres', DATABASE_URL: url });
    expect(env.code).toBe(1);
    expect(env.out).toContain(`FAILED at position ${position}: hash mismatch`);
    expect(env.out + env.err).not.toContain(PASSWORD);
  }, 60_000);
});
