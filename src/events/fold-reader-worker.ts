/**
 * The fold reader thread's body (started by fold-reader-thread.ts, which says why and how pages
 * are packed): its own read-only, memory-mapped connection steps through the log in pages and
 * posts each as transferred buffers, at most `ahead` pages before the folding thread.
 */
import { workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { FOLD_COLUMNS, type FoldRow } from './fold-read.js';
import type { FoldReaderData, PageMessage } from './fold-reader-thread.js';

const { file, port, flag, after: start, pageSize, ahead, mmapBytes } = workerData as FoldReaderData;
let sent = 0;

function post(m: PageMessage, transfer: ArrayBuffer[]): void {
  port.postMessage(m, transfer);
  sent++;
  Atomics.store(flag, 0, sent);
  Atomics.notify(flag, 0);
}

/** Reads and posts every page after `start`; stops early when the folding thread says so. */
function readPages(): void {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  db.pragma(`mmap_size = ${mmapBytes}`);
  const page = db.prepare(`SELECT ${FOLD_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT ?`).raw();
  const dict = new Map<string, number>();
  let after = start;
  for (;;) {
    if (Atomics.load(flag, 2) === 1) break;
    const rows = page.all(after, pageSize) as FoldRow[];
    const n = rows.length;
    const nums = new Float64Array(n * 5);
    const ends = new Int32Array(1 + 2 * n);
    const datas = new Array<string>(n);
    const added: string[] = [];
    const id = (s: string): number => {
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
      const r = rows[i]!;
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
    let o = bytes.write(n ? `[${datas.join(',')}]` : '[]', 0);
    ends[0] = o;
    for (let i = 0; i < n; i++) {
      const r = rows[i]!;
      o += bytes.write(r[6], o);
      ends[1 + 2 * i] = o;
      o += bytes.write(r[7], o);
      ends[2 + 2 * i] = o;
    }
    const done = n < pageSize;
    // Wait while the folding thread is `ahead` pages behind (or until told to stop).
    for (;;) {
      const consumed = Atomics.load(flag, 1);
      if (sent - consumed < ahead || Atomics.load(flag, 2) === 1) break;
      Atomics.wait(flag, 1, consumed, 1000);
    }
    post({ count: n, bytes: bytes.buffer as ArrayBuffer, ends, nums, dict: added, done }, [bytes.buffer as ArrayBuffer, ends.buffer, nums.buffer]);
    if (done) break;
    after = rows[n - 1]![0];
  }
  db.close();
}

try {
  readPages();
} catch (e) {
  // The folding thread waits for a page: every failure is answered as one.
  post({ count: 0, bytes: new ArrayBuffer(0), ends: new Int32Array(1), nums: new Float64Array(0), dict: [], done: true, error: String((e as Error | undefined)?.message ?? e) }, []);
}
