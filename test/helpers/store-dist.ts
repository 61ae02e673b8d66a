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
  if (!existsSync(file)) buildDist();
  if (!existsSync(file)) throw new Error(`${relativeJs} is missing and could not be built`);
  return file;
}

/** `npm run build` without npm: tsc over src and bench into dist/. */
export function buildDist(): void {
  try {
    execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: repoRoot, stdio: 'ignore' });
  } catch {
    // type errors elsewhere still emit; callers check the files they need
  }
}
