/**
 * A throwaway PostgreSQL cluster, for the bench and (through test/helpers/pg-cluster.ts) the tests:
 * it lives here because the build compiles src/ and bench/, not test/. `initdb` into a temp dir, a
 * free port on 127.0.0.1, the unix socket inside the temp dir, `pg_ctl start -w`; `stop()` stops it
 * and removes the dir. Run as root, the server runs as the `postgres` OS user (initdb refuses root):
 * the temp dir is handed to it and the binaries run through `runuser -u postgres --`.
 *
 * `durable: true` (the bench) keeps PostgreSQL's durable defaults (fsync, synchronous_commit,
 * full_page_writes on), so its commits pay the flush that SQLite's synchronous=FULL commits pay in
 * the same bench; `durable: false` (the tests) turns fsync and full-page writes off: speed, nothing
 * to keep.
 *
 * `pgBinDir()` answers undefined when the server binaries are missing (the bench then reports the
 * section as skipped; the tests fail with the remedy); `serverCpuSeconds()` is the CPU the whole
 * server (postmaster and every backend and background process) has used so far, from /proc.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
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
  /** CPU seconds (user + system) of the server's processes so far: the postmaster and its children. */
  serverCpuSeconds(): number;
  stop(): Promise<void>;
}

/** The directory holding initdb and pg_ctl (PATH first, then the newest /usr/lib/postgresql/N/bin), or undefined. */
export function pgBinDir(path = process.env.PATH ?? '', root = '/usr/lib/postgresql'): string | undefined {
  for (const dir of path.split(delimiter)) {
    if (dir && existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) return dir;
  }
  const versions = existsSync(root) ? readdirSync(root).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) {
    const dir = join(root, v, 'bin');
    if (existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) return dir;
  }
  return undefined;
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
    throw new Error('running as root, and PostgreSQL refuses to run as root: no `postgres` OS user to run it as.');
  }
  return { uid, gid, run: (bin, args) => run('runuser', ['-u', 'postgres', '--', bin, ...args]) };
}

/** utime + stime of a process, seconds (stat(5) fields 14 and 15); 0 when it is gone. */
function cpuOf(pid: string): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return 0;
  }
}

function parentOf(pid: string): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1];
  } catch {
    return undefined;
  }
}

export async function startPgCluster(bin: string, opts: { durable: boolean; prefix: string }): Promise<PgCluster> {
  const as = runner();
  const dir = mkdtempSync(join(tmpdir(), `shardgate-${opts.prefix}-pg-`));
  if (as.uid !== undefined) chownSync(dir, as.uid, as.gid!);
  const data = join(dir, 'data');
  const port = await freePort();
  const stopCluster = () => {
    try {
      // A durable cluster shuts down cleanly; a test's has nothing to keep.
      as.run(join(bin, 'pg_ctl'), ['stop', '-D', data, '-m', opts.durable ? 'fast' : 'immediate', '-w']);
    } catch {
      // not running
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    as.run(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
    const fast = opts.durable ? [] : ['-c fsync=off', '-c full_page_writes=off'];
    const options = [`-p ${port}`, `-k ${dir}`, '-c listen_addresses=127.0.0.1', ...fast, '-c max_connections=100'].join(' ');
    as.run(join(bin, 'pg_ctl'), ['start', '-D', data, '-w', '-t', '30', '-l', join(dir, 'server.log'), '-o', options]);
  } catch (error) {
    stopCluster();
    throw error;
  }
  process.once('exit', () => existsSync(dir) && stopCluster());
  const postmaster = readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]!.trim();
  let n = 0;
  const config = (database = 'postgres'): pg.PoolConfig => ({ host: '127.0.0.1', port, user: 'postgres', database });
  return {
    config,
    url: (database) => `postgres://postgres@127.0.0.1:${port}/${database}`,
    async createDatabase(owner?: string) {
      const name = `${opts.prefix}${process.pid}_${++n}`;
      const client = new pg.Client(config());
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}${owner ? ` OWNER ${owner}` : ''}`);
      } finally {
        await client.end();
      }
      return name;
    },
    serverCpuSeconds() {
      // Backends that ended took their CPU with them; over a round the bench's pools keep theirs open.
      let sum = cpuOf(postmaster);
      for (const pid of readdirSync('/proc')) {
        if (/^\d+$/.test(pid) && parentOf(pid) === postmaster) sum += cpuOf(pid);
      }
      return sum;
    },
    async stop() {
      stopCluster();
    },
  };
}
