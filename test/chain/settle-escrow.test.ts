import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CosmosChainClient } from '../../src/chain/cosmos-client.js';
import type { Devnet } from '../../src/devnet/chain/index.js';
import { deterministicKeyHex, privateKeyBytes } from '../../src/chain/keys.js';
import { CREATOR_KEYS, MODEL, signedSettlement, startDevnetAndClient, stopDevnetAndClient } from './helpers.js';

const AMOUNT = 2_000_000_000n;

describe('settle escrow through the client against a devnet', () => {
  let devnet: Devnet;
  let client: CosmosChainClient;
  const key = CREATOR_KEYS[0]!;
  // Pruning off: this describe shows the keeper's own checks, wrong_epoch included, which the real
  // chain answers for a late settle that arrives before pruning removed the escrow.
  beforeAll(async () => ({ devnet, client } = await startDevnetAndClient({ pruneUnsettled: false })));
  afterAll(() => stopDevnetAndClient({ devnet, client }));

  const create = async () => (await client.createEscrow(key, AMOUNT, MODEL)).escrowId;

  it('pays the hosts, returns the rest to the creator and marks the escrow settled', async () => {
    const id = await create();
    const creator = await client.addressOf(key);
    const creatorBefore = await client.balance(creator);
    const hostsBefore = await Promise.all(devnet.hosts.map((h) => client.balance(h.address)));
    const costs = [100_000n, 250_000n, 0n];
    const fees = 5_000n;

    const result = await client.settleEscrow(key, signedSettlement(id, devnet.hosts, { costs, fees }));

    // As the keeper pays: each slot gets its cost plus fees / 3, the first fees % 3 slots one more
    // coin; total_payout includes the fee shares, and the remainder goes back to the creator.
    const refund = AMOUNT - 350_000n - fees;
    expect(result.refund).toBe(refund);
    expect(await client.balance(creator)).toBe(creatorBefore + refund - client.feeAmount);
    const hostsAfter = await Promise.all(devnet.hosts.map((h) => client.balance(h.address)));
    expect(hostsAfter.map((b, i) => b - hostsBefore[i]!)).toEqual([101_667n, 251_667n, 1_666n]);
    expect((await client.escrow(id))?.settled).toBe(true);
  });

  it('refuses signatures that are not from the slots\' hosts', async () => {
    const id = await create();
    const impostor = { ...devnet.hosts[1]!, privateKey: privateKeyBytes(deterministicKeyHex('impostor')) };
    const settlement = signedSettlement(id, devnet.hosts, { signers: [devnet.hosts[0]!, impostor, devnet.hosts[2]!] });
    await expect(client.settleEscrow(key, settlement)).rejects.toMatchObject({ kind: 'bad_signatures' });
    expect((await client.escrow(id))?.settled).toBe(false);
  });

  it('refuses fewer than 2/3+1 of the slots signing', async () => {
    const id = await create();
    const settlement = signedSettlement(id, devnet.hosts, { signers: devnet.hosts.slice(0, 2) });
    await expect(client.settleEscrow(key, settlement)).rejects.toMatchObject({ kind: 'bad_signatures' });
  });

  it('refuses a settler other than the creator', async () => {
    const id = await create();
    await expect(client.settleEscrow(CREATOR_KEYS[1]!, signedSettlement(id, devnet.hosts))).rejects.toMatchObject({
      kind: 'wrong_settler',
    });
    // Not on the allowlist: the registered refusal (inference/1173) comes first, for settle as for create.
    await expect(client.settleEscrow(devnet.notAllowlisted.privateKeyHex, signedSettlement(id, devnet.hosts))).rejects.toMatchObject({
      kind: 'not_allowlisted',
      detail: { codespace: 'inference', code: 1173 },
    });
  });

  it('refuses host costs plus fees above the deposit, and a nonce above max_nonce', async () => {
    const id = await create();
    await expect(client.settleEscrow(key, signedSettlement(id, devnet.hosts, { costs: [AMOUNT, 0n, 0n], fees: 1n }))).rejects.toMatchObject({
      kind: 'overspent',
    });
    await expect(client.settleEscrow(key, signedSettlement(id, devnet.hosts, { nonce: 1_000_001 }))).rejects.toMatchObject({
      kind: 'nonce_too_high',
    });
  });

  it('refuses to settle twice', async () => {
    const id = await create();
    await client.settleEscrow(key, signedSettlement(id, devnet.hosts));
    await expect(client.settleEscrow(key, signedSettlement(id, devnet.hosts, { seed: 'again' }))).rejects.toMatchObject({
      kind: 'already_settled',
    });
  });

  // k/devshard_settlement.go: the keeper's texts for a proof that is whole but wrong.
  const keeperText = (err: unknown) => String((err as { detail?: { rawLog?: string } }).detail?.rawLog ?? '').replace(/^.*message index: 0: /, '');

  it('refuses a second signature entry for a slot, and missed/invalid beyond what the slot was assigned, with the keeper\'s texts', async () => {
    const id = await create();
    const s = signedSettlement(id, devnet.hosts);
    const twice = { ...s, signatures: [...s.signatures, s.signatures[0]!] };
    expect(keeperText(await client.settleEscrow(key, twice).catch((e: unknown) => e))).toBe('duplicate signature for slot 0');
    // nonce 3, 3 slots: each slot was assigned 1 inference (slot 0 at nonce 3, slots 1, 2 at 1, 2)
    expect(keeperText(await client.settleEscrow(key, signedSettlement(id, devnet.hosts, { missed: [0, 2, 0] })).catch((e: unknown) => e))).toBe('slot 1 missed count 2 exceeds assigned per slot 1');
    expect(keeperText(await client.settleEscrow(key, signedSettlement(id, devnet.hosts, { missed: [1, 0, 0], invalid: [1, 0, 0] })).catch((e: unknown) => e))).toBe('slot 0 invalid count 1 exceeds completed per slot 0');
    // two of three slots sign: the quorum 2·3/3 + 1 = 3 is not met
    expect(keeperText(await client.settleEscrow(key, signedSettlement(id, devnet.hosts, { signers: devnet.hosts.slice(1) })).catch((e: unknown) => e))).toBe('insufficient quorum: 2 slot votes, need 3');
    // a 64-byte signature (the legacy format) under "v2" is not recovered
    const short = { ...s, signatures: s.signatures.map((x) => ({ ...x, signature: Buffer.from(x.signature, 'base64').subarray(0, 64).toString('base64') })) };
    expect(keeperText(await client.settleEscrow(key, short).catch((e: unknown) => e))).toBe('failed to recover address for slot 0: signature must be 65 bytes, got 64');
    expect((await client.escrow(id))?.settled).toBe(false);
    // the same settlement whole is accepted
    await client.settleEscrow(key, s);
    expect((await client.escrow(id))?.settled).toBe(true);
  });

  it('settles in the next epoch but not two epochs later (the keeper\'s wrong_epoch, with pruning off)', async () => {
    const nextEpoch = await create();
    const tooLate = await create();
    const { nextBoundaryHeight } = await client.epoch();
    devnet.chain.jumpTo(nextBoundaryHeight + 1);
    await client.settleEscrow(key, signedSettlement(nextEpoch, devnet.hosts));

    devnet.chain.jumpTo(nextBoundaryHeight + 600);
    await expect(client.settleEscrow(key, signedSettlement(tooLate, devnet.hosts))).rejects.toMatchObject({ kind: 'wrong_epoch' });
    expect((await client.escrow(tooLate))?.settled).toBe(false);
  });
});

describe('pruning (DEVNET_PRUNE_UNSETTLED): what not settling costs', () => {
  let devnet: Devnet;
  let client: CosmosChainClient;
  const key = CREATOR_KEYS[0]!;
  beforeAll(async () => ({ devnet, client } = await startDevnetAndClient({ epochBlocks: 100, pocBlocks: 10, autoBlocks: false, pruneUnsettled: true })));
  afterAll(() => stopDevnetAndClient({ devnet, client }));

  /** Resolves once a broadcast tx waits in the devnet's mempool (a condition polled every 5 ms, at most 10 s). */
  const inMempool = async () => {
    for (const until = Date.now() + 10_000; devnet.chain.mempoolSize === 0 && Date.now() < until; ) await new Promise((r) => setTimeout(r, 5));
    expect(devnet.chain.mempoolSize).toBeGreaterThan(0);
  };

  it('an escrow settled in the next epoch is paid out normally; one left unsettled is pruned two epochs later and its whole deposit goes to the hosts', async () => {
    const amount = 3_000_000_000n;
    const created = async () => {
      const p = client.createEscrow(key, amount, MODEL);
      // The block is made once the tx is in the mempool (blocks are manual here).
      await inMempool();
      devnet.chain.advance();
      return (await p).escrowId;
    };
    const settled = await created();
    const unsettled = await created();
    const { nextBoundaryHeight } = await client.epoch();
    devnet.chain.jumpTo(nextBoundaryHeight + 1);
    const settling = client.settleEscrow(key, signedSettlement(settled, devnet.hosts));
    await inMempool();
    devnet.chain.advance();
    expect((await settling).refund).toBe(amount); // no cost served: everything back

    const creator = await client.addressOf(key);
    const creatorBefore = await client.balance(creator);
    const hostsBefore = await Promise.all(devnet.hosts.map((h) => client.balance(h.address)));
    devnet.chain.jumpTo(nextBoundaryHeight + 100); // epoch of the escrows + 2
    expect(await client.escrow(unsettled)).toBeNull();
    const hostsAfter = await Promise.all(devnet.hosts.map((h) => client.balance(h.address)));
    // Split equally per unique slot address: 3 hosts, 1,000,000,000 each; the creator gets nothing back.
    expect(hostsAfter.map((b, i) => b - hostsBefore[i]!)).toEqual([1_000_000_000n, 1_000_000_000n, 1_000_000_000n]);
    expect(await client.balance(creator)).toBe(creatorBefore);
  });
});
