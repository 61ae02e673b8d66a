import { sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * The compiled module a worker thread runs: `./<name>.js` next to the module that starts it
 * (`from` is that module's import.meta.url).
 *
 * Production runs dist/ (tsc's output), where that file is beside its caller. Tests run the
 * TypeScript sources through vitest, and a Worker cannot load a `.ts` file: Node 20 strips no
 * types and no TypeScript loader is a dependency. So from a `.ts` caller the worker runs the
 * compiled copy of the same path under dist/ (tsconfig: rootDir ".", outDir "dist"); vitest's
 * globalSetup (test/helpers/build-workers.ts) builds it first when it is missing or older than
 * the sources, the pattern of test/helpers/store-dist.ts (ensureBuilt).
 */
export function workerFile(name: string, from: string): URL {
  const beside = new URL(`./${name}.js`, from);
  if (!from.endsWith('.ts')) return beside;
  const path = fileURLToPath(beside);
  const src = path.lastIndexOf(`${sep}src${sep}`);
  if (src < 0) throw new Error(`worker ${name}: ${path} is not under a src/ folder, so its compiled copy cannot be found`);
  return pathToFileURL(`${path.slice(0, src)}${sep}dist${path.slice(src)}`);
}
