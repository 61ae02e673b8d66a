/** The throwaway cluster helper fails loudly, with the remedy, when the server binaries are missing. */
import { describe, expect, it } from 'vitest';
import { findPgBin } from '../helpers/pg-cluster.js';

describe('test/helpers/pg-cluster.ts', () => {
  it('without PostgreSQL binaries it throws, naming Debian\'s postgresql package (never a silent skip)', () => {
    expect(() => findPgBin('/nonexistent-bin', '/nonexistent-root')).toThrow(/install Debian's postgresql package/i);
  });
});
