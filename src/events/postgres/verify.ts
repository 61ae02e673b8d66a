/**
 * `shardgate verify`'s check of a PostgreSQL log, the same rules as ../verify.ts for SQLite:
 * positions gapless from 1; stream versions gapless from 0 per stream; each prev_hash equals the
 * previous hash; each hash recomputes (over the stored text, with the same eventHash); the streams
 * table and the log head agree with the events. Reads in pages inside one REPEATABLE READ
 * transaction, so a log that instances keep appending to is checked as of one moment; the extra
 * checks (`shardgate verify`'s projections and devshard checks, src/cli/commands/verify-postgres.ts)
 * run in the same transaction, so they see the log as verified.
 */
import pg from 'pg';
import { eventHash } from '../hash.js';
import type { EventRow } from '../rows.js';
import { describeEvent, type VerifyFailure, type VerifyOk, type VerifyResult } from '../verify.js';
import { connectionConfig, type PostgresConnection } from './connection.js';
import { missingPgGuards } from './schema.js';

const PAGE = 5_000;
const RAW_PAGE_SQL = 'SELECT position, stream_id, stream_version, type, schema_version, data, metadata, time, prev_hash, hash FROM events WHERE position > $1 ORDER BY position LIMIT $2';

/** What extra checks get: the connection (inside the verifying transaction) and the log's verified summary. */
export interface PgVerifyContext {
  db: Pick<pg.Client, 'query'>;
  summary: Omit<VerifyOk, 'ok' | 'warnings'>;
}

/** An extra check run after the log itself verified (as ../verify.ts's VerifyCheck): a failure fails verification. */
export type PgVerifyCheck = (ctx: PgVerifyContext) => Omit<VerifyFailure, 'ok'> | undefined | void | Promise<Omit<VerifyFailure, 'ok'> | undefined | void>;

export async function verifyPostgresLog(connection: PostgresConnection, checks: readonly PgVerifyCheck[] = []): Promise<VerifyResult> {
  const client = new pg.Client(connectionConfig(connection));
  await client.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const tables = new Set((await client.query<{ t: string }>(`SELECT tablename AS t FROM pg_tables WHERE schemaname = current_schema()`)).rows.map((r) => r.t));
    if (!tables.has('events')) return { ok: false, position: 0, reason: 'not an event log (no events table)' };
    const nextVersion = new Map<string, number>();
    let expectedPos = 1;
    let prevHash = '';
    for (;;) {
      const rows = (await client.query<EventRow>({ text: RAW_PAGE_SQL, values: [expectedPos - 1, PAGE], rowMode: 'array' })).rows;
      for (const [position, streamId, streamVersion, type, schemaVersion, data, metadata, time, storedPrev, hash] of rows) {
        const fail = (reason: string): VerifyFailure => ({ ok: false, position, reason });
        if (position !== expectedPos) return fail(`gap: position ${expectedPos} is missing`);
        const wantVersion = nextVersion.get(streamId) ?? 0;
        if (streamVersion !== wantVersion) return fail(`stream ${JSON.stringify(streamId)}: version ${streamVersion}, expected ${wantVersion}`);
        if (storedPrev !== prevHash) return fail('prev_hash does not match the previous event hash');
        if (eventHash(prevHash, { position, streamId, streamVersion, type, schemaVersion, dataJson: data, metadataJson: metadata, time }) !== hash) {
          return fail(`hash mismatch: the event was altered after it was written (${describeEvent(type, streamId, data)})`);
        }
        nextVersion.set(streamId, streamVersion + 1);
        prevHash = hash;
        expectedPos++;
      }
      if (rows.length < PAGE) break;
    }
    const last = expectedPos - 1;
    const head = (await client.query<{ position: number; hash: string }>('SELECT position, hash FROM log_head WHERE id = 1')).rows[0];
    if (!head || head.position !== last || head.hash !== prevHash) {
      return { ok: false, position: 0, reason: `the log head (${head?.position ?? 'missing'}) does not match the last event (${last})` };
    }
    const heads = (await client.query<[string, number]>({ text: 'SELECT stream_id, version FROM streams', rowMode: 'array' })).rows;
    const seen = new Set<string>();
    for (const [streamId, version] of heads) {
      seen.add(streamId);
      const logVersion = (nextVersion.get(streamId) ?? 0) - 1;
      if (version !== logVersion) return { ok: false, position: 0, reason: `streams table says ${JSON.stringify(streamId)} is at ${version}, the log at ${logVersion}` };
    }
    for (const streamId of nextVersion.keys()) {
      if (!seen.has(streamId)) return { ok: false, position: 0, reason: `stream ${JSON.stringify(streamId)} missing from the streams table` };
    }
    const summary = { events: last, lastPosition: last, lastHash: prevHash };
    for (const check of checks) {
      const failure = await check({ db: client, summary });
      if (failure) return { ok: false, ...failure };
    }
    const missing = await missingPgGuards(client);
    await client.query('COMMIT');
    return { ok: true, ...summary, warnings: missing.length > 0 ? [`guard triggers missing or disabled: ${missing.join(', ')}`] : [] };
  } finally {
    await client.end().catch(() => undefined);
  }
}
