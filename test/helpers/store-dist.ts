import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

export const repoRoot = resolve(import.meta.dirname, '../..');

/**
 * Child processes run compiled JS. `npm test` builds first; when running vitest alone and the
 * file is missing, build once (tsc emits even if unrelated files have type errors).
 */
export function ensureBuilt(relativeJs: string): string {
  const file = resolve(repoRoot, relativeJs);
  if (!existsSync(file)) {
    try {
      execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: repoRoot, stdio: 'ignore' });
    } catch {
      // type errors elsewhere still emit; the existence check below is what matters
    }
  }
  if (!existsSync(file)) throw new Error(`${relativeJs} is missing and could not be built`);
  return file;
}
