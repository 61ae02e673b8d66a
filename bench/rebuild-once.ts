/**
 * One cold rebuild of every projection from a log file, in a process of its own, as a gateway
 * starting on that log would do it (`node dist/bench/rebuild-once.js <events.sqlite>`; prints JSON).
 * The soak runs it after stopping the gateway, so the figure is not slowed by what else the bench
 * process holds (the other targets, their devnets, a large heap).
 */
import { fork } from 'node:child_process';
import { statSync } from 'node:fs';
import { openSqliteEventStore } from '../src/events/sqlite-store.js';
import { rebuildProjectionsFrom } from '../src/projections/index.js';
import { tuneV8ForServing } from '../src/gateway/v8-tuning.js';

export interface RebuildOnce {
  events: number;
  fileMiB: number;
  readSeconds: number;
  readEventsPerSec: number;
  rebuildSeconds: number;
  eventsPerSec: number;
  /**
   * The log's history counted one record per request start and end (each InferencesRecorded as
   * its entries, every other event as one): what a log written before InferencesRecorded holds
   * for the same requests, so rates stay comparable across versions.
   */
  records: number;
  recordsPerSec: number;
}

/** Runs this file in a child process on `file`. */
export function rebuildInChild(file: string): Promise<RebuildOnce> {
  return new Promise((resolve, reject) => {
    const child = fork(new URL(import.meta.url), [file], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`rebuild-once exited with ${code}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').at(-1)!) as RebuildOnce);
      } catch (err) {
        reject(err);
      }
    });
  });
}

function rebuildOnce(file: string): RebuildOnce {
  const store = openSqliteEventStore(file);
  try {
    let t0 = process.hrtime.bigint();
    let events = 0;
    let records = 0;
    for (const r of store.readAll()) {
      events++;
      records += r.type === 'InferencesRecorded' ? (r.data as { entries: unknown[] }).entries.length : 1;
    }
    const readSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
    t0 = process.hrtime.bigint();
    void rebuildProjectionsFrom(store); // split by stream over the cores (partitioned-rebuild.ts)
    const rebuildSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
    return {
      events,
      fileMiB: Math.round((statSync(file).size / 2 ** 20) * 10) / 10,
      readSeconds,
      readEventsPerSec: Math.round(events / readSeconds),
      rebuildSeconds,
      eventsPerSec: Math.round(events / rebuildSeconds),
      records,
      recordsPerSec: Math.round(records / rebuildSeconds),
    };
  } finally {
    void store.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const file = process.argv[2];
  if (!file) throw new Error('usage: rebuild-once.js <events.sqlite>');
  tuneV8ForServing(); // as a gateway starting with `shardgate serve` rebuilds
  console.log(JSON.stringify(rebuildOnce(file)));
}
