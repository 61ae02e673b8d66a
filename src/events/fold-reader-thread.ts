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
 * stays a plain synchronous iterator. The worker keeps at most AHEAD pages unconsumed.
 */
import { createRequire } from 'node:module';
import { MessageChannel, receiveMessageOnPort, Worker } from 'node:worker_threads';
import { FOLD_COLUMNS, StoredRecord, type HashLoader } from './fold-read.js';

const AHEAD = 4;
/** A page takes milliseconds to read; this long without one means the worker is gone. */
const SILENT_WORKER_SECONDS = 120;

/**
 * One page of `count` rows. `bytes`: UTF-8 of the data JSON array, then per row metadata, time;
 * `ends`: end offset of the data array, then of each row's metadata and time; `nums` per row:
 * position, stream (dict index), streamVersion, type (dict index), schemaVersion; `dict` the new
 * dictionary entries, in index order.
 */
interface PageMessage {
  count: number;
  bytes: ArrayBuffer;
  ends: Int32Array;
  nums: Float64Array;
  dict: string[];
  done: boolean;
  error?: string;
}

const WORKER_SOURCE = `
const { workerData } = require('node:worker_threads');
const { file, port, flag, after: start, pageSize, ahead, mmapBytes, columns } = workerData;
let sent = 0;
const post = (m, transfer) => {
  port.postMessage(m, transfer);
  sent++;
  Atomics.store(flag, 0, sent);
  Atomics.notify(flag, 0);
};
try {
  const Database = require(workerData.sqlite);
  const db = new Database(file, { readonly: true, fileMustExist: true });
  db.pragma('mmap_size = ' + mmapBytes);
  const page = db.prepare('SELECT ' + columns + ' FROM events WHERE position > ? ORDER BY position LIMIT ?').raw();
  const dict = new Map();
  let after = start;
  for (;;) {
    if (Atomics.load(flag, 2) === 1) break;
    const rows = page.all(after, pageSize);
    const n = rows.length;
    const nums = new Float64Array(n * 5);
    const ends = new Int32Array(1 + 2 * n);
    const datas = new Array(n);
    const added = [];
    const id = (s) => {
      let i = dict.get(s);
      if (i === undefined) {
        i = dict.size;
        dict.set(s, i);
        added.push(s);
      }
      return i;
    };
    let chars = 2 + n;
    for (let i = 0; i < n; i++) {
      const r = rows[i];
      nums[i * 5] = r[0];
      nums[i * 5 + 1] = id(r[1]);
      nums[i * 5 + 2] = r[2];
      nums[i * 5 + 3] = id(r[3]);
      nums[i * 5 + 4] = r[4];
      datas[i] = r[5];
      chars += r[5].length + r[6].length + r[7].length;
    }
    // UTF-8 takes at most 3 bytes per UTF-16 code unit.
    const bytes = Buffer.allocUnsafeSlow(chars * 3);
    let o = bytes.write(n ? '[' + datas.join(',') + ']' : '[]', 0);
    ends[0] = o;
    for (let i = 0; i < n; i++) {
      const r = rows[i];
      o += bytes.write(r[6], o);
      ends[1 + 2 * i] = o;
      o += bytes.write(r[7], o);
      ends[2 + 2 * i] = o;
    }
    const done = n < pageSize;
    // Wait while the folding thread is AHEAD pages behind (or until told to stop).
    for (;;) {
      const consumed = Atomics.load(flag, 1);
      if (sent - consumed < ahead || Atomics.load(flag, 2) === 1) break;
      Atomics.wait(flag, 1, consumed, 1000);
    }
    post({ count: n, bytes: bytes.buffer, ends, nums, dict: added, done }, [bytes.buffer, ends.buffer, nums.buffer]);
    if (done) break;
    after = rows[n - 1][0];
  }
  db.close();
} catch (e) {
  post({ count: 0, bytes: new ArrayBuffer(0), ends: new Int32Array(1), nums: new Float64Array(0), dict: [], done: true, error: String((e && e.message) || e) });
}
`;

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
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { file, port: port2, flag, after: afterPosition, pageSize, ahead: AHEAD, mmapBytes, columns: FOLD_COLUMNS, sqlite: createRequire(import.meta.url).resolve('better-sqlite3') },
    transferList: [port2],
  });
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
