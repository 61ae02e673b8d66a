/**
 * Nonces are reserved durably in blocks before requests use them (src/gateway/write/nonce-lease.ts), and a
 * chat's start and end commit after its answer. So:
 *  - every InferenceStarted nonce is covered by a NoncesReserved recorded before it, and a block
 *    serves many requests (no fsync per request in front of the host call);
 *  - a clean stop gives the unused nonces back (NoncesReleased): the next run continues right after
 *    the last used nonce (restart.test.ts checks the numbers);
 *  - over the devshard protocol a request leaves only once its diff is in the log: when the log stops
 *    taking writes, the request is not sent, the escrow takes no further request in this run, and the
 *    next start gives the reservation back (NoncesReleased) and continues at the next nonce, which
 *    the hosts accept (nothing skipped, nothing reused); settle conserves the deposit on chain.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedEvent } from '../../src/events/envelope.js';
import { NONCE_BLOCK } from '../../src/gateway/write/nonce-lease.js';
import { generateKeys } from '../../src/config/index.js';
import { startDevnet, type Devnet } from '../../src/devnet/chain/index.js';
import { createEscrowViaApi, disposeTestGateway, httpCaller, MODEL, startGatewayWithEscrow, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { requestRecords } from '../helpers/request-records.js';

const chatBody = (content: string, stream = false) => ({ model: MODEL, messages: [{ role: 'user', content }], max_tokens: 10, stream });

function escrowLog(gw: TestGateway, escrowId: string): RecordedEvent[] {
  return requestRecords(gw.store.readStream(`escrow-${escrowId}`));
}

describe('nonce reservations', () => {
  let gw: TestGateway;
  let escrowId: string;

  beforeAll(async () => ({ gw, escrowId } = await startGatewayWithEscrow()));
  afterAll(() => disposeTestGateway(gw));

  it('every started nonce is within a reservation recorded before it; one block serves many requests', async () => {
    const n = NONCE_BLOCK / 2 + 40; // crosses the half-block mark, so a second block is taken ahead of need
    for (let i = 0; i < n; i += 8) {
      const rs = await Promise.all(Array.from({ length: Math.min(8, n - i) }, (_, k) => gw.call('/v1/chat/completions', { body: chatBody(`r${i + k}`, k % 2 === 0) })));
      for (const r of rs) expect(r.status, r.text).toBe(200);
    }
    const log = escrowLog(gw, escrowId);
    let reserved = 0;
    let last = 0;
    for (const r of log) {
      if (r.type === 'NoncesReserved') reserved = (r.data as { upTo: number }).upTo;
      if (r.type === 'InferenceStarted') {
        const nonce = (r.data as { nonce: number }).nonce;
        expect(nonce).toBeGreaterThan(last);
        expect(nonce, `nonce ${nonce} used beyond the reservation`).toBeLessThanOrEqual(reserved);
        last = nonce;
      }
    }
    expect(last).toBe(n);
    const blocks = log.filter((r) => r.type === 'NoncesReserved').map((r) => (r.data as { upTo: number }).upTo);
    expect(blocks).toEqual([NONCE_BLOCK, 2 * NONCE_BLOCK]);
    // the reservation is caused by a request: its metadata names it
    expect(log.find((r) => r.type === 'NoncesReserved')!.metadata.actor).toEqual({ kind: 'admin' });
  });
});

describe('the log stops taking writes while requests are under way (devshard protocol)', () => {
  let gw: TestGateway;
  let escrowId: string;
  // The chain and hosts outlive the gateway's restart, as real ones do (their mempools hold the
  // Finishes the gateway had not yet put in a diff).
  let devnet: Devnet;
  const keys = generateKeys();

  beforeAll(async () => {
    devnet = await startDevnet({ env: { DEVNET_BLOCK_TIME_MS: '50', DEVNET_TOKEN_DELAY_MS: '0' }, creators: [keys.privateKey], port: 0 });
    gw = await startTestGateway({ keys, env: { NODE_RPC: devnet.rpcUrl, NODE_CHAIN_API: devnet.url, NODE_BASE: devnet.url, DEVSHARD_HOST_PROTOCOL: 'devshard' } });
    escrowId = await createEscrowViaApi(gw);
  });
  afterAll(async () => {
    await disposeTestGateway(gw);
    await devnet?.close();
  });

  it('a request whose diff cannot be recorded is not sent; the next start gives the reservation back and continues at the next nonce; settle conserves the deposit', { timeout: 60_000 }, async () => {
    for (let i = 0; i < 5; i++) expect((await gw.call('/v1/chat/completions', { body: chatBody(`before ${i}`) })).status).toBe(200);
    // The furthest nonce any host holds for the escrow: what reached the wire.
    const onTheWire = () => Math.max(...[0, 1, 2].map((h) => Number(devnet.simulatedHosts.protocol.peek(h, escrowId)?.latestNonce ?? 0n)));
    expect(onTheWire()).toBe(5);

    // From now on every append fails (as if the disk went away), a little later, as a commit would.
    gw.store.append = () => new Promise((_, reject) => setTimeout(() => reject(new Error('simulated disk failure')), 300));
    const raw = httpCaller(gw.url, gw.keys);
    const refusedToSend = await Promise.all([raw('/v1/chat/completions', { body: chatBody('lost 1') }), raw('/v1/chat/completions', { body: chatBody('lost 2', true) })]);
    for (const r of refusedToSend) {
      expect(r.status, r.text).toBe(503);
      expect(r.json.error.code).toBe('event_log_unavailable');
      expect(r.json.error.message).toMatch(/could not record this request's diff, so it was not sent/);
    }
    // A diff goes out only once it is in the log: the hosts saw nothing of nonces 6 and 7.
    expect(onTheWire()).toBe(5);
    // The two requests' starts and ends were decided before their 503s; once their append has
    // failed too, the escrow is set aside (engine.appendFailed). idle() resolves when it has.
    await gw.ctx.engine.idle();
    const setAside = await raw('/v1/chat/completions', { body: chatBody('after the failure') });
    expect(setAside.status).toBe(503);

    gw = await gw.restart();
    const log = escrowLog(gw, escrowId);
    expect(log.map((r) => r.type)).not.toContain('NoncesSkipped');
    expect(log.filter((r) => r.type === 'NoncesReleased').at(-1)!.data).toEqual({ upTo: 5 });

    // The next request takes the next nonce, and the hosts accept it (no gap, no reuse).
    const next = await gw.call('/v1/chat/completions', { body: chatBody('after restart') });
    expect(next.status, next.text).toBe(200);
    expect(Number(next.headers.get('x-devshard-nonce'))).toBe(6);
    expect(onTheWire()).toBe(6);

    const s = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: { private_key_env: 'DEVSHARD_PRIVATE_KEY' } });
    expect(s.status, s.text).toBe(200);
    const onChain = devnet.chain.state.escrows[escrowId]!;
    const settlement = (escrowLog(gw, escrowId).filter((r) => r.type === 'EscrowFinalized').at(-1)!.data as { settlement: { fees: string; hostStats: { cost: string }[] } }).settlement;
    const hostCosts = settlement.hostStats.reduce((n, h) => n + BigInt(h.cost), 0n);
    // The log bills what the hosts are paid (nonce 5's Finish came back from its host's mempool); once
    // settled the view's spent is the chain's total payout: those costs plus the protocol fees.
    const view = (await gw.call(`/v1/admin/devshards/${escrowId}`)).json;
    expect(BigInt(view.spent)).toBe(hostCosts + BigInt(settlement.fees));
    expect(BigInt(view.chain_settlement.spent_breakdown.billed_requests) + BigInt(view.chain_settlement.spent_breakdown.recovered_usage)).toBe(hostCosts);
    expect(hostCosts + BigInt(settlement.fees) + onChain.refund!).toBe(onChain.amount);
  });
});

describe('the log refuses the first reservation of an escrow', () => {
  let gw: TestGateway;
  let escrowId: string;
  beforeAll(async () => ({ gw, escrowId } = await startGatewayWithEscrow()));
  afterAll(() => disposeTestGateway(gw));

  it('the request is not sent: 503 event_log_unavailable, and the escrow is set aside', { timeout: 30_000 }, async () => {
    const hosts = gw.devnet!.simulatedHosts;
    // the latest nonce any host applied on an escrow (its protocol session; none: 0)
    const servedOn = (id: string) => {
      expect(gw.ctx.engine.escrow(id)!.context.slots.length).toBeGreaterThan(0);
      return Math.max(...[0, 1, 2].map((h) => Number(hosts.protocol.peek(h, id)?.latestNonce ?? 0n)));
    };
    // one request served first, so the hosts' count is shown to see requests
    const other = await gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key: gw.keys.privateKey, chain_id: 'shardgate-devnet', register: false } });
    expect(other.status, other.text).toBe(200);
    expect((await gw.call('/v1/chat/completions', { body: chatBody('works') })).status).toBe(200);
    expect(servedOn(escrowId)).toBe(1);
    // that escrow now has a durable reservation; a fresh escrow needs its first one
    const fresh = String(other.json.escrow_id);
    expect((await gw.call('/v1/admin/devshards', { body: { escrow_id: fresh } })).status).toBe(200);
    expect((await gw.call(`/v1/admin/devshards/${escrowId}/deactivate`, { method: 'POST' })).status).toBe(200);
    gw.store.append = async () => {
      throw new Error('simulated disk failure');
    };
    const raw = httpCaller(gw.url, gw.keys);
    const r = await raw('/v1/chat/completions', { body: chatBody('first') });
    expect(r.status, r.text).toBe(503);
    expect(r.json.error.code).toBe('event_log_unavailable');
    expect(servedOn(fresh)).toBe(0); // no host saw it
    const again = await raw('/v1/chat/completions', { body: chatBody('second') });
    expect(again.status).toBe(503);
    expect(again.json.error.code).toBe('no_escrow_available');
  });
});
