/**
 * A finalize whose diffs were recorded but never reached the hosts (every host refused them, or the
 * gateway died between recording and sending) has no step left to compose the next time: it must
 * still bring the hosts up to the settlement nonce before asking them to sign. Before, the retry
 * asked at once and every host answered "no signature yet" (0 of 3 signed).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HostFaults } from '../../src/devnet/hosts/index.js';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';
import { setHostFaults } from './helpers.js';

let gw: TestGateway;
let escrowId: string;

const setFaults = (f: HostFaults): void => setHostFaults(gw.devnet!, f);

describe('finalize after its diffs failed to reach the hosts', () => {
  beforeAll(async () => ({ gw, escrowId } = await startGatewayWithEscrow()));
  afterAll(async () => {
    if (gw) setFaults({});
    await disposeTestGateway(gw);
  });

  it('the first attempt names why the hosts did not sign; the retry brings them up and they sign', async () => {
    for (let i = 0; i < 2; i++) {
      const r = await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: `hello ${i}` }], max_tokens: 8 } });
      expect(r.status, r.text).toBe(200);
    }
    setFaults({ failStatus: 503, failMessage: 'host down for maintenance' });
    const failed = await gw.call(`/devshard/${escrowId}/v1/finalize`, { method: 'POST' });
    expect(failed.status, failed.text).toBe(502);
    // The refusal says what the hosts answered, not only how many signed.
    expect(failed.json.error.message).toMatch(/0 of 3 slots signed.*answered 503: host down for maintenance/);

    setFaults({});
    const f = await gw.call(`/devshard/${escrowId}/v1/finalize`, { method: 'POST' });
    expect(f.status, f.text).toBe(200);
    expect(f.json.signatures.length).toBe(3);
    const s = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: {} });
    expect(s.status, s.text).toBe(200);
    expect((await gw.ctx.chain.escrow(escrowId))!.settled).toBe(true);
  }, 40_000);
});
