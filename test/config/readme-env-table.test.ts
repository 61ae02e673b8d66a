import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderEnvTable } from '../../src/config/index.js';

describe('README configuration table', () => {
  it('is the table generated from src/config/variables.ts (regenerate it when a variable changes)', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    expect(readme).toContain(renderEnvTable().trim());
  });
});
