import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { machines } from '../src/machines/index.js';
import { diagramPath, renderDiagramFile, renderMermaid } from '../src/machines/diagram.js';

const root = join(import.meta.dirname, '..');
// SHARDGATE_UPDATE_DIAGRAMS=1 regenerates instead of checking (same as `shardgate diagram`).
const update = process.env.SHARDGATE_UPDATE_DIAGRAMS === '1';

describe('statechart diagrams', () => {
  for (const [name, machine] of Object.entries(machines)) {
    it(`${diagramPath(name)} matches the ${name} machine`, () => {
      const file = join(root, diagramPath(name));
      const generated = renderDiagramFile(name, machine);
      if (update) writeFileSync(file, generated);
      const committed = readFileSync(file, 'utf8');
      expect(committed, `stale diagram: run \`shardgate diagram\` (or SHARDGATE_UPDATE_DIAGRAMS=1)`).toBe(generated);
    });
  }

  it('draws every transition of a machine with its guard', () => {
    const text = renderMermaid(machines.escrow);
    expect(text.startsWith('stateDiagram-v2\n')).toBe(true);
    expect(text).toContain('active --> active: InferenceStarted [canStartRequest]');
    expect(text).toContain('finalized --> settleDeferred: EscrowSettleDeferred [hasInFlight]');
    expect(text).toContain('removed --> [*]');
    expect(renderMermaid(machines.rotation)).toContain('state phase1 {');
  });
});
