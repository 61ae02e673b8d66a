/**
 * Issue 38 item 4: what `shardgate init` tells the operator to run must work. Each `shardgate serve`
 * command it prints is run exactly as printed, on the file it wrote and nothing else: it starts, or
 * the line that prints it names the chain variables serve refuses to start without. The container
 * line names the devnet compose file and the variables compose.yaml requires.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runInit } from '../../src/cli/commands/init.js';
import { ensureBuilt, repoRoot } from '../helpers/store-dist.js';
import { composeEnvironment } from './container-files.js';

const dir = mkdtempSync(join(tmpdir(), 'init-hint-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `shardgate <args>` run in `dir` with no variable but PATH (and a free port, a fresh state directory). */
function runCli(args: string[], storage: string): Promise<{ started: boolean; code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [ensureBuilt('dist/src/cli/main.js'), ...args], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', DEVSHARD_PORT: '0', DEVSHARD_STORAGE_DIR: storage, LOG_LEVEL: 'warn', DEVNET_BLOCK_TIME_MS: '50' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    let started = false;
    child.stderr!.on('data', (c: Buffer) => {
      stderr += c.toString();
      if (!started && /shardgate is listening on /.test(stderr)) {
        started = true;
        child.kill('SIGTERM');
      }
    });
    child.once('exit', (code) => resolve({ started, code, stderr }));
  });
}

describe('the commands `shardgate init` prints', () => {
  it('each `shardgate serve` line runs as printed: it starts, or it names the chain variables serve needs', { timeout: 120_000 }, async () => {
    const file = join(dir, 'shardgate.env');
    const out: string[] = [];
    await runInit({ file }, (l) => out.push(l));
    const serveLines = out.filter((l) => /\bshardgate serve\b/.test(l));
    expect(serveLines.length).toBeGreaterThan(0);
    let startedOne = false;
    for (const [i, line] of serveLines.entries()) {
      const m = /\bshardgate (serve(?: \S+)*)$/.exec(line);
      expect(m, `a command at the end of: ${line}`).not.toBeNull();
      const r = await runCli(m![1]!.split(' '), join(dir, `state-${i}`));
      if (r.started) {
        startedOne = true;
        continue;
      }
      // Refused: the line said what to set first, the variables serve's refusal names.
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain('no chain endpoint configured');
      for (const name of ['NODE_CHAIN_API', 'DEVSHARD_CHAIN_REST']) {
        expect(r.stderr, name).toContain(name);
        expect(line, `${name} in: ${line}`).toContain(name);
      }
    }
    // At least one runs on the file alone: the devnet.
    expect(startedOne, out.join('\n')).toBe(true);
  });

  it('the container line names the devnet compose file and every variable compose.yaml requires', async () => {
    const out: string[] = [];
    await runInit({ file: join(dir, 'c.env') }, (l) => out.push(l));
    const line = out.find((l) => /docker compose/.test(l));
    expect(line, out.join('\n')).toBeDefined();
    expect(line).toContain('compose.devnet.yaml');
    const required = composeEnvironment(readFileSync(join(repoRoot, 'compose.yaml'), 'utf8'), ['services', 'gateway'], {}).missing.map((m) => m.variable);
    expect(required.length).toBeGreaterThan(0);
    for (const name of required) expect(line, name).toContain(name);
  });
});
