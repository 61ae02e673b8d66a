/**
 * Issue 39 item 5: a snapshot write that fails in the devnet's block timer (disk full) must not end
 * the process. An injected store fails like SQLite on a full disk; no disk is filled.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { DevnetChain, type StateStore } from '../../src/devnet/chain/chain.js';
import { resolveDevnetConfig } from '../../src/devnet/chain/config.js';
import { genesisIdentities, genesisState } from '../../src/devnet/chain/genesis.js';
import type { ChainState } from '../../src/devnet/chain/state.js';

class FullDisk extends Error {
  readonly code = 'SQLITE_FULL';
  constructor() {
    super('database or disk is full');
    this.name = 'SqliteError';
  }
}

/** A state store whose writes fail while `full` is set. */
function flakyStore() {
  const s = {
    full: true,
    attempts: 0,
    saved: [] as number[],
    save(state: ChainState) {
      s.attempts++;
      if (s.full) throw new FullDisk();
      s.saved.push(state.height);
    },
    close() {},
  };
  return s satisfies StateStore;
}

let chain: DevnetChain | undefined;
afterEach(() => {
  chain?.stop();
  chain = undefined;
});

function makeChain(store: StateStore): DevnetChain {
  const config = resolveDevnetConfig({ env: {}, blockTimeMs: 5, port: 0 });
  const ids = genesisIdentities(config);
  return new DevnetChain(config, ids.hosts, genesisState(config, ids), store);
}

describe('devnet block timer', () => {
  it('keeps producing blocks when snapshot writes fail, reports once per kind, and saves once the disk has room', async () => {
    const store = flakyStore();
    chain = makeChain(store);
    const reported: { message: string; kind: string }[] = [];
    chain.onError = (message, kind) => reported.push({ message, kind });
    const start = chain.height;
    chain.start();
    await chain.waitForHeight(start + 25);
    expect(store.attempts).toBeGreaterThan(1);
    expect(store.saved).toEqual([]);
    expect(reported).toEqual([{ message: 'devnet_state_save_failed', kind: 'SQLITE_FULL' }]);

    // Room again: the very next block writes a snapshot (not only the tenth).
    store.full = false;
    const h = chain.height;
    await chain.waitForHeight(h + 2);
    expect(store.saved.length).toBeGreaterThan(0);
    expect(store.saved[0]).toBeLessThanOrEqual(h + 2);
  }, 10_000);

  it('advance() and close() do not throw on a full disk either', () => {
    const store = flakyStore();
    chain = makeChain(store);
    const reported: string[] = [];
    chain.onError = (message, kind) => reported.push(`${message}/${kind}`);
    expect(() => chain!.advance(3)).not.toThrow();
    expect(() => chain!.close()).not.toThrow();
    expect(reported).toEqual(['devnet_state_save_failed/SQLITE_FULL']);
  });
});
