/**
 * Pre-checks before any fee is spent: a create the chain must refuse (creator not allowlisted,
 * amount outside [min_amount, max_amount], balance below amount + fee) is answered 4xx naming the
 * rule and the remedy, and nothing is signed or sent: no tx reaches the devnet, the balance is
 * unchanged. Settle-time rules (settler allowlisted, version tag approved) as a unit.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { settleRefusal } from '../../src/chain/prechecks.js';
import type { EscrowParams } from '../../src/chain/port.js';
import { disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

describe('create pre-checks (no tx, no fee)', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ env: { DEVNET_MAX_AMOUNT: '50000000000' } });
  });
  afterAll(() => disposeTestGateway(gw));

  const txCount = () => Object.keys(gw.devnet!.chain.state.txs).length;
  const balance = (a: string) => gw.devnet!.chain.balanceOf(a);
  const create = (amount: string, key = gw.keys.privateKey) =>
    gw.call('/v1/admin/escrows', { body: { amount, model_id: MODEL, private_key: key, chain_id: 'shardgate-devnet' } });

  it('refuses a creator not on allowed_creator_addresses (403) and names the remedy', async () => {
    const outsider = gw.devnet!.notAllowlisted;
    const [txs, before] = [txCount(), balance(outsider.address)];
    const r = await create('10000000000', outsider.privateKeyHex);
    expect(r.status, r.text).toBe(403);
    expect(r.json.error).toMatchObject({ code: 'not_allowlisted', type: 'invalid_request_error' });
    expect(r.json.error.message).toMatch(/allowed_creator_addresses.*allowlisted creator key/);
    expect(r.json.error.message).toContain('no fee spent');
    expect(txCount()).toBe(txs);
    expect(balance(outsider.address)).toBe(before);
    expect(r.text).not.toContain(outsider.privateKeyHex);
  });

  it('refuses an amount outside [min_amount, max_amount] with the chain\'s own text (400)', async () => {
    const creator = gw.devnet!.creatorAddresses[0]!;
    const [txs, before] = [txCount(), balance(creator)];
    for (const amount of ['1', '50000000001']) {
      const r = await create(amount);
      expect(r.status, r.text).toBe(400);
      expect(r.json.error.code).toBe('amount_out_of_range');
      expect(r.json.error.message).toContain(`escrow amount ${amount} out of range [1000000000, 50000000000]`);
    }
    expect(txCount()).toBe(txs);
    expect(balance(creator)).toBe(before);
  });

  it('refuses a deposit the balance cannot cover with the fee (400)', async () => {
    gw.devnet!.chain.state.params.maxAmount = 2n ** 64n - 1n;
    const creator = gw.devnet!.creatorAddresses[0]!;
    const [txs, before] = [txCount(), balance(creator)];
    const r = await create(String(before - 1_000_000n + 1n)); // amount + fee one above the balance
    expect(r.status, r.text).toBe(400);
    expect(r.json.error.code).toBe('insufficient_funds');
    expect(r.json.error.message).toMatch(/plus the transaction fee 1000000.*Fund the account or lower the amount/);
    expect(txCount()).toBe(txs);
    expect(balance(creator)).toBe(before);
  });
});

describe('settle pre-checks', () => {
  const params = (allowed: string[], versions: string[]): EscrowParams => ({
    minAmount: 1n, maxAmount: 10n, maxEscrowsPerEpoch: 1, groupSize: 3, maxNonce: 1, allowedCreatorAddresses: allowed,
    tokenPrice: 1n, approvedVersions: versions, createDevshardFee: 0n, feePerNonce: 0n,
  });
  it('the settler must be allowlisted when the list is non-empty', () => {
    expect(settleRefusal(params(['gonka1a'], []), { settler: 'gonka1b', version: 'v2' })).toMatchObject({ kind: 'not_allowlisted', detail: { precheck: true } });
    expect(settleRefusal(params([], []), { settler: 'gonka1b', version: 'v2' })).toBeUndefined();
  });
  it('the version tag must be in approved_versions[].name when the list is non-empty', () => {
    const refused = settleRefusal(params([], ['v1']), { settler: 'gonka1b', version: 'v2' });
    expect(refused).toMatchObject({ kind: 'version_not_approved' });
    expect(refused!.message).toContain('settlement version "v2" is not listed in approved devshard versions (listed: v1)');
    expect(settleRefusal(params([], ['v1', 'v2']), { settler: 'gonka1b', version: 'v2' })).toBeUndefined();
  });
});
