/**
 * Chat starts and ends are recorded per escrow and group commit as one InferencesRecorded
 * (engine.recordRequest). What a user of the log must be able to rely on:
 *  - the entries are every start and end, in the order they were decided, and concurrent chats
 *    share events (fewer events than entries);
 *  - the log keeps the order of decisions: another decision on the stream closes the open event
 *    first, so the replayed state equals the live one at every step;
 *  - the pool holds the engine's decided snapshot once the event commits (no second fold);
 *  - a full event is closed and a new one opened; an append that cannot happen rejects its callers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { escrowStream, newEvent, type InferenceEntry } from '../../src/events/catalog.js';
import { MAX_GROUP_ENTRIES, TransitionRefused } from '../../src/gateway/write/engine.js';
import { Projections } from '../../src/projections/projections.js';
import { replay } from '../../src/projections/replay.js';
import { TIMELINE_PAGE_EVENTS } from '../../src/projections/timeline.js';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';
import { requestRecords } from '../helpers/request-records.js';

const start = (requestId: string, nonce: number): InferenceEntry => ({
  data: { clientKeyId: null, inputTokens: 3, maxTokens: 5, nonce, requestId, reservedCost: '8' },
  type: 'InferenceStarted',
});
const finish = (requestId: string, nonce: number): InferenceEntry => ({
  data: { cost: '6', nonce, requestId, usage: { completionTokens: 3, promptTokens: 3, totalTokens: 6 } },
  type: 'InferenceFinished',
});
const chatBody = (content: string, stream = false) => ({ model: MODEL, messages: [{ role: 'user', content }], max_tokens: 5, stream });

describe('InferencesRecorded: one event per escrow and group commit', () => {
  let gw: TestGateway;
  let escrowId: string;
  const stream = () => gw.store.readStream(escrowStream(escrowId));

  beforeAll(async () => ({ gw, escrowId } = await startGatewayWithEscrow()));
  afterAll(() => disposeTestGateway(gw));

  /** Makes sure the next `n` nonces are durably reserved (a start beyond the reservation is refused). */
  async function reserveAhead(n: number): Promise<number> {
    const { engine } = gw.ctx;
    await engine.idle();
    const c = engine.escrow(escrowId)!.context;
    if ((c.nonceReserved ?? 0) < c.nonce + n) await engine.decideEscrow('escrow', escrowId, [newEvent('NoncesReserved', { upTo: c.nonce + n + 256 }, { actor: { kind: 'admin' } })]);
    return c.nonce;
  }

  it('concurrent chats share events; every start and end is an entry, each request started before it ended', async () => {
    const before = stream().length;
    const rs = await Promise.all(Array.from({ length: 32 }, (_, i) => gw.call('/v1/chat/completions', { body: chatBody(`q${i}`, i % 4 === 0) })));
    for (const r of rs) expect(r.status, r.text).toBe(200);
    await gw.ctx.engine.idle();
    const added = stream().slice(before);
    const groups = added.filter((r) => r.type === 'InferencesRecorded');
    const entries = requestRecords(added).filter((r) => r.type.startsWith('Inference'));
    expect(entries.filter((r) => r.type === 'InferenceStarted')).toHaveLength(32);
    expect(entries.filter((r) => r.type === 'InferenceFinished')).toHaveLength(32);
    expect(groups.length, 'events shared by concurrent requests').toBeLessThan(entries.length);
    expect(groups.every((g) => g.metadata.actor.kind === 'chat')).toBe(true);
    const seen = new Set<string>();
    for (const e of entries) {
      const id = (e.data as { requestId: string }).requestId;
      if (e.type === 'InferenceStarted') seen.add(id);
      else expect(seen.has(id), `${id} ended before its start`).toBe(true);
    }
    expect(Projections.rebuild(gw.store.readAll()).snapshot()).toEqual(gw.ctx.projections.snapshot());
    // The operator's timeline says how many starts and ends each event records.
    const since = added[0]!.position;
    const timeline = (await gw.call(`/v1/admin/devshards/${escrowId}/timeline`)).json as { entries: { position: number; event: string; requests?: { started: number; ended: number } }[] };
    const recorded = timeline.entries.filter((e) => e.position >= since && e.event === 'InferencesRecorded');
    expect(recorded.every((e) => e.requests && e.requests.started + e.requests.ended > 0)).toBe(true);
    expect(recorded.reduce((n, e) => n + e.requests!.started, 0)).toBe(32);
    expect(recorded.reduce((n, e) => n + e.requests!.ended, 0)).toBe(32);
  });

  it('entries decided in one turn are one event, in decision order; the pool holds the decided snapshot', async () => {
    const { engine, projections } = gw.ctx;
    const n = await reserveAhead(8);
    const before = stream().length;
    const done = [engine.recordRequest(escrowId, start('a', n + 1)), engine.recordRequest(escrowId, start('b', n + 2)), engine.recordRequest(escrowId, finish('a', n + 1))];
    const decided = engine.escrow(escrowId)!;
    expect(decided.context).toMatchObject({ nonce: n + 2, inFlight: 1 });
    expect(projections.pool.escrow(escrowId)).not.toBe(decided); // not committed yet
    const [records] = await Promise.all(done);
    expect(records).toHaveLength(1);
    expect(records![0]!.type).toBe('InferencesRecorded');
    expect((records![0]!.data as { entries: InferenceEntry[] }).entries).toEqual([start('a', n + 1), start('b', n + 2), finish('a', n + 1)]);
    expect(stream().slice(before).map((r) => r.type)).toEqual(['InferencesRecorded']);
    expect(projections.pool.escrow(escrowId)).toBe(decided);
    await engine.recordRequest(escrowId, finish('b', n + 2));
    expect(projections.pool.escrow(escrowId)!.context).toMatchObject({ inFlight: 0, nonce: n + 2 });
  });

  it('another decision on the stream closes the open event first: the log is in decision order', async () => {
    const { engine } = gw.ctx;
    const n = await reserveAhead(8);
    const before = stream().length;
    const first = engine.recordRequest(escrowId, start('c', n + 1));
    // A reservation decided between two starts: c's event, the reservation, then d's event.
    const c = engine.escrow(escrowId)!.context;
    const reserved = engine.decideEscrow('escrow', escrowId, [newEvent('NoncesReserved', { upTo: (c.nonceReserved ?? 0) + 1 }, { actor: { kind: 'admin' } })]);
    const second = engine.recordRequest(escrowId, start('d', n + 2));
    const ends = [engine.recordRequest(escrowId, finish('c', n + 1)), engine.recordRequest(escrowId, finish('d', n + 2))];
    await Promise.all([first, reserved, second, ...ends]);
    const added = stream().slice(before);
    expect(added.map((r) => r.type)).toEqual(['InferencesRecorded', 'NoncesReserved', 'InferencesRecorded']);
    expect(requestRecords(added).map((r) => `${r.type}:${(r.data as { requestId?: string }).requestId ?? ''}`)).toEqual([
      'InferenceStarted:c',
      'NoncesReserved:',
      'InferenceStarted:d',
      'InferenceFinished:c',
      'InferenceFinished:d',
    ]);
    expect(Projections.rebuild(gw.store.readAll()).snapshot()).toEqual(gw.ctx.projections.snapshot());
  });

  it(`a refused entry is refused alone; an event of ${MAX_GROUP_ENTRIES} entries is closed and the next opens a new one`, async () => {
    const { engine } = gw.ctx;
    const count = MAX_GROUP_ENTRIES + 5;
    const n = await reserveAhead(count + 1);
    expect(() => engine.recordRequest(escrowId, finish('never-started', n + 1))).toThrow(TransitionRefused);
    expect(() => engine.recordRequest(escrowId, start('stale', n))).toThrow(TransitionRefused);
    const before = stream().length;
    const done: Promise<unknown>[] = [];
    for (let i = 1; i <= count; i++) done.push(engine.recordRequest(escrowId, start(`s${i}`, n + i)));
    await Promise.all(done);
    const added = stream().slice(before);
    expect(added.map((r) => (r.data as { entries: unknown[] }).entries.length)).toEqual([MAX_GROUP_ENTRIES, 5]);
    const ends: Promise<unknown>[] = [];
    for (let i = 1; i <= count; i++) ends.push(engine.recordRequest(escrowId, finish(`s${i}`, n + i)));
    await Promise.all(ends);
    expect(engine.escrow(escrowId)!.context.inFlight).toBe(0);
    expect(Projections.rebuild(gw.store.readAll()).snapshot()).toEqual(gw.ctx.projections.snapshot());
  });

  it('the timeline over HTTP is read in pages and agrees with replay of the log', async () => {
    for (let i = 0; i < 2 * TIMELINE_PAGE_EVENTS; i++) expect((await gw.call('/v1/chat/completions', { body: chatBody(`seq${i}`) })).status).toBe(200);
    await gw.ctx.engine.idle();
    expect(stream().length).toBeGreaterThan(2 * TIMELINE_PAGE_EVENTS);
    const timeline = (await gw.call(`/v1/admin/devshards/${escrowId}/timeline`)).json as { total: number; entries: { position: number; event: string; actor: string; state: string; accepted: boolean }[] };
    // The timeline is the escrow statechart's; replay --escrow also lists the escrow's devshard session stream.
    const rows = [...replay(gw.store.readAll(), { escrow: escrowId })].filter((r) => r.stream !== `devshard-session-${escrowId}`);
    const shown = (e: { position: number; event: string; actor: string; state: string; accepted: boolean }) => [e.position, e.event, e.actor, e.state, e.accepted];
    expect(timeline.total).toBe(rows.length);
    expect(timeline.entries.map(shown)).toEqual(rows.map(shown));
  });
});

describe('InferencesRecorded on a stream that is never idle', () => {
  it('keeps the engine\'s decided steps bounded: adopted ones are dropped though one is always pending', async () => {
    const { gw, escrowId } = await startGatewayWithEscrow();
    try {
      const { engine } = gw.ctx;
      await engine.idle();
      const c = engine.escrow(escrowId)!.context;
      const rounds = 1_300;
      await engine.decideEscrow('escrow', escrowId, [newEvent('NoncesReserved', { upTo: c.nonce + rounds + 1 }, { actor: { kind: 'admin' } })]);
      const steps = () => (engine as unknown as { pending: Map<string, { steps?: unknown[] }> }).pending.get(escrowStream(escrowId))?.steps?.length ?? 0;
      const taken = () => new Promise((resolve) => setImmediate(resolve)); // the store has formed its batch
      // Each event is decided before the previous one commits, and taken by the store right after.
      let previous = engine.recordRequest(escrowId, start('n0', c.nonce + 1));
      await taken();
      let most = 0;
      for (let i = 1; i < rounds; i++) {
        const next = engine.recordRequest(escrowId, start(`n${i}`, c.nonce + 1 + i));
        await previous;
        await taken();
        most = Math.max(most, steps());
        previous = next;
      }
      expect(most).toBeLessThanOrEqual(1_100);
      await previous;
      expect(gw.ctx.projections.pool.escrow(escrowId)!.context.inFlight).toBe(rounds);
      expect(Projections.rebuild(gw.store.readAll()).snapshot().pool).toEqual(gw.ctx.projections.snapshot().pool);
    } finally {
      await disposeTestGateway(gw);
    }
  });
});

describe('InferencesRecorded when the store closes', () => {
  it('closing commits the open event; after that, a start is refused to its caller and the escrow takes no further chat event', async () => {
    const { gw, escrowId } = await startGatewayWithEscrow();
    try {
      const { engine } = gw.ctx;
      await engine.idle();
      const c = engine.escrow(escrowId)!.context;
      await engine.decideEscrow('escrow', escrowId, [newEvent('NoncesReserved', { upTo: c.nonce + 10 }, { actor: { kind: 'admin' } })]);
      const a = engine.recordRequest(escrowId, start('a', c.nonce + 1));
      const b = engine.recordRequest(escrowId, start('b', c.nonce + 2));
      await gw.store.close(); // commits what is queued and staged, as a clean stop must
      const [ra, rb] = await Promise.all([a, b]);
      expect(ra).toBe(rb);
      expect((ra![0]!.data as { entries: InferenceEntry[] }).entries.map((e) => e.data.requestId)).toEqual(['a', 'b']);
      // Decided after the close: its caller hears the log refused it; the nonce may have left, so the escrow is set aside.
      await expect(engine.recordRequest(escrowId, start('c', c.nonce + 3))).rejects.toThrow(/closed/);
      expect(() => engine.recordRequest(escrowId, finish('a', c.nonce + 1))).toThrow(TransitionRefused);
    } finally {
      await disposeTestGateway(gw).catch(() => undefined);
    }
  });
});
