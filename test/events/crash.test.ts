import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSqliteEventStore, eventsFile } from '../../src/events/sqlite-store.js';
import { verifyLog } from '../../src/events/verify.js';
import { tempStorage } from '../helpers/store-fixtures.js';
import { ensureBuilt } from '../helpers/store-dist.js';

let writer: string;
let storage: ReturnType<typeof tempStorage>;
beforeAll(() => {
  writer = ensureBuilt('dist/src/events/tools/crash-writer.js');
  storage = tempStorage();
});
afterAll(() => storage.cleanup());

/** Runs the writer until it has acknowledged `atLeast` appends, then SIGKILLs it. */
function runAndKill(file: string, atLeast: number): Promise<Map<number, number>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [writer, file, '64'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const acked = new Map<number, number>();
    let buffered = '';
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout.on('data', (d: Buffer) => {
      buffered += d.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop()!; // a torn last line is not an acknowledgement
      for (const line of lines) {
        const [pos, seq] = line.split(' ').map(Number);
        acked.set(pos!, seq!);
      }
      if (acked.size >= atLeast && child.exitCode === null) child.kill('SIGKILL');
    });
    child.on('exit', (_code, signal) => {
      if (signal !== 'SIGKILL') reject(new Error(`writer exited on its own (${signal}): ${stderr}`));
      else resolve(acked);
    });
  });
}

describe('crash safety', () => {
  it('after SIGKILL mid-stream, the log verifies and holds every acknowledged append', async () => {
    const file = eventsFile(storage.dir);
    const acked = await runAndKill(file, 3_000);
    expect(acked.size).toBeGreaterThanOrEqual(3_000);

    const result = await verifyLog(file);
    expect(result).toMatchObject({ ok: true });
    const store = openSqliteEventStore(file);
    try {
      const stored = new Map<number, unknown>();
      for (const e of store.readAll()) stored.set(e.position, (e.data as { seq: number }).seq);
      for (const [pos, seq] of acked) expect(stored.get(pos)).toBe(seq);
      // and the reopened log keeps going where it stopped
      const next = await store.append('after-crash', [{ type: 'x', data: {}, metadata: { actor: { kind: 'startup' } } }], { expectedVersion: -1 });
      expect(next.positions).toEqual([store.lastPosition()]);
      expect(next.positions[0]).toBe(stored.size + 1);
    } finally {
      await store.close();
    }

    // a second crash on the reopened file
    const again = await runAndKill(file, 500);
    expect(await verifyLog(file)).toMatchObject({ ok: true });
    expect(Math.max(...again.keys())).toBeGreaterThan(Math.max(...acked.keys()));
  });
});
