/**
 * A throwaway PostgreSQL cluster for tests (issue 42: real PostgreSQL, no mock): bench/pg-cluster.ts
 * with fsync and full-page writes off (nothing to keep). One cluster per test file;
 * `createDatabase()` gives each test a fresh database.
 *
 * No binaries means a failing test with the remedy, never a skip.
 */
import { afterAll, beforeAll } from 'vitest';
import { pgBinDir, startPgCluster as startCluster, type PgCluster } from '../../bench/pg-cluster.js';

export type { PgCluster } from '../../bench/pg-cluster.js';

const INSTALL_HINT =
  "PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or under /usr/lib/postgresql/*/bin. Install Debian's postgresql package " +
  '(`apt-get install -y postgresql`; .ci/run does it) or put its bin directory on PATH.';

/** The directory holding initdb and pg_ctl: PATH first, then the newest /usr/lib/postgresql/N/bin. */
export function findPgBin(path?: string, root?: string): string {
  const bin = pgBinDir(path, root);
  if (bin === undefined) throw new Error(INSTALL_HINT);
  return bin;
}

export function startPgCluster(): Promise<PgCluster> {
  return startCluster(findPgBin(), { durable: false, prefix: 't' }).catch((error: unknown) => {
    throw /postgres` OS user/.test((error as Error).message) ? new Error(`${(error as Error).message} ${INSTALL_HINT}`) : error;
  });
}

/** A cluster for the whole test file: started before its first test, stopped after its last. */
export function usePgCluster(): PgCluster {
  let cluster: PgCluster | undefined;
  beforeAll(async () => {
    cluster = await startPgCluster();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  const get = (): PgCluster => {
    if (!cluster) throw new Error('the PostgreSQL cluster starts in beforeAll: use it inside a test');
    return cluster;
  };
  return {
    config: (database) => get().config(database),
    url: (database) => get().url(database),
    createDatabase: (owner) => get().createDatabase(owner),
    serverCpuSeconds: () => get().serverCpuSeconds(),
    stop: () => get().stop(),
  };
}
