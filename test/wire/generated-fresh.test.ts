/** The checked-in generated code is exactly what `npm run gen:proto` makes from proto/ (never hand-edited). */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..');
const files = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)]));

describe('generated wire code', () => {
  it.each([
    ['protocol', ['devshard']],
    ['chain', ['inference', 'cosmos']],
  ])('src/%s/gen matches proto/ (%s)', (room, protoDirs) => {
    const out = mkdtempSync(join(tmpdir(), 'gen-'));
    try {
      const template = JSON.stringify({
        version: 'v2',
        plugins: [{ local: join(root, 'node_modules', '.bin', 'protoc-gen-es'), out, opt: ['target=ts', 'import_extension=js'] }],
      });
      const tpl = join(out, 'buf.gen.json');
      writeFileSync(tpl, template);
      execFileSync(join(root, 'node_modules', '.bin', 'buf'), ['generate', '--template', tpl, ...protoDirs.flatMap((d) => ['--path', d])], {
        cwd: join(root, 'proto'),
        stdio: 'pipe',
      });
      const checkedIn = join(root, 'src', room, 'gen');
      const want = files(out).filter((f) => f.endsWith('.ts')).map((f) => relative(out, f)).sort();
      expect(files(checkedIn).map((f) => relative(checkedIn, f)).sort()).toEqual(want);
      for (const f of want) expect(readFileSync(join(checkedIn, f), 'utf8'), f).toBe(readFileSync(join(out, f), 'utf8'));
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
