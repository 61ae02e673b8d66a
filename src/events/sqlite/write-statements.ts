/** The statements the SQLite log's write path runs, prepared once per connection. */
import type Database from 'better-sqlite3';
import { EVENT_COLUMNS } from '../rows.js';

export interface WriteStatements {
  begin: Database.Statement;
  commit: Database.Statement;
  rollback: Database.Statement;
  tail: Database.Statement;
  streamHead: Database.Statement;
  upsertStream: Database.Statement;
  insert: Database.Statement;
  saveCheckpoint: Database.Statement;
}

export function prepareWriteStatements(db: Database.Database): WriteStatements {
  return {
    begin: db.prepare('BEGIN IMMEDIATE'),
    commit: db.prepare('COMMIT'),
    rollback: db.prepare('ROLLBACK'),
    tail: db.prepare('SELECT position, hash FROM events ORDER BY position DESC LIMIT 1').raw(),
    streamHead: db.prepare('SELECT version FROM streams WHERE stream_id = ?').pluck(),
    upsertStream: db.prepare(
      'INSERT INTO streams (stream_id, version) VALUES (?, ?) ON CONFLICT (stream_id) DO UPDATE SET version = excluded.version',
    ),
    insert: db.prepare(`INSERT INTO events (${EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    saveCheckpoint: db.prepare(
      'INSERT INTO checkpoints (name, position, state, hash) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET position = excluded.position, state = excluded.state, hash = excluded.hash',
    ),
  };
}

/** The log's last position and hash as stored (0 and '' when empty). */
export function readTail(stmt: WriteStatements): { pos: number; hash: string } {
  const tail = stmt.tail.get() as [number, string] | undefined;
  return { pos: tail?.[0] ?? 0, hash: tail?.[1] ?? '' };
}
