/**
 * Issue 39 item 2 (start refuses a tampered log) and item 5 (disk space in /v1/status and metrics),
 * on a real gateway over the embedded devnet.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { ensureBuilt, repoRoot } from '../helpers/store-dist.js';
import { afterEach, describe, expect, it } from 'vitest';
import { eventsFile } from '../../src/events/sqlite-store.js';
import { EventLogTamperedError } from '../../src/events/log-anchor.js';
import { disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

let gw: TestGateway | undefined;
afterEach(async () => {
  await disposeTestGateway(gw);
  gw = undefined;
});

const KEY = 'log-anchor-test-key-9f8e7d6c5b4a';

describe('start on a tampered log', () => {
  it('refuses to serve, naming the position; the key never appears in logs or the error', async () => {
    gw = await startTestGateway({ env: { DEVSHARD_LOG_HMAC_KEY: KEY } });
    // Something in the log written by this run (after the start's anchor).
    expect((await gw.call('/v1/admin/settings', { method: 'POST', body: { default_request_max_tokens: 1000 } })).status).toBe(200);
    await gw.ctx.engine.idle();
    const tail = gw.store.lastPosition();
    expect(tail).toBeGreaterThan(0);
    const { storageDir, keys, env } = gw;
    await gw.stop();
    const logsBefore = gw.logs.join('\n');
    expect(logsBefore).toContain('event_log_verified');
    expect(logsBefore).not.toContain(KEY);

    // The repro: drop the no-update trigger, change an event's data, recreate the trigger.
    const raw = new Database(eventsFile(storageDir));
    const data = JSON.parse(raw.prepare('SELECT data FROM events WHERE position = ?').pluck().get(tail) as string);
    raw.exec('DROP TRIGGER events_no_update');
    raw.prepare('UPDATE events SET data = ? WHERE position = ?').run(JSON.stringify({ ...data, tampered: true }), tail);
    raw.exec(`CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE is forbidden'); END`);
    raw.close();

    const restarted = startTestGateway({ storageDir, keys, env });
    await expect(restarted).rejects.toBeInstanceOf(EventLogTamperedError);
    const err = (await restarted.catch((e: unknown) => e)) as EventLogTamperedError;
    expect(err.position).toBe(tail);
    expect(err.message).toContain(`position ${tail}`);
    expect(err.message).not.toContain(KEY);
    // The storage lock was released: a start after restoring the log is possible (here: same refusal).
    await expect(startTestGateway({ storageDir, keys, env })).rejects.toBeInstanceOf(EventLogTamperedError);
    // `shardgate serve` on it: exit 3 with one line naming the position, no stack trace, no key.
    const cli = await promisify(execFile)(process.execPath, [ensureBuilt('dist/src/cli/main.js'), 'serve', '--devnet'], { cwd: repoRoot, env: { PATH: process.env.PATH ?? '', ...env } }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
    );
    expect(cli.code).toBe(3);
    expect(cli.stderr).toContain(`position ${tail}`);
    expect(cli.stderr).not.toMatch(/\n\s+at /);
    expect(cli.stderr).not.toContain(KEY);
  }, 60_000);

  it('an untouched log restarts, verifying only what was appended since', async () => {
    gw = await startTestGateway();
    const first = gw.logs.find((l) => l.includes('event_log_verified'));
    expect(JSON.parse(first!)).toMatchObject({ verified_from: 0, verified_to: 0 });
    await gw.call('/v1/admin/settings', { method: 'POST', body: { default_request_max_tokens: 1000 } });
    const tail = gw.store.lastPosition();
    gw = await gw.restart();
    const again = JSON.parse(gw.logs.find((l) => l.includes('event_log_verified'))!);
    expect(again).toMatchObject({ verified_from: 0, verified_to: tail, keyed: false });
  }, 30_000);
});

describe('an event changed before the anchor, its stored hash left as it was', () => {
  it('is found by the background check after the start: chat answers 503 event_log_tampered naming the position, /v1/status shows it', async () => {
    gw = await startTestGateway({ quickStartEscrow: true });
    expect((await gw.call('/v1/admin/settings', { method: 'POST', body: { default_request_max_tokens: 1000 } })).status).toBe(200);
    await gw.ctx.engine.idle();
    const changed = gw.store.lastPosition();
    // A second start moves the anchor past it; the third start then re-hashes nothing before it.
    gw = await gw.restart();
    await gw.tasks.logCheck;
    expect((await gw.call('/v1/status', { key: 'none' })).json.event_log_check).toMatchObject({ state: 'ok' });
    const { storageDir, keys, env } = gw;
    await gw.stop();
    const raw = new Database(eventsFile(storageDir));
    const data = JSON.parse(raw.prepare('SELECT data FROM events WHERE position = ?').pluck().get(changed) as string);
    raw.exec('DROP TRIGGER events_no_update');
    raw.prepare('UPDATE events SET data = ? WHERE position = ?').run(JSON.stringify({ ...data, tampered: true }), changed);
    raw.exec(`CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE is forbidden'); END`);
    raw.close();

    gw = await startTestGateway({ storageDir, keys, env });
    await gw.tasks.logCheck;
    const status = await gw.call('/v1/status', { key: 'none' });
    expect(status.json.event_log_check).toMatchObject({ state: 'failed', position: changed });
    const chat = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }] } });
    expect(chat.status).toBe(503);
    expect(chat.json.error.code).toBe('event_log_tampered');
    expect(chat.json.error.message).toContain(`position ${changed}`);
    expect(chat.json.error.message).toContain('shardgate verify');
    expect(gw.logs.join('\n')).toContain(`event_log_verification_failed: position ${changed}`);
  }, 60_000);
});

describe('storage space', () => {
  it('/v1/status shows free bytes and low; /metrics has the gauge', async () => {
    gw = await startTestGateway({ env: { GATEWAY_STORAGE_LOW_BYTES: String(Number.MAX_SAFE_INTEGER) } });
    const status = await gw.call('/v1/status', { key: 'none' });
    expect(status.status).toBe(200);
    expect(status.json.storage.log).toBe('sqlite');
    expect(status.json.storage.free_bytes).toBeGreaterThan(0);
    expect(status.json.storage.low).toBe(true);
    const metrics = await gw.call('/metrics');
    expect(metrics.text).toMatch(/^shardgate_storage_free_bytes \d+/m);
  }, 30_000);

  it('is not low above the threshold', async () => {
    gw = await startTestGateway({ env: { GATEWAY_STORAGE_LOW_BYTES: '0' } });
    expect((await gw.call('/v1/status', { key: 'none' })).json.storage).toMatchObject({ low: false });
  }, 30_000);
});
