import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NewEvent } from '../../src/events/envelope.js';

/** A fresh temp directory per test; call the returned cleanup in afterEach. */
export function tempStorage(prefix = 'shardgate-store-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A minimal valid event; the store does not care what the catalog says. */
export function ev(type = 'test.happened', data: unknown = {}): NewEvent {
  return { type, data, metadata: { actor: { kind: 'admin' } } };
}
