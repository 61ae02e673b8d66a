/**
 * devshardctl's transaction options in the create and settle bodies (gateway.go
 * adminCreateEscrowRequest, adminSettleEscrowRequest at gonka 8a35022): `chain_id`, `fee_denom`,
 * `fee_amount`, `gas_limit`. Through the real stack: the fee and gas given are the ones the tx on
 * the devnet carries (read back by hash over CometBFT RPC and decoded), and the log's intent holds
 * those very bytes; a wrong chain id or a fee the balance cannot pay is refused before any tx.
 */
import { fromBase64 } from '@cosmjs/encoding';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeTx, type DecodedTx } from '../../src/chain/tx.js';
import { openStream } from '../compat/open-stream.js';
import { createEscrowViaApi, disposeTestGateway, MODEL, startGatewayWithEscrow, startTestGateway, type TestGateway } from '../helpers/gateway.js';

/** The signed tx the devnet included under `hash` (CometBFT RPC `tx`), decoded. */
async function txOnChain(gw: TestGateway, hash: string): Promise<{ bytes: string; tx: DecodedTx }> {
  const res = await fetch(gw.devnet!.rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tx', params: { hash } }),
  });
  const body = (await res.json()) as { result?: { tx: string; tx_result: { code: number } } };
  if (!body.result) throw new Error(`tx ${hash} not on the devnet: ${JSON.stringify(body)}`);
  expect(body.result.tx_result.code).toBe(0);
  return { bytes: body.result.tx, tx: decodeTx(fromBase64(body.result.tx)) };
}

const feeOf = (tx: DecodedTx) => ({ coins: tx.authInfo.fee?.amount.map((c) => ({ denom: c.denom, amount: c.amount })), gasLimit: tx.authInfo.fee?.gasLimit });

const balanceOf = (gw: TestGateway, address: string): Promise<bigint> => gw.ctx.chain.balance(address);

const eventsOf = (gw: TestGateway, type: string) => [...gw.store.readAll()].filter((e) => e.type === type);

describe('admin create and settle: chain_id, fee_denom, fee_amount, gas_limit (devshardctl gateway.go)', () => {
  let gw: TestGateway;
  let creator: string;
  beforeAll(async () => {
    gw = (await startGatewayWithEscrow()).gw;
    creator = gw.devnet!.creators[0]!.address;
  });
  afterAll(() => disposeTestGateway(gw));

  it('create: the tx on chain carries the given fee and gas, and the recorded intent holds the bytes sent', async () => {
    const r = await gw.call('/v1/admin/escrows', {
      body: { amount: 10_000_000_000, model_id: MODEL, chain_id: gw.devnet!.chainId, fee_denom: 'ngonka', fee_amount: 1_234_567, gas_limit: 654_321 },
    });
    expect(r.status, r.text).toBe(200);
    const { bytes, tx } = await txOnChain(gw, r.json.tx_hash);
    expect(feeOf(tx)).toEqual({ coins: [{ denom: 'ngonka', amount: '1234567' }], gasLimit: 654_321n });
    const intent = eventsOf(gw, 'EscrowCreateRequested').at(-1)!.data as { txHash: string; txBytes: string };
    expect(intent.txHash).toBe(r.json.tx_hash);
    expect(intent.txBytes).toBe(bytes);
  });

  it('create: "" and 0 mean "not given", as devshardctl\'s omitempty fields: the configured fee and gas', async () => {
    const r = await gw.call('/v1/admin/escrows', { body: { amount: 10_000_000_000, model_id: MODEL, chain_id: '', fee_denom: '', fee_amount: 0, gas_limit: 0, register: false } });
    expect(r.status, r.text).toBe(200);
    const fee = gw.ctx.chain.txFee!();
    expect(feeOf((await txOnChain(gw, r.json.tx_hash)).tx)).toEqual({ coins: [{ denom: fee.denom, amount: fee.amount.toString() }], gasLimit: fee.gasLimit });
  });

  it('create: a uint64 above 2^53 as a decimal string is taken exactly', async () => {
    const r = await gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, gas_limit: '9007199254740993', register: false } });
    expect(r.status, r.text).toBe(200);
    expect(feeOf((await txOnChain(gw, r.json.tx_hash)).tx).gasLimit).toBe(9_007_199_254_740_993n);
  });

  it('settle: the settle tx carries the given fee and gas; the recorded intent holds the bytes sent', async () => {
    const id = (await gw.call('/v1/admin/escrows', { body: { amount: 10_000_000_000, model_id: MODEL } })).json.id as string;
    const r = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { chain_id: gw.devnet!.chainId, fee_denom: 'ngonka', fee_amount: 2_000_001, gas_limit: 777_777 } });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ id, escrow_id: Number(id), active: false, status: 'settled' });
    const { bytes, tx } = await txOnChain(gw, r.json.tx_hash);
    expect(feeOf(tx)).toEqual({ coins: [{ denom: 'ngonka', amount: '2000001' }], gasLimit: 777_777n });
    const intent = gw.store.readStream(`escrow-${id}`).filter((e) => e.type === 'EscrowSettleRequested').at(-1)!.data as { txHash: string; txBytes: string };
    expect(intent.txHash).toBe(r.json.tx_hash);
    expect(intent.txBytes).toBe(bytes);
  });

  it('a chain_id other than the gateway\'s: 400 wrong_chain_id naming both, and no tx (create and settle)', async () => {
    const before = await balanceOf(gw, creator);
    const intents = eventsOf(gw, 'EscrowCreateRequested').length;
    const create = await gw.call('/v1/admin/escrows', { body: { amount: 10_000_000_000, model_id: MODEL, chain_id: 'gonka-mainnet' } });
    expect(create.status).toBe(400);
    expect(create.json.error).toMatchObject({ type: 'invalid_request_error', code: 'wrong_chain_id', param: 'chain_id' });
    expect(create.json.error.message).toContain("'gonka-mainnet'");
    expect(create.json.error.message).toContain(`'${gw.devnet!.chainId}'`);
    expect(eventsOf(gw, 'EscrowCreateRequested')).toHaveLength(intents);

    const id = (await gw.call('/v1/admin/escrows', { body: { amount: 10_000_000_000, model_id: MODEL } })).json.id as string;
    const afterCreate = await balanceOf(gw, creator);
    const settle = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { chain_id: 'gonka-mainnet' } });
    expect(settle.status).toBe(400);
    expect(settle.json.error).toMatchObject({ code: 'wrong_chain_id', param: 'chain_id' });
    const types = gw.store.readStream(`escrow-${id}`).map((e) => e.type);
    expect(types).not.toContain('EscrowSettleRequested');
    expect(types).not.toContain('EscrowFinalized');
    expect((await gw.call(`/v1/admin/devshards/${id}`)).json.state).toBe('active');
    expect(await balanceOf(gw, creator)).toBe(afterCreate);
    expect(afterCreate).toBeLessThan(before); // the one create in between did spend
  });

  it('a fee the balance cannot pay: 400 insufficient_funds before any tx (create and settle)', async () => {
    const balance = await balanceOf(gw, creator);
    const intents = eventsOf(gw, 'EscrowCreateRequested').length;
    const create = await gw.call('/v1/admin/escrows', { body: { amount: 10_000_000_000, model_id: MODEL, fee_amount: (balance - 10_000_000_000n + 1n).toString() } });
    expect(create.status, create.text).toBe(400);
    expect(create.json.error.code).toBe('insufficient_funds');
    expect(create.json.error.message).toContain('no fee spent');
    expect(eventsOf(gw, 'EscrowCreateRequested')).toHaveLength(intents);
    expect(await balanceOf(gw, creator)).toBe(balance);

    const id = (await gw.call('/v1/admin/escrows', { body: { amount: 10_000_000_000, model_id: MODEL } })).json.id as string;
    const left = await balanceOf(gw, creator);
    const settle = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { fee_amount: (left + 1n).toString() } });
    expect(settle.status, settle.text).toBe(400);
    expect(settle.json.error.code).toBe('insufficient_funds');
    expect(settle.json.error.message).toContain(`${left + 1n}ngonka`);
    const types = gw.store.readStream(`escrow-${id}`).map((e) => e.type);
    expect(types).not.toContain('EscrowSettleRequested');
    expect(types).not.toContain('EscrowFinalized');
    expect(await balanceOf(gw, creator)).toBe(left);
  });

  it('out of range: fee_amount or gas_limit above 2^64−1, a JSON number above 2^53, a malformed or refused fee_denom: 400 and no tx', async () => {
    const intents = eventsOf(gw, 'EscrowCreateRequested').length;
    const base = { amount: 10_000_000_000, model_id: MODEL };
    const cases: [Record<string, unknown>, string, string | undefined][] = [
      [{ fee_amount: '18446744073709551616' }, 'fee_amount', 'invalid_fee_amount'],
      [{ gas_limit: '99999999999999999999' }, 'gas_limit', 'invalid_gas_limit'],
      [{ gas_limit: 2 ** 64 }, 'gas_limit', 'invalid_value'],
      [{ fee_amount: -1 }, 'fee_amount', undefined],
      [{ fee_amount: 1.5 }, 'fee_amount', undefined],
      [{ fee_denom: '1ngonka' }, 'fee_denom', undefined],
      [{ fee_denom: 'ng' }, 'fee_denom', undefined],
      [{ fee_denom: 'uatom' }, 'fee_denom', 'fee_denom_not_accepted'],
    ];
    const id = (await gw.call('/v1/admin/devshards')).json.data.find((d: { state: string }) => d.state === 'active').escrow_id as string;
    for (const [extra, param, code] of cases) {
      for (const [path, body] of [
        ['/v1/admin/escrows', { ...base, ...extra }],
        [`/v1/admin/devshards/${id}/settle`, extra],
      ] as const) {
        const r = await gw.call(path, { body });
        expect(r.status, `${path} ${JSON.stringify(extra)}: ${r.text}`).toBe(400);
        expect(r.json.error.type).toBe('invalid_request_error');
        expect(r.json.error.param).toBe(param);
        if (code) expect(r.json.error.code).toBe(code);
      }
    }
    expect(eventsOf(gw, 'EscrowCreateRequested')).toHaveLength(intents);
    expect(gw.store.readStream(`escrow-${id}`).map((e) => e.type)).not.toContain('EscrowSettleRequested');
  });
});

describe('a settle deferred while a request is in flight keeps its fee and gas', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ env: { DEVNET_TOKEN_DELAY_MS: '50' } });
  });
  afterAll(() => disposeTestGateway(gw));

  it('202 deferred; the drained settle signs with the fee and gas the admin gave', async () => {
    const id = await createEscrowViaApi(gw);
    const stream = await openStream(gw);
    expect((await gw.call(`/devshard/${id}/v1/finalize`, { method: 'POST' })).status).toBe(200);
    const s = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: { fee_amount: '3000003', gas_limit: 800_008 } });
    expect(s.status, s.text).toBe(202);
    expect(s.json).toMatchObject({ status: 'deferred' });
    const deferred = gw.store.readStream(`escrow-${id}`).find((e) => e.type === 'EscrowSettleDeferred')!;
    expect((deferred.data as { txFee?: unknown }).txFee).toEqual({ amount: '3000003', gasLimit: '800008' });
    await stream.finish();
    const deadline = Date.now() + 10_000;
    while ((await gw.call(`/v1/admin/devshards/${id}`)).json.state !== 'settled') {
      if (Date.now() > deadline) throw new Error('deferred settle did not complete');
      await new Promise((r) => setTimeout(r, 100));
    }
    const intent = gw.store.readStream(`escrow-${id}`).filter((e) => e.type === 'EscrowSettleRequested').at(-1)!.data as { txHash: string; txBytes: string };
    const { bytes, tx } = await txOnChain(gw, intent.txHash);
    expect(bytes).toBe(intent.txBytes);
    expect(feeOf(tx)).toEqual({ coins: [{ denom: 'ngonka', amount: '3000003' }], gasLimit: 800_008n });
  });
});
