/** The EventStore contract (store-contract.ts) against PostgreSQL: a throwaway cluster, a fresh database per store. */
import {  } from 'vitest';
import { openPostgresEventStore, type PostgresEventStore } from '../../src/events/postgres/store.js';
import type { EventStore } from '../../src/events/store.js';
import { usePgCluster } from '../helpers/pg-cluster.js';
import { storeContract } from './store-contract.js';

const cluster = usePgCluster();

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
