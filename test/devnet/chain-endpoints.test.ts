import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CosmosChainClient } from '../../src/chain/cosmos-client.js';
import type { Devnet } from '../../src/devnet/chain/index.js';
import { clientFor, CREATOR_KEYS, MODEL, startTestDevnet } from '../chain/helpers.js';

describe('devnet endpoints an operator reads', () => {
  let devnet: Devnet;
  let client: CosmosChainClient;
  beforeAll(async () => {
    devnet = await startTestDevnet({ epochBlocks: 100, pocBlocks: 10 });
    client = clientFor(devnet);
  });
  afterAll(async () => {
    client.close();
    await devnet.close();
  });

  it('GET {chain_rpc}status gives the latest height as a string, and blocks keep coming', async () => {
    const body = (await (await fetch(`${devnet.rpcUrl}status`)).json()) as { result: { sync_info: { latest_block_height: string }; node_info: { network: string } } };
    expect(body.result.node_info.network).toBe(devnet.chainId);
    const h = Number(body.result.sync_info.latest_block_height);
    expect(h).toBeGreaterThanOrEqual(1);
    await devnet.chain.waitForHeight(h + 2);
    expect(await client.height()).toBeGreaterThanOrEqual(h + 2);
    expect(await client.chainId()).toBe('shardgate-devnet');
  });

  it('serves the escrow params with the allowlist, and the governance models', async () => {
    const params = await client.params();
    expect(params).toEqual({
      minAmount: 1_000_000_000n,
      maxAmount: 2n ** 64n - 1n,
      maxEscrowsPerEpoch: 500_000,
      groupSize: 3,
      maxNonce: 1_000_000,
      allowedCreatorAddresses: await Promise.all(CREATOR_KEYS.map((k) => client.addressOf(k))),
      tokenPrice: 1000n,
      approvedVersions: ['v1', 'v2'],
      createDevshardFee: 10_000n,
      feePerNonce: 1_000n,
      bind: { refusalTimeout: 60n, executionTimeout: 1200n, validationRate: 5000, voteThresholdFactor: 50 },
    });
    expect(params.allowedCreatorAddresses).not.toContain(devnet.notAllowlisted.address);
    expect(await client.models()).toEqual([MODEL]);
  });

  it('reports the epoch, the next set_new_validators boundary and the PoC window after it', async () => {
    devnet.chain.jumpTo(195);
    const e = await client.epoch();
    expect(e).toMatchObject({ epochIndex: 1, nextBoundaryHeight: 200, pocActive: false, pocEndHeight: 210 });
    // Blocks keep coming while we ask: the count is relative to the height the answer was made at.
    expect(e.height).toBeGreaterThanOrEqual(195);
    expect(e.height).toBeLessThan(200);
    expect(e.blocksUntilBoundary).toBe(200 - e.height);
    devnet.chain.jumpTo(203);
    expect(await client.epoch()).toMatchObject({ epochIndex: 2, nextBoundaryHeight: 300, pocActive: true, pocEndHeight: 210 });
  });

  it('answers an unknown escrow as not found', async () => {
    expect(await client.escrow('999999')).toBeNull();
  });

  it('answers a duplicate broadcast the way CometBFT does', async () => {
    const prepared = await client.prepareCreateEscrow(CREATOR_KEYS[0]!, 1_000_000_000n, MODEL);
    const send = async () =>
      (await fetch(devnet.rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'broadcast_tx_sync', params: { tx: prepared.txBytes } }),
      })).json();
    expect(await send()).toMatchObject({ result: { code: 0, hash: prepared.txHash } });
    expect(await send()).toMatchObject({ error: { code: -32603, data: 'tx already exists in cache' } });
  });

  it('answers a duplicate REST broadcast with the SDK\'s mempool-cache code', async () => {
    const prepared = await client.prepareCreateEscrow(CREATOR_KEYS[0]!, 1_000_000_000n, MODEL);
    const send = async () =>
      (await fetch(`${devnet.url}/cosmos/tx/v1beta1/txs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ tx_bytes: prepared.txBytes, mode: 'BROADCAST_MODE_SYNC' }),
      })).json();
    expect(await send()).toMatchObject({ tx_response: { code: 0, txhash: prepared.txHash } });
    expect(await send()).toMatchObject({ tx_response: { code: 19, codespace: 'sdk', txhash: prepared.txHash } });
  });
});

describe('devnet state in a SQLite file (DEVNET_STATE)', () => {
  it('resumes at the same height with the same escrows after a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'devnet-state-'));
    const statePath = join(dir, 'devnet.sqlite');
    try {
      const first = await startTestDevnet({ statePath });
      const c1 = clientFor(first);
      const { escrowId } = await c1.createEscrow(CREATOR_KEYS[0]!, 1_000_000_000n, MODEL);
      const height = first.chain.height;
      c1.close();
      await first.close();

      const second = await startTestDevnet({ statePath, env: { DEVNET_STATE: statePath } });
      const c2 = clientFor(second);
      expect(second.chain.height).toBeGreaterThanOrEqual(height);
      expect((await c2.escrow(escrowId))?.amount).toBe(1_000_000_000n);
      // The account sequence survived too: the next tx from the same key goes through.
      expect((await c2.createEscrow(CREATOR_KEYS[0]!, 1_000_000_000n, MODEL)).escrowId).not.toBe(escrowId);
      c2.close();
      await second.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
