import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CosmosChainClient } from '../../src/chain/cosmos-client.js';
import type { Devnet } from '../../src/devnet/chain/index.js';
import { clientFor, CREATOR_KEYS, MIN_AMOUNT, MODEL, startDevnetAndClient, stopDevnetAndClient } from './helpers.js';

describe('broadcast is safe to retry by tx hash', () => {
  let devnet: Devnet;
  let client: CosmosChainClient;
  const key = CREATOR_KEYS[0]!;
  beforeAll(async () => ({ devnet, client } = await startDevnetAndClient()));
  afterAll(() => stopDevnetAndClient({ devnet, client }));

  const escrowCount = () => Object.keys(devnet.chain.state.escrows).length;

  it('knows the tx hash before anything is sent, and finds the tx by it afterwards', async () => {
    const prepared = await client.prepareCreateEscrow(key, MIN_AMOUNT, MODEL);
    expect(prepared.txHash).toMatch(/^[0-9A-F]{64}$/);
    expect(await client.findTx(prepared.txHash)).toBeNull();

    const outcome = await client.broadcast(prepared);
    expect(outcome).toMatchObject({ txHash: prepared.txHash, code: 0 });
    expect(outcome.height).toBeGreaterThan(0);
    expect(await client.findTx(prepared.txHash)).toEqual(outcome);
    expect(await client.findTx(prepared.txHash.toLowerCase())).toEqual(outcome);
    expect(client.createdEscrowId(outcome)).toMatch(/^\d+$/);
    // DEVSHARD_TX_QUERY_REST: the REST lookup answers the same outcome (and null for an unknown hash).
    const rest = clientFor(devnet, { txQueryRestUrl: devnet.url });
    expect(await rest.findTx(prepared.txHash.toLowerCase())).toEqual(outcome);
    expect(await rest.findTx('0'.repeat(64))).toBeNull();
    rest.close();
  });

  it('answers a rebroadcast of the same tx with the same outcome and no second escrow', async () => {
    const prepared = await client.prepareCreateEscrow(key, MIN_AMOUNT, MODEL);
    const before = escrowCount();
    const [a, b] = await Promise.all([client.broadcast(prepared), client.broadcast(prepared)]);
    const c = await client.broadcast(prepared); // after inclusion: the node still knows it
    expect(b).toEqual(a);
    expect(c).toEqual(a);
    expect(escrowCount()).toBe(before + 1);
  });

  it('reports a prepared tx whose sequence was used by another as bad_sequence, and the next prepare works', async () => {
    const stale = await client.prepareCreateEscrow(key, MIN_AMOUNT, MODEL);
    // Another client (e.g. a restarted gateway) uses the same sequence first.
    const other = clientFor(devnet);
    const first = await other.broadcast(await other.prepareCreateEscrow(key, MIN_AMOUNT + 1n, MODEL));
    expect(first.code).toBe(0);
    other.close();

    await expect(client.broadcast(stale)).rejects.toMatchObject({ kind: 'bad_sequence', detail: { code: 32 } });
    const fresh = await client.broadcast(await client.prepareCreateEscrow(key, MIN_AMOUNT, MODEL));
    expect(fresh.code).toBe(0);
  });

  it('waits for an earlier prepared tx when a later one is broadcast first', async () => {
    const first = await client.prepareCreateEscrow(key, MIN_AMOUNT, MODEL);
    const second = await client.prepareCreateEscrow(key, MIN_AMOUNT, MODEL);
    const later = client.broadcast(second);
    await new Promise((r) => setTimeout(r, 60));
    const [a, b] = await Promise.all([client.broadcast(first), later]);
    expect([a.code, b.code]).toEqual([0, 0]);
  });

  it('says the outcome is unknown when the node cannot be reached, and the tx can be sent again later', async () => {
    const prepared = await client.prepareCreateEscrow(key, MIN_AMOUNT, MODEL);
    devnet.chain.faults.rpcDown = true;
    try {
      await expect(client.broadcast(prepared)).rejects.toMatchObject({ kind: 'unreachable' });
    } finally {
      devnet.chain.faults.rpcDown = false;
    }
    expect((await client.broadcast(prepared)).code).toBe(0);
  });

  it('times out (outcome unknown) when the tx is accepted but never included', async () => {
    const slow = clientFor(devnet, { broadcastTimeoutMs: 300 });
    const prepared = await slow.prepareCreateEscrow(key, MIN_AMOUNT, MODEL);
    devnet.chain.faults.holdMempool = true;
    try {
      await expect(slow.broadcast(prepared)).rejects.toMatchObject({ kind: 'timeout', detail: { txHash: prepared.txHash } });
    } finally {
      devnet.chain.faults.holdMempool = false;
    }
    // Reconciliation by hash: the same bytes again end in one outcome.
    expect((await client.broadcast(prepared)).code).toBe(0);
    slow.close();
  });
});
