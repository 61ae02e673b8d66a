/**
 * Nonces are reserved durably in blocks before requests use them (src/gateway/nonce-lease.ts), and a
 * chat's start and end commit after its answer. So:
 *  - every InferenceStarted nonce is covered by a NoncesReserved recorded before it, and a block
 *    serves many requests (no fsync per request in front of the host call);
 *  - a clean stop gives the unused nonces back (NoncesReleased): the next run continues right after
 *    the last used nonce (restart.test.ts checks the numbers);
 *  - when the log stops taking writes (the disk fails), a request whose diff cannot be recorded is
 *    not sent (over the devshard protocol the diff is durable before the request leaves), the escrow
 *    takes no further request in this run, and the next start skips every reserved nonce; the
 *    settlement conserves the deposit on chain.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedEvent } from '../../src/events/envelope.js';
import { NONCE_BLOCK } from '../../src/gateway/nonce-lease.js';
import { disposeTestGateway, httpCaller, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';
import { requestRecords } from '../helpers/request-records.js';
import { settlementCharges } from '../helpers/settlement.js';

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

describe('the log stops taking writes', () => {
  let gw: TestGateway;
  let escrowId: string;

  beforeAll(async () => ({ gw, escrowId } = await startGatewayWithEscrow()));
  afterAll(() => disposeTestGateway(gw));

  it('a request whose diff cannot be recorded is not sent; the escrow takes no further request; the next start skips the reserved nonces; settle conserves the deposit', { timeout: 60_000 }, async () => {
    for (let i = 0; i < 5; i++) expect((await gw.call('/v1/chat/completions', { body: chatBody(`before ${i}`) })).status).toBe(200);
    const hosts = gw.devnet!.simulatedHosts;
    const latestOnHosts = () => Math.max(...[0, 1, 2].map((h) => Number(hosts.protocol.peek(h, escrowId)?.latestNonce ?? 0n)));
    expect(latestOnHosts()).toBe(5);

    // From now on every append fails (as if the disk went away). Over the devshard protocol a
    // request's diff is in the log before the request leaves (docs/protocol.md step 7): so no host
    // sees nonce 6 or 7, and no answer goes out that the log does not know.
    gw.store.append = () => new Promise((_, reject) => setTimeout(() => reject(new Error('simulated disk failure')), 300));
    const raw = httpCaller(gw.url, gw.keys);
    const answered = await Promise.all([raw('/v1/chat/completions', { body: chatBody('lost 1') }), raw('/v1/chat/completions', { body: chatBody('lost 2') })]);
    for (const r of answered) {
      expect(r.status, r.text).toBe(502);
      expect(r.json.error.message).toMatch(/could not be recorded; not sent/);
    }
    expect(latestOnHosts()).toBe(5);

    // Once the failure is known the escrow is set aside: handing out nonces again from the committed
    // state could reuse 6 or 7.
    await new Promise((r) => setTimeout(r, 500));
    const refused = await raw('/v1/chat/completions', { body: chatBody('after the failure') });
    expect(refused.status).toBe(503);
    expect(refused.json.error.code).toBe('no_escrow_available');

    gw = await gw.restart();
    const log = escrowLog(gw, escrowId);
    expect(log.map((r) => r.type)).not.toContain('NoncesReleased');
    const skip = log.find((r) => r.type === 'NoncesSkipped')!.data as { from: number; upTo: number };
    expect(skip).toMatchObject({ from: 6, upTo: NONCE_BLOCK });

    // The next request takes the nonce after the skipped block; nothing is used twice.
    const next = await gw.call('/v1/chat/completions', { body: chatBody('after restart') });
    expect(next.status, next.text).toBe(200);
    expect(Number(next.headers.get('x-devshard-nonce'))).toBe(NONCE_BLOCK + 1);

    const f = await gw.call(`/devshard/${escrowId}/v1/finalize`, { method: 'POST' });
    expect(f.status, f.text).toBe(200);
    const s = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: { private_key_env: 'DEVSHARD_PRIVATE_KEY' } });
    expect(s.status, s.text).toBe(200);
    expect(s.json.settled).toBe(true);
    const onChain = gw.devnet!.chain.state.escrows[escrowId]!;
    const { hostCosts, fees } = settlementCharges(gw.store, escrowId);
    expect(hostCosts + fees + onChain.refund!).toBe(onChain.amount);
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
