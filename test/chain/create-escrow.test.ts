import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CosmosChainClient } from '../../src/chain/cosmos-client.js';
import type { Devnet } from '../../src/devnet/chain/index.js';
import { clientFor, CREATOR_KEYS, MIN_AMOUNT, MODEL, startDevnetAndClient, startTestDevnet, stopDevnetAndClient } from './helpers.js';

describe('create escrow through the client against a devnet', () => {
  let devnet: Devnet;
  let client: CosmosChainClient;
  beforeAll(async () => ({ devnet, client } = await startDevnetAndClient()));
  afterAll(() => stopDevnetAndClient({ devnet, client }));

  it('locks the deposit, binds the escrow to the current epoch and assigns every host a slot', async () => {
    const key = CREATOR_KEYS[0]!;
    const creator = await client.addressOf(key);
    const before = await client.balance(creator);
    const { escrowId, escrow, height } = await client.createEscrow(key, 5n * MIN_AMOUNT, MODEL);

    expect(escrow).toMatchObject({ id: escrowId, creator, amount: 5n * MIN_AMOUNT, settled: false, modelId: MODEL });
    expect(escrow.epochIndex).toBe(Math.floor(height / 600));
    expect(escrow.slots).toEqual(
      devnet.hosts.map((h) => ({ slotId: h.index, host: h.address, url: `${devnet.url}/hosts/${h.index}` })),
    );
    expect(await client.balance(creator)).toBe(before - 5n * MIN_AMOUNT - client.feeAmount);
    expect(await client.escrow(escrowId)).toEqual(escrow);
  });

  it('refuses a creator that is not on the allowlist, charging only the fee', async () => {
    const outsider = devnet.notAllowlisted;
    const before = await client.balance(outsider.address);
    const outcome = await client.broadcast(await client.prepareCreateEscrow(outsider.privateKeyHex, MIN_AMOUNT, MODEL));
    expect(outcome.code).not.toBe(0);
    expect(outcome.codespace).toBe('inference');
    expect(outcome.code).toBe(1173);
    expect(outcome.rawLog).toContain('address is not allowed to create devshard escrows for devshards');
    expect(client.errorOf(outcome).kind).toBe('not_allowlisted');
    expect(await client.balance(outsider.address)).toBe(before - client.feeAmount);
    await expect(client.createEscrow(outsider.privateKeyHex, MIN_AMOUNT, MODEL)).rejects.toMatchObject({ kind: 'not_allowlisted' });
  });

  it('refuses a deposit below min_amount with the keeper\'s plain text (codespace undefined, code 1)', async () => {
    await expect(client.createEscrow(CREATOR_KEYS[0]!, MIN_AMOUNT - 1n, MODEL)).rejects.toMatchObject({
      kind: 'amount_out_of_range',
      detail: { codespace: 'undefined', code: 1, rawLog: expect.stringContaining(`escrow amount ${MIN_AMOUNT - 1n} out of range [${MIN_AMOUNT}, 18446744073709551615]`) },
    });
  });

  it('takes deposits across the uint64 range (3,000,000,000 and 2^33 + 7 arrive intact)', async () => {
    for (const amount of [3_000_000_000n, 2n ** 33n + 7n]) {
      const { escrow } = await client.createEscrow(CREATOR_KEYS[0]!, amount, MODEL);
      expect(escrow.amount).toBe(amount);
    }
  });

  it('refuses a deposit larger than the creator holds', async () => {
    const key = CREATOR_KEYS[1]!;
    const before = await client.balance(await client.addressOf(key));
    await expect(client.createEscrow(key, before + 1n, MODEL)).rejects.toMatchObject({ kind: 'insufficient_funds' });
    expect(await client.balance(await client.addressOf(key))).toBe(before - client.feeAmount);
  });

  it('refuses a model the chain does not list', async () => {
    await expect(client.createEscrow(CREATOR_KEYS[0]!, MIN_AMOUNT, 'no/such-model')).rejects.toMatchObject({ kind: 'rejected' });
  });

  it('never reuses a sequence when one key prepares several txs at once', async () => {
    const key = CREATOR_KEYS[1]!;
    const results = await Promise.all([1, 2, 3].map(() => client.createEscrow(key, MIN_AMOUNT, MODEL)));
    expect(new Set(results.map((r) => r.escrowId)).size).toBe(3);
  });
});

describe('per-epoch escrow limit (chain-wide)', () => {
  let devnet: Devnet;
  let client: CosmosChainClient;
  beforeAll(async () => {
    devnet = await startTestDevnet({ maxEscrowsPerEpoch: 2, epochBlocks: 1000 });
    client = clientFor(devnet);
  });
  afterAll(async () => {
    client.close();
    await devnet.close();
  });

  it('counts escrows of all creators and opens again in the next epoch', async () => {
    await client.createEscrow(CREATOR_KEYS[0]!, MIN_AMOUNT, MODEL);
    await client.createEscrow(CREATOR_KEYS[1]!, MIN_AMOUNT, MODEL);
    await expect(client.createEscrow(CREATOR_KEYS[0]!, MIN_AMOUNT, MODEL)).rejects.toMatchObject({ kind: 'epoch_limit' });

    const { nextBoundaryHeight } = await client.epoch();
    devnet.chain.jumpTo(nextBoundaryHeight);
    const { escrow } = await client.createEscrow(CREATOR_KEYS[0]!, MIN_AMOUNT, MODEL);
    expect(escrow.epochIndex).toBe(1);
  });
});
