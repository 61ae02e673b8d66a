/**
 * vitest globalSetup: worker threads run compiled modules (src/events/worker-file.ts), and under
 * vitest those are dist/'s copies. Build once before the tests when one is missing or older than
 * a source it is compiled from (everything in src/events), so a test never runs a stale worker.
 * `npm test` builds first, so there this finds everything fresh.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { buildDist, repoRoot } from './store-dist.js';

const WORKERS = ['src/events/sqlite/writer-thread.ts', 'src/events/fold-reader-worker.ts'];

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(path));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

export default function setup(): void {
  const sources = newestSource(join(repoRoot, 'src/events'));
  const compiled = WORKERS.map((w) => join(repoRoot, 'dist', w.replace(/\.ts$/, '.js')));
  const stale = compiled.some((js) => !existsSync(js) || statSync(js).mtimeMs < sources);
  if (!stale) return;
  buildDist();
  const missing = compiled.filter((js) => !existsSync(js));
  if (missing.length > 0) throw new Error(`worker modules missing after the build: ${missing.join(', ')}`);
}
