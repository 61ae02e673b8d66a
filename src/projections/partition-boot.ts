/**
 * The first module a partition worker runs: it loads the fold module named in its workerData and
 * starts the job. Its own file (not a string run with `eval`) so tsc checks it; kept this small
 * because a module that fails to load cannot report it: this one catches the fold module's failure
 * and raises the flag the starting thread waits on (it blocks in Atomics.wait, so it would not see
 * a worker 'error' event).
 */
import { workerData } from 'node:worker_threads';

const data = workerData as { entry: string; flag: Int32Array; port: { postMessage(m: unknown): void } };

function fail(e: unknown): void {
  data.port.postMessage({ ok: false, reason: `worker: ${String((e as Error | undefined)?.stack ?? e)}` });
  Atomics.store(data.flag, 0, 1);
  Atomics.notify(data.flag, 0);
}

import(data.entry)
  .then((m: { runPartitionJob(d: unknown): unknown }) => m.runPartitionJob(data))
  .catch(fail);
