/**
 * The house rules of imports (.dependency-cruiser.cjs, docs/architecture.md "Layers"): no import
 * circle and no arrow up a layer, in src/ and bench/. A violation names the file and the rule.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..');
const cli = join(root, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
  cycle?: { name: string }[];
}
interface CruiseResult {
  modules: { source: string }[];
  summary: { violations: Violation[]; error: number };
}

async function cruise(cwd = root, folders = ['src', 'bench']): Promise<CruiseResult> {
  const { stdout } = await promisify(execFile)(process.execPath, [cli, ...folders, '--config', '.dependency-cruiser.cjs', '--output-type', 'json'], {
    cwd,
    maxBuffer: 256 * 1024 * 1024,
  });
  return JSON.parse(stdout) as CruiseResult;
}

const describeViolation = (v: Violation) =>
  `${v.rule.name}: ${v.from} -> ${v.to}${v.cycle ? ` (circle: ${v.cycle.map((c) => c.name).join(' -> ')})` : ''}`;

describe('import layers', () => {
  it('has no import circle and no arrow up a layer in src/ and bench/', async () => {
    const result = await cruise();
    // Every layer was looked at (an empty cruise would pass vacuously).
    const folders = new Set(result.modules.map((m) => /^src\/([^/]+)\//.exec(m.source)?.[1]).filter(Boolean));
    for (const layer of ['cli', 'main', 'http', 'gateway', 'projections', 'machines', 'events', 'network', 'chain', 'protocol', 'devnet', 'config']) {
      expect(folders, `src/${layer} was not cruised`).toContain(layer);
    }
    expect(result.modules.some((m) => m.source.startsWith('bench/'))).toBe(true);
    expect(result.summary.violations.map(describeViolation)).toEqual([]);
  }, 120_000);

  it('refuses a circle, an arrow up a layer and a devnet import from the gateway (the rules on a planted tree)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'layers-'));
    try {
      const put = (file: string, text: string) => {
        mkdirSync(dirname(join(dir, file)), { recursive: true });
        writeFileSync(join(dir, file), text);
      };
      copyFileSync(join(root, '.dependency-cruiser.cjs'), join(dir, '.dependency-cruiser.cjs'));
      put('tsconfig.json', JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true } }));
      put('package.json', JSON.stringify({ type: 'module' }));
      put('src/machines/escrow.ts', "import { refuse } from '../gateway/errors.js';\nexport const m = refuse;\n");
      put('src/gateway/errors.ts', "export const refuse = 1;\n");
      put('src/gateway/start.ts', "import { startDevnet } from '../devnet/start.js';\nexport const s = startDevnet;\n");
      put('src/devnet/start.ts', "export const startDevnet = 1;\n");
      put('src/events/a.ts', "import { b } from './b.js';\nexport const a = () => b;\n");
      put('src/events/b.ts', "import { a } from './a.js';\nexport const b = () => a;\n");
      const result = await cruise(dir, ['src']);
      expect(result.summary.violations.map((v) => v.rule.name).sort()).toEqual(['devnet-only-from-the-top', 'layer-gateway', 'layer-machines', 'no-circular']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
