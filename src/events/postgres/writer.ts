/**
 * The PostgreSQL log's write path: appends queue for the next group commit (one transaction for
 * everything queued), and each transaction seals its batch after the log's tail under a lock.
 *
 * **The tail lock.** A commit's transaction first locks the single `log_head` row
 * (`SELECT … FOR UPDATE`, in the same round trip as BEGIN). Holding it, it reads the tail
 * (position, hash), decides versions (from memory, or, when another instance wrote since this one
 * last heard, from the `streams` rows of the batch's streams), positions (tail + 1, + 2, …) and the
 * hash chain, then in one statement inserts the rows, moves the stream heads and `log_head` and
 * sends NOTIFY, and commits. The lock is released only after the commit is visible. So however
 * many instances write to one database:
 *
 * - **No fork:** each batch is chained after the hash the previous commit left in `log_head`, read
 *   under the lock; two transactions never chain after the same event (and the positions' primary
 *   key would refuse it anyway).
 * - **Gapless positions, committed in order (no sequence gap):** positions are taken from the tail
 *   under the lock, not from a sequence, and a transaction that would take position p+1 cannot
 *   read the tail until the one that wrote p has committed and become visible. So any snapshot that
 *   sees position p sees every position below it: a reader that has read up to p and asks for
 *   "position > p" can never later find a lower position committed behind its back. That is the
 *   sequence-gap problem (with a SERIAL/IDENTITY column a transaction can take 7, another 8, and 8
 *   commit first; a reader that saw 8 skips 7 forever), closed at its source. Its price: commits of
 *   one database are serial, which the group commit amortizes (one transaction per batch).
 * - **Expected versions hold across instances:** a stream's head is decided under the lock, from the
 *   database whenever the tail moved past what this instance heard, so an instance that has not
 *   yet heard of another's append still gets WrongExpectedVersionError (with the actual version).
 *   After COMMIT it reads the events it had not heard (below its own) and delivers them first, so
 *   its listeners hear the shared log in position order.
 *
 * Idempotent retries, as with SQLite: an append carries its expected version, so a retry of one
 * that committed (say the answer was lost with the connection) is refused with
 * WrongExpectedVersionError instead of written twice. A failure during COMMIT is therefore never
 * retried here: the callers get the error and retry with their expected versions.
 */
import type pg from 'pg';
import type { NewEvent, RecordedEvent } from '../envelope.js';
import { EventStoreClosedError, LeaseLostError } from '../errors.js';
import { GroupSchedule } from '../group-schedule.js';
import type { EventRow } from '../rows.js';
import type { AppendOptions, AppendResult, StoreStats } from '../store.js';
import { sealBatch, type SealedBatch } from '../sqlite/batch.js';
import { checkExpected, prepareEvents, type PendingAppend } from '../sqlite/prepare.js';
import type { CommittedLog } from './committed-log.js';
import { LOG_CHANNEL } from './follower.js';
import { FENCES_SQL } from './leases.js';
import { PG_PAGE_SIZE, readRange } from './reader.js';

export interface PgGroupCommitOptions {
  maxBatchEvents: number;
  now: () => Date;
}

const TAIL_SQL = 'SELECT position, hash FROM log_head WHERE id = 1 FOR UPDATE';
const HEADS_SQL = 'SELECT stream_id, version FROM streams WHERE stream_id = ANY($1::text[])';

/** One statement writes the batch: events, stream heads, the log head, and the notification. */
const WRITE_SQL = `
  WITH appended AS (
    INSERT INTO events (position, stream_id, stream_version, type, schema_version, data, metadata, time, prev_hash, hash)
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::int[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[])
  ), heads AS (
    INSERT INTO streams (stream_id, version) SELECT * FROM unnest($11::text[], $12::int[])
    ON CONFLICT (stream_id) DO UPDATE SET version = excluded.version
  ), tail AS (
    UPDATE log_head SET position = $13, hash = $14 WHERE id = 1
  )
  SELECT pg_notify('${LOG_CHANNEL}', $15::text)`;

/** An error of the database that aborted the transaction before COMMIT was sent (not ambiguous). */
class BeforeCommitError extends Error {
  constructor(readonly reason: unknown) {
    super((reason as Error)?.message ?? String(reason));
  }
}

export class PgGroupCommit {
  private readonly schedule: GroupSchedule<PendingAppend>;
  private inFlight: Promise<void> | undefined;
  private closedFlag = false;
  private readonly counters: StoreStats = { commits: 0, appends: 0, events: 0, conflicts: 0 };

  constructor(
    private readonly pool: pg.Pool,
    private readonly log: CommittedLog,
    private readonly opts: PgGroupCommitOptions,
  ) {
    this.schedule = new GroupSchedule({
      maxBatchEvents: opts.maxBatchEvents,
      held: () => this.closedFlag || this.inFlight !== undefined,
      flush: () => {
        if (this.schedule.queue.length > 0) this.startBatch();
      },
    });
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  stats(): StoreStats {
    return { ...this.counters };
  }

  append(streamId: string, events: NewEvent[], options: AppendOptions): Promise<AppendResult> {
    if (this.closedFlag) return Promise.reject(new EventStoreClosedError());
    let pending!: PendingAppend;
    const promise = new Promise<AppendResult>((resolve, reject) => {
      pending = { streamId, expected: options.expectedVersion, events: [], fence: options.fence, resolve, reject };
    });
    try {
      checkExpected(options.expectedVersion);
      pending.events = prepareEvents(streamId, events);
    } catch (error) {
      return Promise.reject(error);
    }
    this.schedule.add(pending, options.withinMs);
    return promise;
  }

  stageForNextBatch(take: () => void, opts: { withinMs?: number } = {}): void {
    if (this.closedFlag) throw new EventStoreClosedError();
    this.schedule.stage(take, opts.withinMs);
  }

  /** Commits everything queued and staged (and whatever that appends), then refuses appends. */
  async close(): Promise<void> {
    for (;;) {
      if (this.inFlight) {
        await this.inFlight;
        continue;
      }
      this.schedule.takeStaged();
      if (this.schedule.queue.length === 0) break;
      this.startBatch();
    }
    this.closedFlag = true;
    this.schedule.cancel();
  }

  private startBatch(): void {
    const batch = this.schedule.takeBatch();
    this.inFlight = this.commitBatch(batch).finally(() => {
      this.inFlight = undefined;
      this.schedule.next();
    });
  }

  /** One transaction for the batch; never rejects (each caller hears its own outcome). */
  private async commitBatch(batch: PendingAppend[]): Promise<void> {
    let outcome: { foreign: RecordedEvent[]; sealed: SealedBatch };
    try {
      outcome = await this.transaction(batch);
    } catch (error) {
      if (error instanceof BeforeCommitError && batch.length > 1) {
        // A row the database refused aborts the whole transaction: commit each append alone, so
        // only the one at fault fails (nothing was written, so nothing can be written twice).
        for (const item of batch) await this.commitBatch([item]);
        return;
      }
      const cause = error instanceof BeforeCommitError ? error.reason : error;
      for (const item of batch) item.reject(cause);
      return;
    }
    const { foreign, sealed } = outcome;
    this.counters.commits++;
    this.counters.events += sealed.committed.length;
    // Foreign commits this instance had not heard yet come first: the log is told in position order.
    try {
      this.log.deliver(foreign.length > 0 ? [...foreign, ...sealed.committed] : sealed.committed);
    } catch (error) {
      // Committed all the same, so the callers hear so; the follower delivers from the table.
      process.emitWarning(`event log delivery: ${(error as Error).message}`, 'EventStoreWarning');
    }
    for (let i = 0; i < batch.length; i++) {
      const result = sealed.outcomes[i]!;
      if (result instanceof Error) {
        this.counters.conflicts++;
        batch[i]!.reject(result);
      } else {
        this.counters.appends++;
        batch[i]!.resolve(result);
      }
    }
  }

  /**
   * The batch's transaction under the tail lock; after COMMIT (the lock released), the events
   * other instances committed before it that this one has not heard yet, so they are delivered
   * first. Under the lock, only the heads of the batch's own streams are read when another
   * instance wrote since (a small indexed query), to keep the lock short.
   */
  private async transaction(batch: PendingAppend[]): Promise<{ foreign: RecordedEvent[]; sealed: SealedBatch }> {
    const client = await this.pool.connect();
    let broken: unknown;
    try {
      let sealed: SealedBatch;
      let tailBefore: number;
      try {
        // One round trip: BEGIN and the lock (simple protocol, two statements).
        const [, tail] = (await client.query(`BEGIN; ${TAIL_SQL}`)) as unknown as [pg.QueryResult, pg.QueryResult<{ position: number; hash: string }>];
        const { position: pos, hash } = tail.rows[0]!;
        tailBefore = pos;
        const heard = this.log.position;
        if (pos < heard) throw new Error(`the log's head (${pos}) is behind what this instance heard (${heard}): the log was replaced`);
        let versionOf = (s: string) => this.log.versionOf(s);
        if (pos > heard) {
          // Another instance wrote since this one last heard: the database knows the heads.
          const streams = [...new Set(batch.map((a) => a.streamId))];
          const r = await client.query<[string, number]>({ text: HEADS_SQL, values: [streams], rowMode: 'array' });
          const heads = new Map(r.rows);
          versionOf = (s) => heads.get(s) ?? -1;
        }
        const refuse = await fencing(client, batch);
        const rows: EventRow[] = [];
        sealed = sealBatch(batch, { pos, hash, time: this.opts.now().toISOString(), versionOf, refuse }, (row) => rows.push(row));
        if (rows.length > 0) await client.query(WRITE_SQL, writeParams(rows, sealed));
      } catch (error) {
        await client.query('ROLLBACK').catch((e: unknown) => (broken = e));
        throw new BeforeCommitError(error);
      }
      try {
        await client.query('COMMIT');
      } catch (error) {
        broken = error; // outcome unknown: callers retry with their expected versions
        throw error;
      }
      const foreign: RecordedEvent[] = [];
      const heard = this.log.position; // the follower may have delivered some meanwhile
      if (tailBefore > heard) {
        try {
          // In pages: an instance that fell far behind reads its backlog here.
          for (let after = heard; after < tailBefore; after = foreign[foreign.length - 1]!.position) {
            const page = await readRange(client, after, Math.min(tailBefore, after + PG_PAGE_SIZE));
            if (page.length === 0) throw new Error(`positions ${after + 1}..${tailBefore} are missing`);
            foreign.push(...page);
          }
        } catch (error) {
          // Committed; only the delivery order is at stake: leave all of it to the follower.
          broken = error;
          process.emitWarning(`event log: reading positions ${heard + 1}..${tailBefore} after a commit failed (${(error as Error).message}); the follower delivers them`, 'EventStoreWarning');
          return { foreign: [], sealed: { ...sealed, committed: [] } };
        }
      }
      return { foreign, sealed };
    } finally {
      client.release(broken instanceof Error ? broken : undefined);
    }
  }
}

/**
 * The fencing check, under the tail lock (leases.ts says why that order makes it exact): an append
 * written under a lease whose token is no longer the one in force is refused, nothing of it written.
 */
async function fencing(client: pg.PoolClient, batch: PendingAppend[]): Promise<((a: PendingAppend) => Error | undefined) | undefined> {
  const names = [...new Set(batch.flatMap((a) => (a.fence ? [a.fence.lease] : [])))];
  if (names.length === 0) return undefined;
  const r = await client.query<{ name: string; owner: string | null; token: number }>(FENCES_SQL, [names]);
  const inForce = new Map(r.rows.map((x) => [x.name, x]));
  return (a) => {
    if (!a.fence) return undefined;
    const now = inForce.get(a.fence.lease);
    if (now && now.token === a.fence.token && now.owner !== null) return undefined;
    return new LeaseLostError(a.fence.lease, a.fence.token, now ? { token: now.token, owner: now.owner ?? undefined } : undefined);
  };
}

function writeParams(rows: EventRow[], sealed: SealedBatch): unknown[] {
  const cols: unknown[][] = Array.from({ length: 10 }, () => []);
  for (const row of rows) for (let c = 0; c < 10; c++) cols[c]!.push(row[c]);
  const heads = [...sealed.heads];
  return [...cols, heads.map((h) => h[0]), heads.map((h) => h[1]), sealed.pos, sealed.hash, String(sealed.pos)];
}
