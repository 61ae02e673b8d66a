import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createIntentStream, escrowStream, rotationStream, settingsStream, DEFAULT_SETTINGS, type CatalogEvent } from '../../src/events/catalog.js';
import { Projections } from '../../src/projections/index.js';
import { ev, record } from '../machines/events.js';

const settingsChanged = (): CatalogEvent => ({
  type: 'SettingsChanged',
  data: { patch: { request_max_tokens_cap: 8192 }, effective: { ...structuredClone(DEFAULT_SETTINGS), request_max_tokens_cap: 8192 } },
});

const scenario = () =>
  record([
    { streamId: createIntentStream('i1'), event: ev.createRequested('i1') },
    { streamId: escrowStream('e1'), event: ev.created('e1', 'm1', '10000000', 'i1') },
    { streamId: escrowStream('e1'), event: ev.registered('e1') },
    { streamId: escrowStream('e2'), event: ev.created('e2', 'm1') },
    { streamId: escrowStream('e2'), event: ev.registered('e2') },
    { streamId: escrowStream('e1'), event: ev.started('a', 1, '1000') },
    { streamId: settingsStream, event: settingsChanged() },
    { streamId: settingsStream, event: ev.accessMode('m1', 'api_key') },
    { streamId: createIntentStream('i2'), event: ev.createRequested('i2', 'm2') },
    { streamId: rotationStream('m1'), event: ev.phaseStarted(1) },
    { streamId: rotationStream('m1'), event: ev.settleDecided('regular', ['e2']) },
    { streamId: escrowStream('e2'), event: ev.finalized() },
    { streamId: escrowStream('e2'), event: ev.settleRequested() },
    { streamId: escrowStream('e2'), event: ev.settled() },
  ]);

describe('projections', () => {
  it('pool: pick returns the routable escrow with the fewest in flight that covers the reservation', () => {
    const records = scenario().slice(0, 6);
    const p = Projections.rebuild(records);
    expect(p.pool.pick('m1')?.escrowId).toBe('e2');
    expect(p.pool.pick('m1', '9999500')?.escrowId).toBe('e2');
    expect(p.pool.pick('m1', '10000001')).toBeUndefined();
    expect(p.pool.pick('nope')).toBeUndefined();
    expect(p.pool.escrow('e1')?.context).toMatchObject({ nonce: 1, inFlight: 1, intentId: 'i1' });
    expect(p.pool.escrow('e1')?.can(ev.started('b', 2))).toBe(true);
  });

  it('pool: pick is the fewest in flight among escrows that cover the reservation, ties to the larger usable balance', () => {
    // Escrows with random deposits and random requests in flight, against a plain reading of the rule.
    const escrows = fc.array(fc.record({ deposit: fc.integer({ min: 1, max: 50_000 }), costs: fc.array(fc.integer({ min: 1, max: 9_000 }), { maxLength: 6 }) }), { minLength: 1, maxLength: 6 });
    fc.assert(
      fc.property(escrows, fc.integer({ min: 0, max: 60_000 }), (specs, need) => {
        const events: { streamId: string; event: CatalogEvent }[] = [];
        specs.forEach((spec, i) => {
          const id = `e${i}`;
          events.push({ streamId: escrowStream(id), event: ev.created(id, 'm1', String(spec.deposit)) }, { streamId: escrowStream(id), event: ev.registered(id) });
          let left = spec.deposit;
          spec.costs.forEach((cost, n) => {
            if (cost > left) return;
            left -= cost;
            events.push({ streamId: escrowStream(id), event: ev.started(`${id}-r${n}`, n + 1, String(cost)) });
          });
        });
        const pool = Projections.rebuild(record(events)).pool;
        const usable = (e: { balance: string; reserved: string }) => BigInt(e.balance) - BigInt(e.reserved);
        let expected: ReturnType<typeof pool.routableOf>[number] | undefined;
        for (const e of pool.routableOf('m1')) {
          if (usable(e) < BigInt(need)) continue;
          if (!expected || e.inFlight < expected.inFlight || (e.inFlight === expected.inFlight && usable(e) > usable(expected))) expected = e;
        }
        expect(pool.pick('m1', String(need))?.escrowId).toBe(expected?.escrowId);
      }),
      { numRuns: 300 },
    );
  });

  it('pool: settled escrows leave routing; unresolved intents are listed for reconciliation', () => {
    const p = Projections.rebuild(scenario());
    expect(p.pool.routableOf('m1').map((e) => e.escrowId)).toEqual(['e1']);
    expect(p.pool.pending().map((x) => x.intentId)).toEqual(['i2']);
  });

  it('status: capacity per model, access mode, active requests and devshards', () => {
    const s = Projections.rebuild(scenario()).status.snapshot();
    expect(s.active_requests).toBe(1);
    expect(s.capacity.models.m1).toEqual({
      active: 1,
      routable_devshard_ids: ['e1'],
      access_mode: 'api_key',
      in_flight: 1,
      active_devshards: 1,
      routable_devshards: 1,
      routable: true,
      access_enabled: true,
    });
    expect(s.devshards.map((d) => [d.escrow_id, d.state])).toEqual([['e1', 'active'], ['e2', 'settled']]);
    expect(s.model_runtimes).toEqual([{ model: 'm1', mode: 'pool', escrows: 2, routable: 1 }]);
    expect(s.runtimes).toBe(2);
    // reserved_tokens: the reserved amount at the token price the caller knows.
    const priced = Projections.rebuild(scenario()).status.snapshot(2n).devshards[0]!;
    expect(BigInt(priced.reserved)).toBeGreaterThan(0n);
    expect(priced.reserved_tokens).toBe(Number(BigInt(priced.reserved) / 2n));
    expect(s.devshards[0]!.reserved_tokens).toBe(0);
    expect(s.devshards.map((d) => [d.id, d.active, d.phase, d.active_requests, d.requests_blocked, d.block_reason])).toEqual([
      ['e1', true, 'active', 1, false, undefined],
      ['e2', false, 'settlement', 0, true, 'settled'],
    ]);
  });

  it('settings: defaults, then the effective document with access modes and the kill switch', () => {
    expect(new Projections().settings.effective()).toEqual(DEFAULT_SETTINGS);
    const recs = [...scenario(), ...record([{ streamId: settingsStream, event: ev.disabled('bye', 'https://n/v1') }], 15)];
    const eff = Projections.rebuild(recs).settings.effective();
    expect(eff.request_max_tokens_cap).toBe(8192);
    expect(eff.model_limits).toEqual([{ model_id: 'm1', access_mode: 'api_key' }]);
    expect(eff.disabled).toEqual({ enabled: true, message: 'bye', new_url: 'https://n/v1' });
    expect(eff.escrow_rotation).toEqual({ enabled: false, pre_poc_blocks: 300, models: [] });
  });

  it('settings: configured max-tokens defaults apply to members the operator has not set; the default is clamped to the cap', () => {
    const configured = (d: number, c: number): CatalogEvent => ({ type: 'SettingsDefaultsConfigured', data: { default_request_max_tokens: d, request_max_tokens_cap: c } });
    // settingsChanged() sets the cap (8192) by POST: later configured caps no longer replace it.
    const recs = record([
      { streamId: settingsStream, event: configured(100, 200) },
      { streamId: settingsStream, event: settingsChanged() },
      { streamId: settingsStream, event: configured(9000, 300) },
    ]);
    const p = Projections.rebuild(recs);
    expect(p.settings.asSet()).toMatchObject({ default_request_max_tokens: 9000, request_max_tokens_cap: 8192 });
    expect(p.settings.effective()).toMatchObject({ default_request_max_tokens: 8192, request_max_tokens_cap: 8192 });
    expect(p.settings.configuredDefaults()).toEqual({ default_request_max_tokens: 9000, request_max_tokens_cap: 300 });
    const resumed = Projections.fromCheckpoint(JSON.parse(JSON.stringify(Projections.rebuild(recs.slice(0, 2)).toCheckpoint())))!.applyAll(recs.slice(2));
    expect(resumed.snapshot()).toEqual(p.snapshot());
    expect(resumed.settings.asSet()).toEqual(p.settings.asSet());
  });

  it('rotation debug: stage, counts including settles completed on chain', () => {
    const r = Projections.rebuild(scenario()).rotation.perModel().m1!;
    expect(r).toMatchObject({ stage: 'phase1.settlingRegulars', epoch: 7, event: 'EscrowSettled' });
    expect(r.counts).toMatchObject({ settled: 1, settle_failed: 0, target: 2, existing: 1 });
  });

  it('checkpoint then catch-up equals live; rebuild from 0 equals live (any split point)', () => {
    const all = scenario();
    fc.assert(
      fc.property(fc.integer({ min: 0, max: all.length }), (cut) => {
        const live = new Projections();
        for (const r of all.slice(0, cut)) live.apply(r);
        const cp = JSON.parse(JSON.stringify(live.toCheckpoint()));
        for (const r of all.slice(cut)) live.apply(r);
        const resumed = Projections.fromCheckpoint(cp)!.applyAll(all.slice(cut));
        const rebuilt = Projections.rebuild(all);
        expect(resumed.snapshot()).toEqual(live.snapshot());
        expect(rebuilt.snapshot()).toEqual(live.snapshot());
      }),
      { numRuns: all.length + 1 },
    );
  });

  it('re-applying an already folded record changes nothing', () => {
    const all = scenario();
    const p = Projections.rebuild(all);
    const before = p.snapshot();
    p.applyAll(all);
    expect(p.snapshot()).toEqual(before);
  });
});
