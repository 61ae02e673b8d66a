import { fromBase64, fromHex, toBase64 } from '@cosmjs/encoding';
import { DirectSecp256k1Wallet } from '@cosmjs/proto-signing';
import { SigningStargateClient } from '@cosmjs/stargate';
import { TxRaw } from 'cosmjs-types/cosmos/tx/v1beta1/tx';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { privateKeyBytes } from '../../src/chain/keys.js';
import { devshardRegistry, MsgCreateDevshardEscrowType } from '../../src/chain/messages.js';
import { decodeTx, signTx } from '../../src/chain/tx.js';
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

  it('sends unordered txs: two creates back to back, an ordered tx from another tool in between, and the next create still works', async () => {
    const creator = await client.addressOf(key);
    const first = await client.prepareCreateEscrow(key, MIN_AMOUNT, MODEL);
    const second = await client.prepareCreateEscrow(key, MIN_AMOUNT, MODEL);
    const tx = decodeTx(fromBase64(first.txBytes));
    expect(tx.body.unordered).toBe(true);
    expect(tx.authInfo.signerInfos[0]?.sequence).toBe(0n);
    expect(tx.authInfo.fee?.gasLimit).toBe(500_000n);
    expect(tx.authInfo.fee?.amount).toEqual([expect.objectContaining({ denom: 'ngonka', amount: '1000000' })]);
    const ttl = Number(tx.body.timeoutTimestamp!.seconds) * 1000 - Date.now();
    expect(ttl).toBeGreaterThan(8 * 60_000);
    expect(ttl).toBeLessThanOrEqual(9 * 60_000);

    // Another tool (the chain's CLI, here CosmJS) sends an ordinary ordered tx with the account's sequence.
    const account = (await (await fetch(`${devnet.url}/cosmos/auth/v1beta1/accounts/${creator}`)).json()) as { account: { sequence: string } };
    const wallet = await DirectSecp256k1Wallet.fromKey(fromHex(key), 'gonka');
    const cli = await SigningStargateClient.connectWithSigner(devnet.rpcUrl, wallet, { registry: devshardRegistry(), broadcastPollIntervalMs: 50 });
    const ordered = await cli.sign(
      creator,
      [{ typeUrl: MsgCreateDevshardEscrowType.typeUrl, value: MsgCreateDevshardEscrowType.create({ creator, amount: MIN_AMOUNT, modelId: MODEL }) }],
      { amount: [{ denom: 'ngonka', amount: '1000000' }], gas: '500000' },
      '',
      { accountNumber: BigInt(devnet.chain.state.accounts[creator]!.accountNumber), sequence: Number(account.account.sequence), chainId: devnet.chainId },
    );
    const cliOutcome = await cli.broadcastTx(TxRaw.encode(ordered).finish());
    expect(cliOutcome.code).toBe(0);
    cli.disconnect();

    const [a, b] = await Promise.all([client.broadcast(second), client.broadcast(first)]);
    expect([a.code, b.code]).toEqual([0, 0]);
    const third = await client.broadcast(await client.prepareCreateEscrow(key, MIN_AMOUNT, MODEL));
    expect(third.code).toBe(0);
    expect(new Set([a, b, third].map((o) => client.createdEscrowId(o))).size).toBe(3);
  });

  it('refuses a replayed unordered tx while it is unexpired, and an unordered tx without or beyond its timeout', async () => {
    const prepared = await client.prepareCreateEscrow(key, MIN_AMOUNT, MODEL);
    await client.broadcast(prepared);
    const before = escrowCount();
    // The same bytes again after inclusion: the chain's replay protection answers, the client finds the first outcome.
    const post = async (txBytes: string) =>
      ((await (await fetch(`${devnet.url}/cosmos/tx/v1beta1/txs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ tx_bytes: txBytes, mode: 'BROADCAST_MODE_SYNC' }),
      })).json()) as { tx_response: { code: number; codespace: string; raw_log: string; txhash: string } }).tx_response;
    expect(await post(prepared.txBytes)).toMatchObject({ code: 19, codespace: 'sdk', txhash: prepared.txHash });
    expect(escrowCount()).toBe(before);

    const k = privateKeyBytes(key);
    const accountNumber = BigInt(devnet.chain.state.accounts[await client.addressOf(key)]!.accountNumber);
    const msg = { typeUrl: MsgCreateDevshardEscrowType.typeUrl, value: MsgCreateDevshardEscrowType.encode({ creator: await client.addressOf(key), amount: MIN_AMOUNT, modelId: MODEL }) };
    const fee = { denom: 'ngonka', amount: 1_000_000n, gasLimit: 500_000n };
    const sign = (timeoutMs: number) =>
      toBase64(signTx({ privateKey: k, chainId: devnet.chainId, accountNumber, messages: [msg], fee, ordering: { unordered: true, timeoutMs } }).bytes);
    expect(await post(sign(Date.now() - 60_000))).toMatchObject({ code: 18, raw_log: expect.stringContaining('unordered transaction has a timeout_timestamp that has already passed') });
    expect(await post(sign(Date.now() + 11 * 60_000))).toMatchObject({ code: 18, raw_log: expect.stringContaining('unordered tx ttl exceeds 10m0s') });
    expect(await post(sign(0))).toMatchObject({ code: 18, raw_log: expect.stringContaining('unordered transaction must have timeout_timestamp set') });
    // Different bytes (another message) with the same signer and timeout: the same replay key.
    const t = Date.now() + 5 * 60_000;
    expect(await post(sign(t))).toMatchObject({ code: 0 });
    const other = { ...msg, value: MsgCreateDevshardEscrowType.encode({ creator: await client.addressOf(key), amount: MIN_AMOUNT + 1n, modelId: MODEL }) };
    const clash = toBase64(signTx({ privateKey: k, chainId: devnet.chainId, accountNumber, messages: [other], fee, ordering: { unordered: true, timeoutMs: t } }).bytes);
    expect(await post(clash)).toMatchObject({ code: 18, raw_log: expect.stringContaining('already used timeout') });
  });

  it('waits for an earlier prepared tx when a later one is broadcast first', async () => {
    const first = await client.prepareCreateEscrow(key, MIN_AMOUNT, MODEL);
    const second = await client.prepareCreateEscrow(key, MIN_AMOUNT, MODEL);
    const later = client.broadcast(second);
    // A head start for the later tx; a fixed wait is fine: in either order both must be taken (the assertion).
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
