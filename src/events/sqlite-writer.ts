/**
 * The group commit's disk write, off the event loop: a worker thread with its own better-sqlite3
 * connection (WAL, synchronous=FULL) runs each batch's INSERTs and COMMIT — the fsync — while the
 * main thread keeps serving requests and queueing the next batch. The main thread stays the only
 * writer's brain: it assigns positions, hashes and versions and decides conflicts; the worker only
 * writes the prepared rows, after checking the log's tail is what the main thread expected.
 *
 * The worker is started from source text (eval), so it runs the same from TypeScript sources
 * (vitest) and from dist. Replies go through a MessageChannel port and a shared flag, so the main
 * thread can also wait for one synchronously (appendNow, close).
 */
import { createRequire } from 'node:module';
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import { recordCanonicalJson } from './hash.js';
import { EVENT_COLUMNS } from './rows.js';

/**
 * One batch: rows in EVENT_COLUMNS order without the last two (prev_hash, hash), stream heads to
 * upsert, and the tail they follow. The writer chains the hashes from `lastHash` (the same
 * eventHash as the main thread's in-thread path: recordCanonicalJson is shipped as its own source)
 * and answers them, so the main thread does not spend a digest per event.
 */
export interface WriteBatch {
  id: number;
  lastPos: number;
  lastHash: string;
  rows: unknown[][];
  heads: [string, number][];
  /** A checkpoint row (name, position, state text, hash at position) written in the same transaction. */
  checkpoint?: [string, number, string, string];
}

export type WriteReply = { id: number; ok: true; hashes: string[] } | { id: number; ok: false; reason: 'foreign' | 'error'; message?: string };

const WORKER_SOURCE = `
const { workerData } = require('node:worker_threads');
const { hash } = require('node:crypto');
const recordCanonicalJson = ${recordCanonicalJson.toString()};
const Database = require(workerData.sqlite);
const { file, port, flag, busyTimeoutMs, columns } = workerData;
// This thread's Linux id (flag[1]), so a reader of /proc/<pid>/task can tell the log's writer from V8's threads.
try {
  const m = /task\\/(\\d+)$/.exec(require('node:fs').readlinkSync('/proc/thread-self'));
  if (m) Atomics.store(flag, 1, Number(m[1]));
} catch {}
const db = new Database(file, { timeout: busyTimeoutMs });
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
const begin = db.prepare('BEGIN IMMEDIATE');
const commit = db.prepare('COMMIT');
const rollback = db.prepare('ROLLBACK');
const tail = db.prepare('SELECT position, hash FROM events ORDER BY position DESC LIMIT 1').raw();
const insert = db.prepare('INSERT INTO events (' + columns + ') VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)');
const upsert = db.prepare('INSERT INTO streams (stream_id, version) VALUES (?, ?) ON CONFLICT (stream_id) DO UPDATE SET version = excluded.version');
const saveCheckpoint = db.prepare('INSERT INTO checkpoints (name, position, state, hash) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET position = excluded.position, state = excluded.state, hash = excluded.hash');
const answer = (reply) => {
  port.postMessage(reply);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
};
port.on('message', (m) => {
  if (m.close) {
    db.close();
    answer({ closed: true });
    port.close();
    return;
  }
  try {
    begin.run();
    const t = tail.get();
    if (((t && t[0]) || 0) !== m.lastPos || ((t && t[1]) || '') !== m.lastHash) {
      rollback.run();
      answer({ id: m.id, ok: false, reason: 'foreign' });
      return;
    }
    const hashes = new Array(m.rows.length);
    let prev = m.lastHash;
    for (let i = 0; i < m.rows.length; i++) {
      const r = m.rows[i];
      const h = hash('sha256', prev + recordCanonicalJson({ position: r[0], streamId: r[1], streamVersion: r[2], type: r[3], schemaVersion: r[4], dataJson: r[5], metadataJson: r[6], time: r[7] }), 'hex');
      r.push(prev, h);
      insert.run(r);
      hashes[i] = h;
      prev = h;
    }
    for (const h of m.heads) upsert.run(h[0], h[1]);
    if (m.checkpoint) saveCheckpoint.run(m.checkpoint);
    commit.run();
    answer({ id: m.id, ok: true, hashes });
  } catch (e) {
    try {
      if (db.inTransaction) rollback.run();
    } catch {}
    answer({ id: m.id, ok: false, reason: 'error', message: String((e && e.message) || e) });
  }
});
`;

export class SqliteWriter {
  private readonly worker: Worker;
  private readonly port: MessagePort;
  /** [0]: a reply is waiting; [1]: the thread's Linux id, once it has started (0 elsewhere). */
  private readonly flag = new Int32Array(new SharedArrayBuffer(8));
  private busy = false;

  constructor(
    file: string,
    busyTimeoutMs: number,
    private readonly onReply: (reply: WriteReply) => void,
  ) {
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    const sqlite = createRequire(import.meta.url).resolve('better-sqlite3');
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { file, port: port2, flag: this.flag, busyTimeoutMs, sqlite, columns: EVENT_COLUMNS },
      transferList: [port2],
    });
    this.worker.unref();
    this.port.on('message', (reply: WriteReply) => this.settle(reply));
    this.port.unref();
  }

  /** The writer thread's Linux thread id (/proc/<pid>/task/<id>), once started; undefined off Linux. */
  get threadId(): number | undefined {
    const id = Atomics.load(this.flag, 1);
    return id > 0 ? id : undefined;
  }

  /** Whether a batch is being written. */
  get writing(): boolean {
    return this.busy;
  }

  write(batch: WriteBatch): void {
    if (this.busy) throw new Error('SqliteWriter: one batch at a time');
    this.busy = true;
    Atomics.store(this.flag, 0, 0);
    this.port.ref(); // a commit under way keeps the process alive
    this.port.postMessage(batch);
  }

  /** Blocks until the batch under way (if any) is written and its reply handled. */
  waitSync(): void {
    while (this.busy) {
      const r = Atomics.wait(this.flag, 0, 0, 60_000);
      const m = receiveMessageOnPort(this.port);
      if (m) this.settle(m.message as WriteReply);
      else if (r === 'timed-out') throw new Error('event store writer thread did not answer in 60 s');
    }
  }

  /** Closes the worker's connection (waits for the batch under way first), then ends the thread. */
  close(): void {
    this.waitSync();
    Atomics.store(this.flag, 0, 0);
    this.port.postMessage({ close: true });
    Atomics.wait(this.flag, 0, 0, 10_000);
    receiveMessageOnPort(this.port);
    this.port.close();
    void this.worker.terminate();
  }

  private settle(reply: WriteReply | { closed: true }): void {
    if ('closed' in reply) return;
    this.busy = false;
    this.port.unref();
    this.onReply(reply);
  }
}
