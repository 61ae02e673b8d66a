/**
 * The group commit's disk write, off the event loop: a worker thread with its own better-sqlite3
 * connection (WAL, synchronous=FULL) runs each batch's INSERTs and COMMIT — the fsync — while the
 * main thread keeps serving requests and queueing the next batch. The main thread stays the only
 * writer's brain: it assigns positions, hashes and versions and decides conflicts; the worker only
 * writes the prepared rows, after checking the log's tail is what the main thread expected.
 *
 * The thread runs writer-thread.ts, compiled (worker-file.ts says which file, from dist or from
 * the sources). Replies go through a MessageChannel port and a shared flag, so the main thread can
 * also wait for one synchronously (appendNow, close).
 */
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import { workerFile } from '../worker-file.js';

/**
 * One batch: rows in EVENT_COLUMNS order without the last two (prev_hash, hash), stream heads to
 * upsert, and the tail they follow. The writer chains the hashes from `lastHash` (the same
 * eventHash as the main thread's in-thread path) and answers them, so the main thread does not
 * spend a digest per event.
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

/** What the writer thread starts with: the log file, its end of the channel, the shared flag. */
export interface WriterData {
  file: string;
  port: MessagePort;
  /** [0]: a reply is waiting; [1]: the thread's Linux id, once it has started (0 elsewhere). */
  flag: Int32Array;
  busyTimeoutMs: number;
}

export type WriteReply = { id: number; ok: true; hashes: string[] } | { id: number; ok: false; reason: 'foreign' | 'error'; message?: string };

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
    const workerData: WriterData = { file, port: port2, flag: this.flag, busyTimeoutMs };
    this.worker = new Worker(workerFile('writer-thread', import.meta.url), { workerData, transferList: [port2] });
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
