import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Command } from 'commander';
import { machines } from '../../machines/index.js';
import { diagramPath, renderDiagramFile } from '../../machines/diagram.js';

/**
 * Writes every machine's diagram (or, with `--check`, exits 1 naming the stale ones).
 * @returns names of the diagrams that were written (or are stale, with `check`)
 */
export async function writeDiagrams(root: string, check = false): Promise<string[]> {
  const changed: string[] = [];
  for (const [name, machine] of Object.entries(machines)) {
    const file = join(root, diagramPath(name));
    const text = renderDiagramFile(name, machine);
    const current = await readFile(file, 'utf8').catch(() => null);
    if (current === text) continue;
    changed.push(name);
    if (!check) {
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, text);
    }
  }
  return changed;
}

/** `shardgate diagram [--root DIR] [--check]`: Mermaid diagrams of the statecharts into docs/statecharts. */
export function registerDiagram(program: Command): void {
  program
    .command('diagram')
    .description('write docs/statecharts/<machine>.md (Mermaid) from the machine definitions')
    .option('--root <dir>', 'repository root to write under', process.cwd())
    .option('--check', 'only check: exit 1 when a committed diagram is stale')
    .action(async (opts: { root: string; check?: boolean }) => {
      const changed = await writeDiagrams(opts.root, opts.check ?? false);
      if (opts.check && changed.length > 0) {
        process.stderr.write(`stale diagrams: ${changed.join(', ')} (run: shardgate diagram)\n`);
        process.exitCode = 1;
        return;
      }
      process.stdout.write(changed.length ? `wrote ${changed.map(diagramPath).join(', ')}\n` : 'diagrams up to date\n');
    });
}
