import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderEnvTable, VARIABLES } from '../../src/config/index.js';

describe('README configuration table', () => {
  it('is the table generated from src/config/variables.ts (regenerate it when a variable changes)', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    expect(readme).toContain(renderEnvTable().trim());
    // The whole table, not just a part of it: a row kept after its variable changed fails too.
    const lines = readme.split('\n');
    const start = lines.indexOf('| Variable | Default | Meaning |');
    let end = start;
    while (end < lines.length && lines[end]!.startsWith('|')) end++;
    expect(lines.slice(start, end).join('\n')).toBe(renderEnvTable().trim());
  });

  it('declares each variable once', () => {
    const names = VARIABLES.map((v) => v.name);
    expect(names.filter((n, i) => names.indexOf(n) !== i)).toEqual([]);
  });
});
