/**
 * Chain faults: the devnet refuses connections (rpcDown), holds its mempool (timeouts), says no
 * (error codes), and includes a tx whose broadcast answer is lost (dropBroadcastResponse). The
 * gateway answers clearly, records what happened, retries by tx hash (the recorded bytes, same
 * hash), reconciles in the background, and never creates or settles twice (checked on chain and in
 * the log). Chat never touches the chain, so a chain outage does not stop chat.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { escrowStream } from '../../src/events/catalog.js';
import { chainEscrows, createEscrowViaApi, createTxsOnChain, MODEL, settleTxsOnChain, startFaultGateway, streamTypes, waitFor, type FaultGateway } from './helpers.js';

let gw: FaultGateway;
const chat = (content = 'hi') => gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content }], max_tokens: 8 } });
const createBody = (amount = '10000000000') => ({ amount, model_id: MODEL, private_key: gw.keys.privateKey, chain_id: 'shardgate-devnet', register: true });
const faults = () => gw.devnet.chain.faults;

function clearFaults(): void {
  faults().rpcDown = false;
  faults().holdMempool = false;
  faults().dropBroadcastResponse = false;
}

/**
 * Every create intent with what became of it: the intent stream (escrow-create-<uuid>) holds the
 * request and a failure; a success is EscrowCreated (naming the intent) in the escrow's stream.
 */
function intentStreams(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const r of gw.store.readAll()) {
    if (r.streamId.startsWith('escrow-create-')) out.set(r.streamId, [...(out.get(r.streamId) ?? []), r.type]);
    const intentId = (r.data as { intentId?: string }).intentId;
    if (r.type === 'EscrowCreated' && intentId) out.set(`escrow-create-${intentId}`, [...(out.get(`escrow-create-${intentId}`) ?? []), r.type]);
  }
  return out;
}

async function finalizeAndSettle(id: string) {
  expect((await gw.call(`/devshard/${id}/v1/finalize`, { method: 'POST' })).status).toBe(200);
  return gw.call(`/v1/admin/devshards/${id}/settle`, { body: {} });
}

describe('chain faults', () => {
  beforeAll(async () => {
    gw = await startFaultGateway();
  });
  afterAll(async () => {
    clearFaults();
    await gw?.dispose();
  });

  it('rpc down: create answers 502 unreachable and records nothing; chat keeps serving', async () => {
    const id = await createEscrowViaApi(gw as never);
    const before = chainEscrows(gw.devnet).length;
    const intents = intentStreams().size;
    faults().rpcDown = true;
    try {
      const r = await gw.call('/v1/admin/escrows', { body: createBody() });
      expect(r.status).toBe(502);
      expect(r.json.error).toMatchObject({ code: 'unreachable', type: 'upstream_error' });
      expect(r.json.error.message).toMatch(/failed on chain: unreachable/);
      // chat does not touch the chain
      for (let i = 0; i < 3; i++) expect((await chat(`down ${i}`)).status).toBe(200);
      expect((await gw.call('/v1/status', { key: 'none' })).status).toBe(200);
    } finally {
      faults().rpcDown = false;
    }
    expect(intentStreams().size).toBe(intents); // nothing was signed, so nothing was recorded
    expect(chainEscrows(gw.devnet).length).toBe(before);
    // settle while the node is down: the outcome is unknown, nothing is guessed
    faults().rpcDown = true;
    let settle;
    try {
      settle = await finalizeAndSettle(id);
    } finally {
      faults().rpcDown = false;
    }
    expect(settle.status).toBe(502);
    expect(settle.json.error.code).toBe('unreachable');
    expect(streamTypes(gw, id)).not.toContain('EscrowSettleRequested');
    // once the node is back, the same settle goes through exactly once
    const again = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: {} });
    expect(again.status).toBe(200);
    expect(settleTxsOnChain(gw.devnet, id)).toBe(1);
    expect(streamTypes(gw, id).filter((t) => t === 'EscrowSettled')).toHaveLength(1);
  });

  it('held mempool: create answers 202 pending with its tx hash; included later, reconciled by hash, created once', async () => {
    const creates = createTxsOnChain(gw.devnet);
    faults().holdMempool = true;
    let r;
    try {
      r = await gw.call('/v1/admin/escrows', { body: createBody() });
    } finally {
      faults().holdMempool = false;
    }
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ status: 'pending', tx_hash: expect.stringMatching(/^[0-9A-F]{64}$/) });
    const stream = `escrow-create-${r.json.intent_id}`;
    expect(intentStreams().get(stream)).toEqual(['EscrowCreateRequested']);
    // the mempool is released: the background reconciler finds the tx by hash and records it
    await waitFor(() => intentStreams().get(stream)!.length >= 2, 'the held create to be reconciled');
    expect(intentStreams().get(stream)).toEqual(['EscrowCreateRequested', 'EscrowCreated']);
    const created = gw.ctx.projections.pool.all().find((e) => streamTypes(gw, e.escrowId)[0] === "EscrowCreated" && (gw.store.readStream(escrowStream(e.escrowId))[0]!.data as { txHash: string }).txHash === r!.json.tx_hash)!;
    expect(created.state).toBe("active");
    expect(createTxsOnChain(gw.devnet)).toBe(creates + 1);
    expect(gw.devnet.chain.findTx(r.json.tx_hash)!.result.code).toBe(0);
    expect(gw.logs.some((l) => /reconciled chain intents by tx hash/.test(l))).toBe(true);
    // routable: chat goes through it (or another active escrow)
    expect((await chat()).status).toBe(200);
    expect(created.escrowId).toBeTruthy();
  });

  it('held mempool: settle answers 202 settling; the reconciler records it once the tx is included', async () => {
    const id = await createEscrowViaApi(gw as never);
    expect((await gw.call(`/devshard/${id}/v1/finalize`, { method: 'POST' })).status).toBe(200);
    faults().holdMempool = true;
    let r;
    try {
      r = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: {} });
      expect(r.status).toBe(202);
      expect(r.json).toMatchObject({ status: 'settling', settled: false, tx_hash: expect.stringMatching(/^[0-9A-F]{64}$/) });
      // asking again while it is unknown does not sign a second settle
      const again = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: {} });
      expect(again.json.status).toBe('settling');
      expect(again.json.tx_hash).toBe(r.json.tx_hash);
    } finally {
      faults().holdMempool = false;
    }
    // The projection, not the engine: the engine's decided state runs one commit ahead of the log.
    await waitFor(() => gw.ctx.projections.pool.escrow(id)?.value === 'settled', 'the settle to be reconciled');
    expect(settleTxsOnChain(gw.devnet, id)).toBe(1);
    expect(streamTypes(gw, id).filter((t) => t === 'EscrowSettleRequested')).toHaveLength(1);
    expect(streamTypes(gw, id).filter((t) => t === 'EscrowSettled')).toHaveLength(1);
    expect((await gw.chainClient.escrow(id))!.settled).toBe(true);
  });

  for (const mode of ['error', 'reset', 'hang'] as const) {
    it(`lost broadcast answer (${mode}): the tx is included; create is answered from the hash, once`, async () => {
      const creates = createTxsOnChain(gw.devnet);
      faults().dropBroadcastResponse = mode;
      let r;
      try {
        r = await gw.call('/v1/admin/escrows', { body: createBody() });
      } finally {
        faults().dropBroadcastResponse = false;
      }
      expect(r.status, r.text).toBe(200);
      expect(r.json.escrow_id).toBeTruthy();
      expect(createTxsOnChain(gw.devnet)).toBe(creates + 1);
      expect(gw.devnet.chain.findTx(r.json.tx_hash)!.result.code).toBe(0);
      expect(streamTypes(gw, r.json.id).slice(0, 2)).toEqual(['EscrowCreated', 'EscrowRegistered']);
    });
  }

  it('lost broadcast answer on settle: settled once, on chain and in the log', async () => {
    const id = await createEscrowViaApi(gw as never);
    expect((await chat()).status).toBe(200);
    expect((await gw.call(`/devshard/${id}/v1/finalize`, { method: 'POST' })).status).toBe(200);
    faults().dropBroadcastResponse = 'error';
    let r;
    try {
      r = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: {} });
    } finally {
      faults().dropBroadcastResponse = false;
    }
    expect([200, 202]).toContain(r.status);
    await waitFor(() => gw.ctx.projections.pool.escrow(id)?.value === 'settled', 'settled');
    expect(settleTxsOnChain(gw.devnet, id)).toBe(1);
    expect(streamTypes(gw, id).filter((t) => t === 'EscrowSettled')).toHaveLength(1);
    // settling again is answered from the log, nothing is sent
    const again = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: {} });
    expect(again.json).toMatchObject({ status: 'settled', already: true });
    expect(settleTxsOnChain(gw.devnet, id)).toBe(1);
  });

  it('pre-checkable refusals are answered before any tx (4xx); a chain refusal is recorded and answered as 422 with the chain reason', async () => {
    const creates = createTxsOnChain(gw.devnet);
    const intentsBefore = intentStreams().size;
    const poor = await gw.call('/v1/admin/escrows', { body: createBody('18000000000000000000') });
    expect(poor.status).toBe(400);
    expect(poor.json.error.code).toBe('insufficient_funds');
    const stranger = await gw.call('/v1/admin/escrows', { body: { ...createBody(), private_key: gw.devnet.notAllowlisted.privateKeyHex } });
    expect(stranger.status, stranger.text).toBe(403);
    expect(stranger.json.error.code).toBe('not_allowlisted');
    expect(intentStreams().size).toBe(intentsBefore);
    // The per-epoch limit has no count to pre-check: the chain refuses it, and the refusal is recorded.
    const p = gw.devnet.chain.state.params;
    const limit = p.maxEscrowsPerEpoch;
    p.maxEscrowsPerEpoch = gw.devnet.chain.state.escrowsPerEpoch[gw.devnet.chain.epoch().epochIndex] ?? 0;
    try {
      const full = await gw.call('/v1/admin/escrows', { body: createBody() });
      expect(full.status, full.text).toBe(422);
      expect(full.json.error.code).toBe('epoch_limit');
      expect(full.json.error.message).toMatch(/epoch \d+ already has \d+ escrows \(max \d+\)/);
    } finally {
      p.maxEscrowsPerEpoch = limit;
    }
    expect(createTxsOnChain(gw.devnet)).toBe(creates);
    const failed = [...intentStreams().values()].filter((t) => t.at(-1) === 'EscrowCreateFailed');
    expect(failed.length).toBeGreaterThanOrEqual(1);
    // no create intent is left without an outcome
    await waitFor(() => [...intentStreams().values()].every((t) => t.length >= 2), 'every intent to have an outcome');
  });

  it('a restart with an unresolved create intent reconciles it by hash (no second create)', async () => {
    const creates = createTxsOnChain(gw.devnet);
    faults().holdMempool = true;
    const r = await gw.call('/v1/admin/escrows', { body: createBody() });
    expect(r.status).toBe(202);
    // the gateway stops before the tx is included; the chain includes it while the gateway is down
    const stopped = gw.stop();
    await stopped;
    faults().holdMempool = false;
    await gw.devnet.chain.waitForHeight(gw.devnet.chain.height + 2);
    gw = await gw.restart();
    const stream = `escrow-create-${r.json.intent_id}`;
    await waitFor(() => intentStreams().get(stream)!.length >= 2, 'the intent outcome');
    expect(intentStreams().get(stream)).toEqual(['EscrowCreateRequested', 'EscrowCreated']);
    expect(createTxsOnChain(gw.devnet)).toBe(creates + 1);
    expect(gw.logs.some((l) => /reconciled/.test(l))).toBe(true);
  });
});
