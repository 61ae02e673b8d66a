/**
 * One gateway per storage directory: a second process on the same storage is refused with a clear
 * message (and `shardgate serve` says so without a stack trace); a lock left by a killed process is
 * taken over; a clean stop releases it.
 */
import { spawn, execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { generateKeys } from '../../src/config/index.js';
import { lockStorage, StorageInUseError } from '../../src/gateway/write/storage-lock.js';
import { ensureBuilt, repoRoot } from '../helpers/store-dist.js';
import { startTestGateway, testGatewayEnv } from '../helpers/gateway.js';

const run = promisify(execFile);

describe('storage lock', () => {
  const dirs: string[] = [];
  const dir = () => {
    const d = mkdtempSync(join(tmpdir(), 'shardgate-lock-'));
    dirs.push(d);
    return d;
  };
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('refuses a storage held by a live process, takes over one left by a dead process', async () => {
    const storage = dir();
    const holder = spawn('sleep', ['30']);
    try {
      writeFileSync(join(storage, 'gateway.lock'), `${holder.pid}\n`);
      expect(() => lockStorage(storage)).toThrow(StorageInUseError);
      expect(() => lockStorage(storage)).toThrow(new RegExp(`in use by another shardgate process \\(pid ${holder.pid}\\)`));
    } finally {
      holder.kill('SIGKILL');
      await new Promise((r) => holder.once('exit', r));
    }
    const release = lockStorage(storage); // the holder is gone: taken over
    expect(existsSync(join(storage, 'gateway.lock'))).toBe(true);
    release();
    expect(existsSync(join(storage, 'gateway.lock'))).toBe(false);
  });

  it('a running gateway holds its storage: `shardgate serve` on it exits 2 with one clear line; the lock goes with a clean stop', { timeout: 60_000 }, async () => {
    const storage = dir();
    const keys = generateKeys();
    const gw = await startTestGateway({ storageDir: storage, keys });
    try {
      expect(existsSync(join(storage, 'gateway.lock'))).toBe(true);
      const env = { PATH: process.env.PATH ?? '', ...testGatewayEnv(keys, storage) };
      const second = await run(process.execPath, [ensureBuilt('dist/src/cli/main.js'), 'serve', '--devnet'], { cwd: repoRoot, env }).then(
        () => ({ code: 0, stderr: '' }),
        (e: { code: number; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
      );
      expect(second.code).toBe(2);
      expect(second.stderr).toMatch(/is in use by another shardgate process \(pid \d+\)/);
      expect(second.stderr).not.toMatch(/\n\s+at /); // no stack trace
    } finally {
      await gw.stop();
    }
    expect(existsSync(join(storage, 'gateway.lock'))).toBe(false);
  });
});
