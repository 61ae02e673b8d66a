/**
 * The event log on PostgreSQL, the EventStore port's server implementation (../store.ts), for
 * several gateway instances sharing one log (issue 42). The pieces, by concept: connections
 * (connection.ts), schema and guards (schema.ts), the group commit under the tail lock
 * (writer.ts), what this instance has heard of the log (committed-log.ts), following the other
 * instances' commits (follower.ts), reads and subscriptions (reader.ts), checkpoints
 * (checkpoints.ts). docs/notes/postgres-store.md explains the design.
 */
import type pg from 'pg';
import type { Observable } from 'rxjs';
import type { NewEvent, RecordedEvent } from '../envelope.js';
import type { AppendOptions, AppendResult, Checkpoint, CommitListener, EventStore, StoreStats } from '../store.js';
import { PgCheckpoints } from './checkpoints.js';
import { CommittedLog } from './committed-log.js';
import { connectionConfig, openPool, type PostgresConnection } from './connection.js';
import { DEFAULT_POLL_MS, LogFollower } from './follower.js';
import { PostgresReader } from './reader.js';
import { migratePostgres } from './schema.js';
import { PgGroupCommit } from './writer.js';
import { PgLeases } from './leases.js';

export type { PostgresConnection } from './connection.js';

export interface PostgresEventStoreOptions {
  /** Most events written in one group-commit transaction; the rest wait for the next one. */
  maxBatchEvents?: number;
  /** Connections of the pool (writes, reads, follow reads); default 4. LISTEN takes one more. */
  poolSize?: number;
  /** Poll bound of the follower (ms, default 500): see follower.ts. */
  pollMs?: number;
  /** LISTEN for other instances' commits (default true); false: the poll alone. */
  listen?: boolean;
  /** Clock for event times (tests pin it). */
  now?: () => Date;
  /** Called when an onCommit listener throws; the store carries on regardless. */
  onListenerError?: (error: unknown) => void;
  /** Called when following the log fails (a read or the LISTEN connection); it retries at the poll. */
  onFollowError?: (error: unknown) => void;
}

const warn = (what: string) => (error: unknown) => process.emitWarning(`${what}: ${String((error as Error)?.message ?? error)}`, 'EventStoreWarning');

/**
 * Opens the log on a PostgreSQL database (creating and migrating its tables), loads its tail and
 * stream heads into memory, and starts following it. `connection`: a URL or node-postgres' pool
 * settings (the standard PG* environment variables fill in what they leave out).
 */
export async function openPostgresEventStore(connection: PostgresConnection, opts: PostgresEventStoreOptions = {}): Promise<PostgresEventStore> {
  const pool = openPool(connection, opts.poolSize ?? 4);
  pool.on('error', warn('event store connection')); // an idle connection dropped; the pool replaces it
  try {
    await migratePostgres(pool);
    const { position, versions } = await loadHeads(pool);
    const store = new PostgresEventStore(pool, connectionConfig(connection), position, versions, opts);
    await store.startFollowing();
    return store;
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw error;
  }
}

/** The tail and every stream's head, read in one snapshot. */
async function loadHeads(pool: pg.Pool): Promise<{ position: number; versions: Map<string, number> }> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const head = await client.query<{ position: number }>('SELECT position FROM log_head WHERE id = 1');
    const streams = await client.query<[string, number]>({ text: 'SELECT stream_id, version FROM streams', rowMode: 'array' });
    await client.query('COMMIT');
    return { position: head.rows[0]?.position ?? 0, versions: new Map(streams.rows) };
  } finally {
    client.release();
  }
}

/**
 * The event log on PostgreSQL. Any number of instances may open the same database: commits are
 * serialized by the tail lock (writer.ts), and each instance follows the others' (follower.ts),
 * so `onCommit`, `subscribe`, `lastPosition` and `streamVersion` cover the whole shared log.
 * Reads (`readStream`, `readAll`, `loadCheckpoint`) are asynchronous.
 */
export class PostgresEventStore implements EventStore {
  private readonly pool: pg.Pool;
  private readonly log: CommittedLog;
  private readonly writes: PgGroupCommit;
  private readonly reader: PostgresReader;
  private readonly checkpoints: PgCheckpoints;
  private readonly follower: LogFollower;
  private closing: Promise<void> | undefined;
  private closedFlag = false;
  /** The leases of the instances sharing this log (escrows' nonce streams, the background tasks). */
  readonly leases: PgLeases;

  /** Use openPostgresEventStore; this assumes a migrated database and its heads. */
  constructor(pool: pg.Pool, clientConfig: pg.ClientConfig, position: number, versions: Map<string, number>, opts: PostgresEventStoreOptions = {}) {
    this.pool = pool;
    this.log = new CommittedLog(position, versions, opts.onListenerError ?? warn('event store commit listener threw'));
    this.writes = new PgGroupCommit(pool, this.log, { maxBatchEvents: Math.max(1, opts.maxBatchEvents ?? 10_000), now: opts.now ?? (() => new Date()) });
    const isClosed = () => this.closedFlag;
    this.reader = new PostgresReader(pool, this.log, isClosed);
    this.checkpoints = new PgCheckpoints(pool, isClosed);
    this.leases = new PgLeases(pool);
    this.follower = new LogFollower(pool, clientConfig, this.log, {
      pollMs: opts.pollMs ?? DEFAULT_POLL_MS,
      listen: opts.listen !== false,
      onError: opts.onFollowError ?? warn('following the event log'),
    });
  }

  /** @internal: openPostgresEventStore starts it once the store is built. */
  startFollowing(): Promise<void> {
    return this.follower.start();
  }

  append(streamId: string, events: NewEvent[], options: AppendOptions): Promise<AppendResult> {
    return this.writes.append(streamId, events, options);
  }

  stageForNextBatch(take: () => void, opts: { withinMs?: number } = {}): void {
    this.writes.stageForNextBatch(take, opts);
  }

  readStream(streamId: string, fromVersion = 0, limit?: number): Promise<RecordedEvent[]> {
    return this.reader.readStream(streamId, fromVersion, limit);
  }

  readAll(afterPosition = 0, limit = Number.POSITIVE_INFINITY): AsyncGenerator<RecordedEvent> {
    return this.reader.readAll(afterPosition, limit);
  }

  subscribe(afterPosition = 0): Observable<RecordedEvent> {
    return this.reader.subscribe(afterPosition);
  }

  /**
   * `listener` runs synchronously with each run of newly heard events, in position order: right
   * after this instance's own commit (before its appenders' promises resolve), and as other
   * instances' commits are followed. Returns an unsubscribe function.
   */
  onCommit(listener: CommitListener): () => void {
    return this.log.onCommit(listener);
  }

  /** Last position heard (own commits at once, other instances' within the follow bound). */
  lastPosition(): number {
    return this.log.position;
  }

  streamVersion(streamId: string): number {
    return this.log.versionOf(streamId);
  }

  /** Reads and delivers what other instances committed, now (instead of at the next notification or poll). */
  catchUp(): Promise<void> {
    return this.follower.catchUp();
  }

  stats(): StoreStats {
    return this.writes.stats();
  }

  saveCheckpoint(name: string, position: number, state: unknown, options: { soon?: boolean } = {}): Promise<void> {
    return this.checkpoints.save(name, position, state, options.soon === true);
  }

  loadCheckpoint<S = unknown>(name: string): Promise<Checkpoint<S> | undefined> {
    return this.checkpoints.load<S>(name);
  }

  /** Commits what is pending (staged work included), stops following, closes the connections. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.writes.close();
      this.closedFlag = true;
      await this.follower.stop();
      this.log.close();
      await this.pool.end();
    })();
    return this.closing;
  }
}
