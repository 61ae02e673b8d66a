/**
 * No silent devnet: `shardgate serve` without a chain endpoint refuses to start and names the
 * variables (ours and devshardctl's); the devnet is the explicit `serve --devnet` (npm start).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/store-dist.js';

const repoRoot = join(import.meta.dirname, '..', '..');

describe('serve without a chain endpoint', () => {
  it('exits 2 naming DEVSHARD_CHAIN_REST / NODE_CHAIN_API, DEVSHARD_PUBLIC_API, DEVSHARD_TX_QUERY_REST and serve --devnet', { timeout: 60_000 }, async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'serve-'));
    try {
      const r = await new Promise<{ code: number; stderr: string }>((resolve) =>
        execFile(process.execPath, [ensureBuilt('dist/src/cli/main.js'), 'serve', '--storage', join(cwd, 's')], { cwd, env: { PATH: process.env.PATH ?? '', DEVSHARD_ADMIN_API_KEY: 'a'.repeat(40), DEVSHARDS_JSON: '[]' } }, (err, _out, stderr) =>
          resolve({ code: (err as { code?: number } | null)?.code ?? 0, stderr }),
        ),
      );
      expect(r.code).toBe(2);
      for (const name of ['DEVSHARD_CHAIN_REST', 'NODE_CHAIN_API', 'DEVSHARD_PUBLIC_API', 'DEVSHARD_TX_QUERY_REST', 'serve --devnet']) expect(r.stderr).toContain(name);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });

  it('npm start runs the devnet explicitly', () => {
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { scripts: { start: string } };
    expect(pkg.scripts.start).toMatch(/serve --devnet$/);
  });
});
