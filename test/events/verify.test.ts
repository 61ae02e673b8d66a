import Database from 'better-sqlite3';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openSqliteEventStore, eventsFile } from '../../src/events/sqlite-store.js';
import { verifyLog } from '../../src/events/verify.js';
import { ev, tempStorage } from '../helpers/store-fixtures.js';
import { ensureBuilt, repoRoot } from '../helpers/store-dist.js';

const run = promisify(execFile);
let cli: string;
let storage: ReturnType<typeof tempStorage>;
let file: string;

beforeAll(() => {
  cli = ensureBuilt('dist/src/cli/main.js');
});
beforeEach(async () => {
  storage = tempStorage();
  file = eventsFile(storage.dir);
  const store = openSqliteEventStore(file);
  for (let i = 0; i < 20; i++) await store.append(`s${i % 3}`, [ev('t', { i, amount: String(i * 10) })], { expectedVersion: 'any' });
  await store.close();
});
afterEach(() => storage.cleanup());

/** What someone with sqlite3 and bad intentions would do. */
function tamper(sql: string): void {
  const raw = new Database(file);
  raw.exec('DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete');
  raw.exec(sql);
  raw.close();
}

async function cliVerify(dir: string): Promise<{ code: number; out: string }> {
  try {
    const { stdout } = await run(process.execPath, [cli, 'verify', '--storage', dir], { cwd: repoRoot });
    return { code: 0, out: stdout };
  } catch (e) {
    const err = e as { code: number; stdout: string };
    return { code: err.code, out: err.stdout };
  }
}

describe('verifyLog', () => {
  it('passes an untouched log with a summary', async () => {
    const r = await verifyLog(file);
    expect(r).toMatchObject({ ok: true, events: 20, lastPosition: 20, warnings: [] });
    expect(r.ok && r.lastHash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('reports exactly the position whose data was edited', async () => {
    tamper(`UPDATE events SET data = '{"amount":"9999","i":7}' WHERE position = 8`);
    expect(await verifyLog(file)).toMatchObject({ ok: false, position: 8, reason: expect.stringMatching(/hash mismatch/) });
  });

  it('catches an edit that re-hashes the row but breaks the chain after it', async () => {
    // Forger recomputes the edited row's hash but not its successors: the next prev_hash disagrees.
    const raw = new Database(file);
    raw.exec('DROP TRIGGER events_no_update');
    const { eventHash } = await import('../../src/events/hash.js');
    const r = raw.prepare('SELECT * FROM events WHERE position = 5').get() as Record<string, string & number>;
    const data = '{"amount":"1","i":4}';
    const hash = eventHash(r.prev_hash, { position: 5, streamId: r.stream_id, streamVersion: r.stream_version, type: r.type, schemaVersion: r.schema_version, dataJson: data, metadataJson: r.metadata, time: r.time });
    raw.prepare('UPDATE events SET data = ?, hash = ? WHERE position = 5').run(data, hash);
    raw.close();
    expect(await verifyLog(file)).toMatchObject({ ok: false, position: 6, reason: expect.stringMatching(/prev_hash/) });
  });

  it('reports a deleted event as a gap at the first missing position', async () => {
    tamper('DELETE FROM events WHERE position = 13');
    expect(await verifyLog(file)).toMatchObject({ ok: false, position: 14, reason: expect.stringMatching(/position 13 is missing/) });
  });

  it('runs extra checks after the log verifies, and fails with theirs', async () => {
    const seen: number[] = [];
    const r = await verifyLog(file, [
      ({ summary }) => void seen.push(summary.lastPosition),
      async () => ({ position: 20, reason: 'projection pool differs from checkpoint' }),
    ]);
    expect(seen).toEqual([20]);
    expect(r).toEqual({ ok: false, position: 20, reason: 'projection pool differs from checkpoint' });
  });
});

describe('shardgate verify', () => {
  it('exits 0 with a one-line summary', async () => {
    const { code, out } = await cliVerify(storage.dir);
    expect(code).toBe(0);
    expect(out.trim().split('\n')).toHaveLength(1);
    expect(out).toMatch(/ok: 20 events/);
  });

  it('exits 1 naming the first bad position', async () => {
    tamper(`UPDATE events SET data = '{"amount":"0","i":10}' WHERE position = 11`);
    const { code, out } = await cliVerify(storage.dir);
    expect(code).toBe(1);
    expect(out).toMatch(/at position 11\b/);
  });

  it('exits 1 when there is no log', async () => {
    const empty = tempStorage();
    const { code, out } = await cliVerify(empty.dir);
    empty.cleanup();
    expect(code).toBe(1);
    expect(out).toMatch(/no event log/);
  });
});
