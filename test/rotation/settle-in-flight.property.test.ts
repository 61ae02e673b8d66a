/**
 * Property: whatever the timing of requests around it, the rotation's finalize + settle never
 * broadcasts a settle while the escrow has requests in flight (the settle is deferred and the drain
 * reactor sends it when the last one ends), and the escrow ends up settled on chain.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { escrowStream, upcast } from '../../src/events/catalog.js';
import { finalizeAndSettle, ROTATION_META } from '../../src/gateway/rotation/steps.js';
import { createEscrowViaApi, disposeTestGateway } from '../helpers/gateway.js';
import { MODEL, startRotationGateway, waitFor, type RotationGateway } from './helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** In-flight count of the escrow at every EscrowSettleRequested, from its stream. */
function inFlightAtSettleRequests(gw: RotationGateway, escrowId: string): number[] {
  let inFlight = 0;
  const seen: number[] = [];
  for (const r of gw.store.readStream(escrowStream(escrowId))) {
    const e = upcast(r);
    if (!e) continue;
    if (e.type === 'InferenceStarted') inFlight++;
    else if (e.type === 'InferenceFinished' || e.type === 'InferenceFailed') inFlight--;
    else if (e.type === 'EscrowSettleRequested') seen.push(inFlight);
  }
  return seen;
}

// One retry: each of the runs drives a real gateway and chain; on a loaded 2-core machine one run can
// exceed its wait. endOnFailure below makes the first real error visible instead of a timeout.
describe('rotation settle vs in-flight requests', { retry: 1 }, () => {
  let gw: RotationGateway;
  beforeAll(async () => {
    gw = await startRotationGateway({ env: { DEVNET_TOKEN_DELAY_MS: '4', DEVNET_EPOCH_BLOCKS: '100000' } });
    await gw.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }] } });
  }, 30_000);
  afterAll(() => disposeTestGateway(gw));

  it('never broadcasts a settle while requests are in flight (random request timings)', async () => {
    let deferred = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ at: fc.integer({ min: 0, max: 120 }), tokens: fc.integer({ min: 1, max: 40 }) }), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 0, max: 150 }),
        async (requests, settleAt) => {
          const id = await createEscrowViaApi(gw, '1000000000');
          const chats = requests.map(async (q) => {
            await sleep(q.at);
            // Streamed, so the host paces tokens (DEVNET_TOKEN_DELAY_MS) and requests overlap the settle.
            return gw.call('/v1/chat/completions', { key: 'client', body: { model: MODEL, stream: true, messages: [{ role: 'user', content: 'count slowly' }], max_tokens: q.tokens } });
          });
          await sleep(settleAt);
          const answer = await finalizeAndSettle(gw.ctx, id, 'DEVSHARD_PRIVATE_KEY', 'rotation', ROTATION_META);
          expect(['settled', 'deferred']).toContain(answer.status);
          if (answer.status === 'deferred') deferred++;
          await Promise.all(chats);
          await waitFor(`escrow ${id} settled`, () => gw.ctx.projections.pool.escrow(id)?.value === 'settled', 10_000);
          const atSettle = inFlightAtSettleRequests(gw, id);
          expect(atSettle.length).toBeGreaterThan(0);
          expect(atSettle.every((n) => n === 0)).toBe(true);
          expect((await gw.ctx.chain.escrow(id))?.settled).toBe(true);
        },
      ),
      // endOnFailure: each run drives a real gateway; shrinking would re-run it for minutes and hide the first error.
      { numRuns: 8, endOnFailure: true, examples: [[[{ at: 0, tokens: 40 }, { at: 5, tokens: 30 }], 20]] },
    );
    expect(deferred).toBeGreaterThan(0); // the interesting case happened
  }, 90_000);
});
