/** The EventStore contract (store-contract.ts) against PostgreSQL: a throwaway cluster, a fresh database per store. */
import { afterAll, beforeAll } from 'vitest';
import { openPostgresEventStore, type PostgresEventStore } from '../../src/events/postgres/store.js';
import type { EventStore } from '../../src/events/store.js';
import { startPgCluster, type PgCluster } from '../helpers/pg-cluster.js';
import { storeContract } from './store-contract.js';

let cluster: PgCluster;
beforeAll(async () => {
  cluster = await startPgCluster();
});
afterAll(async () => {
  await cluster?.stop();
});

const databases = new WeakMap<EventStore, string>();

storeContract('PostgreSQL', {
  async open(): Promise<EventStore> {
    const db = await cluster.createDatabase();
    const store = await openPostgresEventStore(cluster.url(db));
    databases.set(store, db);
    return store;
  },
  async reopen(store: EventStore): Promise<EventStore> {
    await (store as PostgresEventStore).close();
    const db = databases.get(store)!;
    const again = await openPostgresEventStore(cluster.config(db));
    databases.set(again, db);
    return again;
  },
});
