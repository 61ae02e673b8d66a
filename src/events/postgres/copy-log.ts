/**
 * `shardgate migrate`: a SQLite event log copied into an empty PostgreSQL one as stored — the same
 * positions, stream versions, texts, times and hashes — so the hash chain, the audit and `verify`
 * hold across the move, and the gateway continues every escrow from it. Every row's hash is
 * recomputed on the way (a log altered before the move is refused, naming the position); the copy
 * is one transaction under the log's tail lock: all of it lands, or none.
 */
import Database from 'better-sqlite3';
import { EVENT_COLUMNS, type EventRow } from '../rows.js';
import { eventHash } from '../hash.js';
import { openPool, type PostgresConnection } from './connection.js';
import { LOG_CHANNEL } from './follower.js';
import { migratePostgres } from './schema.js';

const PAGE = 2_000;

export class MigrationRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MigrationRefusedError';
  }
}

const INSERT_SQL = `INSERT INTO events (position, stream_id, stream_version, type, schema_version, data, metadata, time, prev_hash, hash)
  SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::int[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[])`;

export interface CopyResult {
  copied: number;
  /** The tail copied: its position and hash (what both logs now end with). */
  position: number;
  hash: string;
}

/** Copies the SQLite log at `file` into the (empty) PostgreSQL log at `connection`. */
export async function copySqliteLogToPostgres(file: string, connection: PostgresConnection, onPage?: (copied: number, total: number) => void): Promise<CopyResult> {
  const source = new Database(file, { readonly: true, fileMustExist: true });
  const pool = openPool(connection, 1);
  try {
    await migratePostgres(pool);
    const total = (source.prepare('SELECT COUNT(*) FROM events').pluck().get() as number) ?? 0;
    const page = source.prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT ?`).raw();
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const tail = (await client.query<{ position: number }>('SELECT position FROM log_head WHERE id = 1 FOR UPDATE')).rows[0]?.position ?? 0;
      if (tail !== 0) throw new MigrationRefusedError(`the target log is not empty (it ends at position ${tail}); migrate into a new database`);
      const heads = new Map<string, number>();
      let position = 0;
      let hash = '';
      for (;;) {
        const rows = page.all(position, PAGE) as EventRow[];
        if (rows.length === 0) break;
        for (const r of rows) {
          const [pos, streamId, streamVersion, type, schemaVersion, dataJson, metadataJson, time, prevHash, rowHash] = r;
          if (pos !== position + 1) throw new MigrationRefusedError(`the source log has a gap: position ${position + 1} is missing`);
          if (prevHash !== hash || eventHash(prevHash, { position: pos, streamId, streamVersion, type, schemaVersion, dataJson, metadataJson, time }) !== rowHash) {
            throw new MigrationRefusedError(`the source log fails verification at position ${pos}: run \`shardgate verify\` on it`);
          }
          if (streamVersion !== (heads.get(streamId) ?? -1) + 1) throw new MigrationRefusedError(`the source log's stream ${streamId} skips a version at position ${pos}`);
          heads.set(streamId, streamVersion);
          position = pos;
          hash = rowHash;
        }
        const cols: unknown[][] = Array.from({ length: 10 }, () => []);
        for (const r of rows) for (let c = 0; c < 10; c++) cols[c]!.push(r[c]);
        await client.query(INSERT_SQL, cols);
        onPage?.(position, total);
      }
      if (position > 0) {
        await client.query('INSERT INTO streams (stream_id, version) SELECT * FROM unnest($1::text[], $2::int[])', [[...heads.keys()], [...heads.values()]]);
        await client.query('UPDATE log_head SET position = $1, hash = $2 WHERE id = 1', [position, hash]);
      }
      await client.query(`SELECT pg_notify('${LOG_CHANNEL}', $1::text)`, [String(position)]);
      await client.query('COMMIT');
      return { copied: position, position, hash };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  } finally {
    source.close();
    await pool.end();
  }
}
