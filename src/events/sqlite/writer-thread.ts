/**
 * The writer thread's body (started by writer.ts; see there for why a thread). Its own
 * better-sqlite3 connection (WAL, synchronous=FULL) writes each batch: checks the log's tail is
 * the one the main thread sealed after, chains the hashes, inserts, upserts stream heads and the
 * checkpoint, commits (the fsync), and answers through the port, raising the shared flag so the
 * main thread can also wait synchronously.
 */
import { readlinkSync } from 'node:fs';
import { workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { eventHash } from '../hash.js';
import { EVENT_COLUMNS } from '../rows.js';
import type { WriteBatch, WriteReply, WriterData } from './writer.js';

const { file, port, flag, busyTimeoutMs } = workerData as WriterData;

// This thread's Linux id (flag[1]), so a reader of /proc/<pid>/task can tell the log's writer from V8's threads.
try {
  const m = /task\/(\d+)$/.exec(readlinkSync('/proc/thread-self'));
  if (m) Atomics.store(flag, 1, Number(m[1]));
} catch {
  // not Linux: no thread id to report
}

const db = new Database(file, { timeout: busyTimeoutMs });
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
const begin = db.prepare('BEGIN IMMEDIATE');
const commit = db.prepare('COMMIT');
const rollback = db.prepare('ROLLBACK');
const tail = db.prepare('SELECT position, hash FROM events ORDER BY position DESC LIMIT 1').raw();
const insert = db.prepare(`INSERT INTO events (${EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
const upsert = db.prepare('INSERT INTO streams (stream_id, version) VALUES (?, ?) ON CONFLICT (stream_id) DO UPDATE SET version = excluded.version');
const saveCheckpoint = db.prepare(
  'INSERT INTO checkpoints (name, position, state, hash) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET position = excluded.position, state = excluded.state, hash = excluded.hash',
);

function answer(reply: WriteReply | { closed: true }): void {
  port.postMessage(reply);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
}

function write(m: WriteBatch): WriteReply {
  begin.run();
  const t = tail.get() as [number, string] | undefined;
  if ((t?.[0] ?? 0) !== m.lastPos || (t?.[1] ?? '') !== m.lastHash) {
    rollback.run();
    return { id: m.id, ok: false, reason: 'foreign' };
  }
  const hashes = new Array<string>(m.rows.length);
  let prev = m.lastHash;
  for (let i = 0; i < m.rows.length; i++) {
    const r = m.rows[i]!;
    // The same eventHash as the main thread's in-thread path (group-commit.ts, prepare.ts seal).
    const h = eventHash(prev, { position: r[0] as number, streamId: r[1] as string, streamVersion: r[2] as number, type: r[3] as string, schemaVersion: r[4] as number, dataJson: r[5] as string, metadataJson: r[6] as string, time: r[7] as string });
    r.push(prev, h);
    insert.run(r);
    hashes[i] = h;
    prev = h;
  }
  for (const [streamId, version] of m.heads) upsert.run(streamId, version);
  if (m.checkpoint) saveCheckpoint.run(m.checkpoint);
  commit.run();
  return { id: m.id, ok: true, hashes };
}

port.on('message', (m: WriteBatch | { close: true }) => {
  if ('close' in m) {
    db.close();
    answer({ closed: true });
    port.close();
    return;
  }
  try {
    answer(write(m));
  } catch (e) {
    try {
      if (db.inTransaction) rollback.run();
    } catch {
      // the connection is gone; the reply below says why
    }
    answer({ id: m.id, ok: false, reason: 'error', message: String((e as Error | undefined)?.message ?? e) });
  }
});
