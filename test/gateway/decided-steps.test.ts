/**
 * The escrow pool adopts the engine's decided snapshot for the chat events the engine appended
 * (EscrowPoolProjection.adoptDecidedSteps), instead of stepping each event a second time on commit.
 * What must hold: the live pool is what a rebuild from the log gives, adopted or not, and a step
 * is adopted only from the very snapshot the pool holds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newEvent } from '../../src/events/catalog.js';
import { stepEscrowFast } from '../../src/machines/escrow-fast.js';
import { EscrowPoolProjection } from '../../src/projections/escrow-pool.js';
import { Projections } from '../../src/projections/projections.js';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';

const meta = { actor: { kind: 'admin' as const }, correlationId: 'c', requestId: 'c' };
const start = (requestId: string, nonce: number) =>
  newEvent('InferenceStarted', { clientKeyId: null, inputTokens: 3, maxTokens: 5, nonce, requestId, reservedCost: '8' }, meta);
const finish = (requestId: string, nonce: number) =>
  newEvent('InferenceFinished', { cost: '6', nonce, requestId, usage: { completionTokens: 3, promptTokens: 3, totalTokens: 6 } }, meta);

describe('decided steps adopted by the escrow pool', () => {
  let gw: TestGateway;
  let escrowId: string;

  beforeAll(async () => ({ gw, escrowId } = await startGatewayWithEscrow()));
  afterAll(() => disposeTestGateway(gw));

  it('the pool holds the engine\'s own decided snapshot once it commits, and it equals the rebuild', async () => {
    const { engine, projections } = gw.ctx;
    // Reserve nonces through a chat first (the statechart refuses a start beyond the reservation).
    expect((await gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 } })).status).toBe(200);
    await engine.idle();
    const n = engine.escrow(escrowId)!.context.nonce;
    const committed = engine.decideEscrow('escrow', escrowId, [start('a', n + 1)]);
    const second = engine.decideEscrow('escrow', escrowId, [start('b', n + 2)]);
    const ended = engine.decideEscrow('escrow', escrowId, [finish('a', n + 1)]);
    const decided = engine.escrow(escrowId)!;
    expect(projections.pool.escrow(escrowId)).not.toBe(decided); // still committing
    await Promise.all([committed, second, ended]);
    expect(projections.pool.escrow(escrowId)).toBe(decided);
    await engine.decideEscrow('escrow', escrowId, [finish('b', n + 2)]);
    expect(projections.pool.escrow(escrowId)!.context).toMatchObject({ inFlight: 0, nonce: n + 2 });
    expect(Projections.rebuild(gw.store.readAll()).snapshot().pool).toEqual(projections.snapshot().pool);
  });

  it('concurrent chats over HTTP leave the live projections equal to a rebuild from the log', async () => {
    const rs = await Promise.all(Array.from({ length: 24 }, (_, i) => gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: `q${i}` }], max_tokens: 5, stream: i % 3 === 0 } })));
    for (const r of rs) expect(r.status, r.text).toBe(200);
    await gw.ctx.engine.idle();
    expect(Projections.rebuild(gw.store.readAll()).snapshot()).toEqual(gw.ctx.projections.snapshot());
  });
});

describe('EscrowPoolProjection.adoptDecidedSteps', () => {
  it('steps the event itself when the decided step did not start from the snapshot it holds', async () => {
    const { gw, escrowId } = await startGatewayWithEscrow();
    try {
      await gw.ctx.engine.idle();
      const records = [...gw.store.readAll()];
      const pool = new EscrowPoolProjection();
      for (const r of records) pool.apply(r);
      const held = pool.escrow(escrowId)!;
      // A step decided from another snapshot (equal in content, not the same object): not adopted.
      const stale = { base: { ...held }, snapshot: { ...held, value: 'settled' } } as never;
      const ev = start('x', held.context.nonce + 1);
      pool.adoptDecidedSteps(() => stale);
      const reserve = { ...records.at(-1)!, position: records.at(-1)!.position + 1, type: 'NoncesReserved', data: { upTo: held.context.nonce + 10 }, schemaVersion: 1, streamVersion: records.at(-1)!.streamVersion + 1, streamId: `escrow-${escrowId}` };
      pool.apply(reserve);
      const afterReserve = pool.escrow(escrowId)!;
      expect(afterReserve.value).toBe('active');
      expect(afterReserve).toEqual(stepEscrowFast(held, { type: 'NoncesReserved', data: { upTo: held.context.nonce + 10 } } as never).snapshot);
      // The same step from the held snapshot is adopted as is.
      const adopted = stepEscrowFast(afterReserve, { type: ev.type, data: ev.data } as never).snapshot;
      pool.adoptDecidedSteps(() => ({ base: afterReserve, snapshot: adopted }));
      pool.apply({ ...reserve, position: reserve.position + 1, streamVersion: reserve.streamVersion + 1, type: ev.type, data: ev.data, metadata: ev.metadata });
      expect(pool.escrow(escrowId)).toBe(adopted);
    } finally {
      await disposeTestGateway(gw);
    }
  });
});
