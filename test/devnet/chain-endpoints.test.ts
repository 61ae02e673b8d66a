import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CosmosChainClient } from '../../src/chain/cosmos-client.js';
import type { Devnet } from '../../src/devnet/chain/index.js';
import { SUPPORTED_VERSION_NAMES } from '../../src/protocol/versions.js';
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
      // Chain v0.2.16: read from the approved-versions store; by default every version the gateway speaks.
      approvedVersions: [...SUPPORTED_VERSION_NAMES].sort(),
      createDevshardFee: 10_000n,
      feePerNonce: 1_000n,
      // Validation rate: the chain's default since 59b1ee7e (t/params.go:108).
      bind: { refusalTimeout: 60n, executionTimeout: 1200n, validationRate: 1000, voteThresholdFactor: 50 },
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

  it('freezes the chain params on an escrow at create (DevshardEscrow 15–18) and serves them', async () => {
    const { escrowId } = await client.createEscrow(CREATOR_KEYS[0]!, 1_000_000_000n, MODEL);
    expect((await client.escrow(escrowId))!.frozen).toEqual({ validationRate: 1000, voteThresholdFactor: 50, refusalTimeout: 60n, executionTimeout: 1200n });
    // Governance changes later do not touch it: the params move, the escrow keeps what it froze.
    const p = devnet.chain.state.params;
    const before = { ...p };
    Object.assign(p, { validationRate: 2500, voteThresholdFactor: 67, refusalTimeout: 30n, executionTimeout: 600n });
    try {
      expect((await client.escrow(escrowId))!.frozen).toEqual({ validationRate: 1000, voteThresholdFactor: 50, refusalTimeout: 60n, executionTimeout: 1200n });
      const later = (await client.createEscrow(CREATOR_KEYS[0]!, 1_000_000_000n, MODEL)).escrowId;
      expect((await client.escrow(later))!.frozen).toEqual({ validationRate: 2500, voteThresholdFactor: 67, refusalTimeout: 30n, executionTimeout: 600n });
      // Zero in params: the compiled defaults are frozen (…ForCreate: 1000, 50, 60, 1200).
      Object.assign(p, { validationRate: 0, voteThresholdFactor: 0, refusalTimeout: 0n, executionTimeout: 0n });
      const zero = (await client.createEscrow(CREATOR_KEYS[0]!, 1_000_000_000n, MODEL)).escrowId;
      expect((await client.escrow(zero))!.frozen).toEqual({ validationRate: 1000, voteThresholdFactor: 50, refusalTimeout: 60n, executionTimeout: 1200n });
    } finally {
      Object.assign(p, before);
    }
  });

  it('serves validation_params.logprobs_mode with the chain default', async () => {
    const body = (await (await fetch(`${devnet.url}/productscience/inference/inference/params`)).json()) as { params: { validation_params: { logprobs_mode: string } } };
    // t/params.go at 59b1ee7e: DefaultLogprobsMode = LogprobsModeProcessed = "processed_logprobs".
    expect(body.params.validation_params.logprobs_mode).toBe('processed_logprobs');
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

  it('a snapshot from before the approved-versions store: the store is the configured one, the params\' old list is dropped', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'devnet-state-'));
    const statePath = join(dir, 'devnet.sqlite');
    try {
      await (await startTestDevnet({ statePath })).close();
      // Rewrite the snapshot as an older devnet wrote it: the list in params, no store, no grants.
      const db = new Database(statePath);
      const row = db.prepare<[], { state: string }>('SELECT state FROM devnet_snapshot WHERE id = 1').get()!;
      const old = JSON.parse(row.state) as Record<string, unknown> & { params: Record<string, unknown> };
      delete old.approvedVersions;
      delete old.authzGrants;
      old.params.approvedVersions = [{ name: 'v1', binary: 'devshard-v1', sha256: '' }];
      db.prepare('UPDATE devnet_snapshot SET state = ? WHERE id = 1').run(JSON.stringify(old));
      db.close();

      const restored = await startTestDevnet({ statePath, approvedVersions: ['v4.1'] });
      const c = clientFor(restored);
      try {
        expect((await c.params()).approvedVersions).toEqual(['v4.1']);
        const body = (await (await fetch(`${restored.url}/productscience/inference/inference/params`)).json()) as { params: { devshard_escrow_params: { approved_versions: unknown[] } } };
        expect(body.params.devshard_escrow_params.approved_versions).toEqual([]);
        expect(await c.warmKeyGranted(restored.hosts[0]!.address, restored.hosts[1]!.address)).toBe(false);
      } finally {
        c.close();
        await restored.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
