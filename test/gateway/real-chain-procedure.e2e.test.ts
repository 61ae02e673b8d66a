/**
 * Issue 27's operator procedure against the devnet as the real chain's twin, end to end over HTTP:
 * deposits across the uint64 range, a creator not on the allowlist (a clear 4xx, no tx, no fee),
 * a create left pending (202) followed by two creates back to back with an ordered tx from another
 * tool (CosmJS, as the chain's CLI would) in between, and a settle that reports the chain's
 * `remainder` with deposit = total_payout + remainder (real-network.md §2; keeper event
 * devshard_escrow_settled, inference-chain/x/inference/keeper/msg_server_settle_devshard_escrow.go).
 */
import { fromHex } from '@cosmjs/encoding';
import { DirectSecp256k1Wallet } from '@cosmjs/proto-signing';
import { SigningStargateClient } from '@cosmjs/stargate';
import { TxRaw } from 'cosmjs-types/cosmos/tx/v1beta1/tx';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devshardRegistry, MsgCreateDevshardEscrowType } from '../../src/chain/messages.js';
import { startFaultGateway, type FaultGateway } from '../faults/helpers.js';
import { MODEL } from '../helpers/gateway.js';

const U64_MAX = (1n << 64n) - 1n;

describe('the operator procedure against the real chain twin', () => {
  let gw: FaultGateway;
  const chain = () => gw.devnet.chain;
  const creates = () => Object.values(chain().state.txs).filter((t) => JSON.stringify(t).includes('MsgCreateDevshardEscrow')).length;
  const escrowOnChain = async (id: string) =>
    ((await (await fetch(`${gw.devnet.url}/productscience/inference/inference/devshard_escrow/${id}`)).json()) as { escrow: { amount: string; settled: boolean } | null; found: boolean });
  const create = (amount: string | bigint, privateKey = gw.keys.privateKey) =>
    gw.call('/v1/admin/escrows', { body: { amount: amount.toString(), model_id: MODEL, private_key: privateKey, register: true } });

  beforeAll(async () => {
    // Funds for a deposit of 2^64 - 1 plus fees; the devnet's max_amount is the whole uint64 range.
    // A short broadcast wait, so a held mempool answers 202 (pending) quickly.
    gw = await startFaultGateway({ env: { DEVNET_CREATOR_FUNDS: '40000000000000000000' } });
  });
  afterAll(() => gw?.dispose());

  it('refuses a creator not on allowed_creator_addresses before any tx: 403 naming the rule, no fee spent', async () => {
    const outsider = gw.devnet.notAllowlisted;
    const [txs, balance] = [creates(), chain().balanceOf(outsider.address)];
    const r = await create('10000000000', outsider.privateKeyHex);
    expect(r.status, r.text).toBe(403);
    expect(r.json.error.code).toBe('not_allowlisted');
    expect(r.json.error.message).toContain('no fee spent');
    expect(creates()).toBe(txs);
    expect(chain().balanceOf(outsider.address)).toBe(balance);
  });

  it('creates escrows with deposits across the uint64 range, each exact on chain', async () => {
    for (const amount of [(1n << 31n) + 5n, 3_000_000_000n, (1n << 32n) - 1n, (1n << 32n) + 7n, 1n << 53n, (1n << 53n) + 1n, 1n << 63n, U64_MAX]) {
      const r = await create(amount);
      expect(r.status, r.text).toBe(200);
      expect((await escrowOnChain(String(r.json.id))).escrow?.amount).toBe(amount.toString());
    }
  });

  it('a create left pending (202), then two creates back to back with an ordered tx from another tool in between: all land, none twice', async () => {
    const before = Object.keys(chain().state.escrows).length;
    chain().faults.holdMempool = true;
    let pending;
    try {
      pending = await create('10000000000');
    } finally {
      chain().faults.holdMempool = false;
    }
    expect(pending.status, pending.text).toBe(202);
    const creator = gw.devnet.creators[0]!;
    const [a, b] = await Promise.all([create('10000000000'), create('10000000001')]);
    // The chain's CLI (here CosmJS) sends an ordinary ordered tx from the same account.
    const account = (await (await fetch(`${gw.devnet.url}/cosmos/auth/v1beta1/accounts/${creator.address}`)).json()) as { account: { sequence: string; account_number: string } };
    const wallet = await DirectSecp256k1Wallet.fromKey(fromHex(creator.privateKeyHex), 'gonka');
    const cli = await SigningStargateClient.connectWithSigner(gw.devnet.rpcUrl, wallet, { registry: devshardRegistry(), broadcastPollIntervalMs: 50 });
    const ordered = await cli.sign(
      creator.address,
      [{ typeUrl: MsgCreateDevshardEscrowType.typeUrl, value: MsgCreateDevshardEscrowType.create({ creator: creator.address, amount: 10_000_000_000n, modelId: MODEL }) }],
      { amount: [{ denom: 'ngonka', amount: '1000000' }], gas: '500000' },
      '',
      { accountNumber: BigInt(account.account.account_number), sequence: Number(account.account.sequence), chainId: gw.devnet.chainId },
    );
    expect((await cli.broadcastTx(TxRaw.encode(ordered).finish())).code).toBe(0);
    cli.disconnect();
    const c = await create('10000000002');
    for (const r of [a, b, c]) expect(r.status, r.text).toBe(200);
    // The pending create lands and is recorded once, by its hash.
    const deadline = Date.now() + 10_000;
    const landed = () => [...gw.store.readAll()].some((e) => e.type === 'EscrowCreated' && (e.data as { txHash: string }).txHash === pending.json.tx_hash);
    while (!landed() && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    expect(landed()).toBe(true);
    expect(Object.keys(chain().state.escrows).length).toBe(before + 5); // pending, a, b, the CLI's, c
    expect(new Set([a, b, c].map((r) => r.json.id)).size).toBe(3);
  });

  it('settles and reports the chain remainder: deposit = total_payout + remainder', async () => {
    const r = await create('10000000000');
    const id = String(r.json.id);
    for (let i = 0; i < 3; i++) {
      const chat = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: `settle ${i}` }], max_tokens: 8 } });
      expect(chat.status, chat.text).toBe(200);
    }
    const settled = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { private_key_env: 'DEVSHARD_PRIVATE_KEY' } });
    expect(settled.status, settled.text).toBe(200);
    const tx = (await (await fetch(`${gw.devnet.url}/cosmos/tx/v1beta1/txs/${settled.json.tx_hash}`)).json()) as { tx_response: { events: { type: string; attributes: { key: string; value: string }[] }[] } };
    const event = tx.tx_response.events.find((e) => e.type === 'devshard_escrow_settled')!;
    const attr = (k: string) => event.attributes.find((x) => x.key === k)!.value;
    expect(settled.json.refund).toBe(attr('remainder'));
    expect(settled.json.total_payout).toBe(attr('total_payout'));
    expect(BigInt(attr('total_payout')) + BigInt(attr('remainder'))).toBe(10_000_000_000n);
    expect(BigInt(attr('remainder'))).toBeGreaterThan(0n);
    expect((await escrowOnChain(id)).escrow?.settled).toBe(true);
  });
});
