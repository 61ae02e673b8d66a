/**
 * readAllForFold with SQLite on another thread: a worker with its own read-only, memory-mapped
 * connection steps through the log in pages and hands each page over as transferred (not copied)
 * buffers: the page's `data` texts as one JSON array text, then each row's metadata and time, in
 * one byte buffer with their offsets, and the numbers in a Float64Array. The folding thread parses
 * the data array once (the stored data is JSON), makes StoredRecords and folds, while the worker is
 * already reading the next pages.
 *
 * Why: building rows in better-sqlite3 is ~1.6–1.9 µs/event of the ~5 µs a rebuild spends per
 * event on one thread (bench/rebuild-bench.ts). Parsed objects are not passed across: structured
 * clone of an object costs about what JSON.parse of its text costs. Strings are not passed either:
 * cloning costs ~0.15 µs per string on each side, while a transferred buffer costs nothing to
 * hand over and ~0.09 µs per string to slice. Stream ids and types repeat, so they cross once, in
 * a dictionary, and rows carry their index.
 *
 * The folding thread waits for pages synchronously (Atomics.wait + receiveMessageOnPort), so this
 * stays a plain synchronous iterator. The worker (fold-reader-worker.ts, compiled: worker-file.ts)
 * keeps at most AHEAD pages unconsumed.
 */
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import { StoredRecord, type HashLoader } from './fold-read.js';
import { workerFile } from './worker-file.js';

const AHEAD = 4;
/** A page takes milliseconds to read; this long without one means the worker is gone. */
const SILENT_WORKER_SECONDS = 120;

/**
 * One page of `count` rows. `bytes`: UTF-8 of the data JSON array, then per row metadata, time;
 * `ends`: end offset of the data array, then of each row's metadata and time; `nums` per row:
 * position, stream (dict index), streamVersion, type (dict index), schemaVersion; `dict` the new
 * dictionary entries, in index order.
 */
export interface PageMessage {
  count: number;
  bytes: ArrayBuffer;
  ends: Int32Array;
  nums: Float64Array;
  dict: string[];
  done: boolean;
  error?: string;
}


/** What the reader thread starts with. `flag`: [0] pages posted, [1] pages consumed, [2] stop. */
export interface FoldReaderData {
  file: string;
  port: MessagePort;
  flag: Int32Array;
  after: number;
  pageSize: number;
  ahead: number;
  mmapBytes: number;
}

/** An internalized copy of a string (property-key lookups of catalog types then hit V8's fast path). */
const internalize = (s: string): string => Object.keys({ [s]: 0 })[0]!;

/**
 * Events after `afterPosition` of the log in `file`, read by a worker thread; see the module
 * comment. Stopping the iteration early stops the worker.
 */
export function* readAllOnThread(file: string, afterPosition: number, pageSize: number, mmapBytes: number, hashes: HashLoader): Generator<StoredRecord> {
  const { port1, port2 } = new MessageChannel();
  // [0] pages posted, [1] pages consumed, [2] stop
  const flag = new Int32Array(new SharedArrayBuffer(12));
  const workerData: FoldReaderData = { file, port: port2, flag, after: afterPosition, pageSize, ahead: AHEAD, mmapBytes };
  const worker = new Worker(workerFile('fold-reader-worker', import.meta.url), { workerData, transferList: [port2] });
  worker.unref();
  const dict: string[] = [];
  let consumed = 0;
  try {
    for (;;) {
      // The worker answers every page, errors included (its whole body is in a try). Its 'exit'
      // event cannot be heard while this thread waits, so a worker gone silent ends in a timeout.
      let received = receiveMessageOnPort(port1);
      const deadline = Date.now() + SILENT_WORKER_SECONDS * 1000;
      while (!received) {
        if (Date.now() > deadline) throw new Error(`fold reader thread: no page for ${SILENT_WORKER_SECONDS} s`);
        Atomics.wait(flag, 0, consumed, 1000);
        received = receiveMessageOnPort(port1);
      }
      const page = received.message as PageMessage;
      consumed++;
      Atomics.store(flag, 1, consumed);
      Atomics.notify(flag, 1);
      if (page.error !== undefined) throw new Error(`fold reader thread: ${page.error}`);
      for (const s of page.dict) dict.push(internalize(s));
      const bytes = Buffer.from(page.bytes);
      const { ends, nums } = page;
      const data = JSON.parse(bytes.toString('utf8', 0, ends[0])) as unknown[];
      for (let i = 0; i < page.count; i++) {
        const m = i * 5;
        yield new StoredRecord(
          nums[m]!,
          dict[nums[m + 1]!]!,
          nums[m + 2]!,
          dict[nums[m + 3]!]!,
          nums[m + 4]!,
          data[i],
          bytes.toString('utf8', ends[2 * i]!, ends[2 * i + 1]!),
          bytes.toString('utf8', ends[2 * i + 1]!, ends[2 * i + 2]!),
          hashes,
        );
      }
      if (page.done) return;
    }
  } finally {
    Atomics.store(flag, 2, 1);
    Atomics.notify(flag, 1);
    port1.close();
    void worker.terminate();
  }
}
