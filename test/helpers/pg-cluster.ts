/**
 * A throwaway PostgreSQL cluster for tests (issue 42: real PostgreSQL, no mock): `initdb` into a
 * temp dir, a free port on 127.0.0.1, the unix socket inside the temp dir, `pg_ctl start -w`;
 * `stop()` stops it and removes the dir. One cluster per test file; `createDatabase()` gives each
 * test a fresh database. Run as root, the server runs as the `postgres` OS user (initdb refuses
 * root): the temp dir is handed to it and the binaries run through `runuser -u postgres --`.
 *
 * No binaries means a failing test with the remedy, never a skip.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import pg from 'pg';

export interface PgCluster {
  /** Connection settings of the cluster's superuser to `database` (default `postgres`). */
  config(database?: string): pg.PoolConfig;
  /** A connection URL to `database`. */
  url(database: string): string;
  /** Creates a fresh, empty database (owned by `owner`, default the superuser) and returns its name. */
  createDatabase(owner?: string): Promise<string>;
  stop(): Promise<void>;
}

const INSTALL_HINT =
  "PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or under /usr/lib/postgresql/*/bin. Install Debian's postgresql package " +
  '(`apt-get install -y postgresql`; .ci/run does it) or put its bin directory on PATH.';

/** The directory holding initdb and pg_ctl: PATH first, then the newest /usr/lib/postgresql/N/bin. */
export function findPgBin(path = process.env.PATH ?? '', root = '/usr/lib/postgresql'): string {
  for (const dir of path.split(delimiter)) {
    if (dir && existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) return dir;
  }
  const versions = existsSync(root) ? readdirSync(root).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) {
    const dir = join(root, v, 'bin');
    if (existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) return dir;
  }
  throw new Error(INSTALL_HINT);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** How to run the server binaries on this machine: as ourselves, or (as root) as `postgres`. */
function runner(): { uid?: number; gid?: number; run(bin: string, args: string[]): void } {
  const run = (cmd: string, args: string[]) => {
    const r = spawnSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    if (r.error) throw r.error;
    if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  };
  if (process.getuid?.() !== 0) return { run };
  let uid: number;
  let gid: number;
  try {
    uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  } catch {
    throw new Error('running as root, and PostgreSQL refuses to run as root: no `postgres` OS user to run it as. ' + INSTALL_HINT);
  }
  return { uid, gid, run: (bin, args) => run('runuser', ['-u', 'postgres', '--', bin, ...args]) };
}

export async function startPgCluster(): Promise<PgCluster> {
  const bin = findPgBin();
  const as = runner();
  const dir = mkdtempSync(join(tmpdir(), 'shardgate-pg-'));
  if (as.uid !== undefined) chownSync(dir, as.uid, as.gid!);
  const data = join(dir, 'data');
  const port = await freePort();
  const stopCluster = () => {
    try {
      as.run(join(bin, 'pg_ctl'), ['stop', '-D', data, '-m', 'immediate', '-w']);
    } catch {
      // not running
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    as.run(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
    const options = [`-p ${port}`, `-k ${dir}`, "-c listen_addresses=127.0.0.1", '-c fsync=off', '-c full_page_writes=off', '-c max_connections=100'].join(' ');
    as.run(join(bin, 'pg_ctl'), ['start', '-D', data, '-w', '-t', '30', '-l', join(dir, 'server.log'), '-o', options]);
  } catch (error) {
    stopCluster();
    throw error;
  }
  process.once('exit', () => existsSync(dir) && stopCluster());
  let n = 0;
  const config = (database = 'postgres'): pg.PoolConfig => ({ host: '127.0.0.1', port, user: 'postgres', database });
  return {
    config,
    url: (database) => `postgres://postgres@127.0.0.1:${port}/${database}`,
    async createDatabase(owner?: string) {
      const name = `t${process.pid}_${++n}`;
      const client = new pg.Client(config());
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}${owner ? ` OWNER ${owner}` : ''}`);
      } finally {
        await client.end();
      }
      return name;
    },
    async stop() {
      stopCluster();
    },
  };
}
