/**
 * Properties of the v5 rule set over random sessions: starts, confirms and finishes stamped around
 * the floor (below it too), heartbeats, acks (to real and to missing heartbeats), forced turns,
 * error-misses and the finalize rounds. Each nonce is composed best-effort on the user's replica
 * (as the gateway does), signed, and applied on a host replica.
 *
 * - the root is deterministic: the host's ApplyDiff and a replay of the recorded diffs reach the
 *   user's root at every nonce;
 * - a regression never enters a diff: every stamp in an accepted diff is at least F(its producing
 *   nonce), and a diff forced to carry one is refused whole by the host;
 * - the money invariant: amount = balance + fees + Σ host cost + Σ reservations still pending or
 *   started (after the drain: balance + fees + Σ host cost).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { toHex } from '../../src/protocol/bytes.js';
import { composeDiff, signDiff } from '../../src/protocol/compose.js';
import { DevshardError } from '../../src/protocol/errors.js';
import type { DevshardTx } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { Phase } from '../../src/protocol/hashes.js';
import { InferenceStatus } from '../../src/protocol/inference-record.js';
import { Replica } from '../../src/protocol/replica.js';
import { replay, type RecordedDiff } from '../../src/protocol/replay.js';
import { producingNonce, stampOf, type Stamp } from '../../src/protocol/stamps.js';
import { Kit, stampAt } from './session-kit.js';

const AMOUNT = 1_000_000n;

/** One nonce's choices; numbers are resolved against the state when the nonce is composed. */
const step = fc.record({
  start: fc.option(fc.record({ maxTokens: fc.integer({ min: 60, max: 200 }), stamp: fc.constantFrom('none', 'floor', 'below', 'above') }), { nil: undefined }),
  heartbeat: fc.option(fc.constantFrom('none', 'floor', 'below', 'above'), { nil: undefined }),
  force: fc.boolean(),
  confirms: fc.array(fc.tuple(fc.nat(), fc.integer({ min: -30, max: 60 }), fc.boolean()), { maxLength: 2 }),
  finishes: fc.array(fc.tuple(fc.nat(), fc.integer({ min: -30, max: 60 }), fc.boolean(), fc.nat(300)), { maxLength: 2 }),
  acks: fc.array(fc.tuple(fc.nat(), fc.nat(3), fc.integer({ min: -30, max: 60 }), fc.boolean()), { maxLength: 3 }),
  errorMiss: fc.option(fc.nat(), { nil: undefined }),
  finalize: fc.integer({ min: 0, max: 30 }),
  forceRegression: fc.boolean(),
});

type Step = typeof step extends fc.Arbitrary<infer T> ? T : never;

const pick = <T>(xs: readonly T[], i: number): T | undefined => (xs.length === 0 ? undefined : xs[i % xs.length]);

function stampFor(k: Kit, nonce: bigint, how: string, delta = 0): Stamp | undefined {
  const f = k.replica.floorAt(nonce);
  if (how === 'none') return undefined;
  if (how === 'floor') return k.replica.referenceStamp(nonce);
  const base = f.height > 0n ? f.height : 1000n;
  const h = how === 'below' ? base - 5n : how === 'above' ? base + 40n : base + BigInt(delta);
  return stampAt(h < 1n ? 1n : h);
}

function moneyHolds(r: Replica): void {
  const costs = r.hostStats().reduce((a, s) => a + s.cost, 0n);
  const reserved = r
    .liveRecords()
    .filter((x) => x.status === InferenceStatus.Pending || x.status === InferenceStatus.Started)
    .reduce((a, x) => a + x.reservedCost, 0n);
  expect(r.balance + r.fees + costs + reserved).toBe(AMOUNT);
  if (r.phase === Phase.Settlement) expect(r.liveRecords()).toEqual([]);
}

function runSession(steps: Step[]): { roots: string[]; recorded: RecordedDiff[]; kit: Kit; floors: Map<bigint, bigint> } {
  const k = new Kit({ hosts: 4, amount: AMOUNT, rules: 'v5', config: { tokenPrice: 2n, createDevshardFee: 100n, feePerNonce: 3n, autoSealEveryNNonces: 5, inferenceSealGraceNonces: 3, inferenceSealGraceSeconds: 1, executionTimeout: 2n } });
  const host = Replica.create(k.replica.params);
  const heartbeats: bigint[] = [];
  const roots: string[] = [];
  const recorded: RecordedDiff[] = [];
  /** F(n + 1) as it stood right after nonce n applied: final from then on. */
  const floors = new Map<bigint, bigint>();
  let finalizeAt = -1;
  for (const [i, s] of steps.entries()) {
    const nonce = k.nextNonce;
    const live = k.replica.liveRecords();
    const pending: DevshardTx[] = [];
    for (const [j, delta, stamped] of s.confirms) {
      const rec = pick(live.filter((x) => x.status === InferenceStatus.Pending), j);
      if (rec) pending.push(k.confirm(rec.id, 1000n + rec.id, undefined, stamped ? stampFor(k, rec.id, 'delta', delta) : undefined));
    }
    for (const [j, delta, stamped, out] of s.finishes) {
      const rec = pick(live.filter((x) => x.status === InferenceStatus.Started), j);
      if (rec) pending.push(k.finish(rec.id, { inputTokens: 10n, outputTokens: BigInt(out), stamp: stamped ? stampFor(k, rec.id, 'delta', delta) : undefined }));
    }
    for (const [j, slot, delta, real] of s.acks) {
      const ref = real ? pick(heartbeats, j) : BigInt(j % 50) + 1n;
      if (ref !== undefined) pending.push(k.ack(ref, slot, stampFor(k, ref + 1n, 'delta', delta)));
    }
    const finished = pick(live.filter((x) => x.status === InferenceStatus.Finished), s.errorMiss ?? 0);
    if (s.errorMiss !== undefined && finished) pending.push(k.errorMiss(finished.id, [0, 1, 2, 3].filter((x) => x !== finished.executorSlot)));
    const extra: DevshardTx[] = [];
    if (finalizeAt < 0 && s.finalize === 0 && i > 2) {
      extra.push(k.finalize());
      finalizeAt = i;
    } else {
      if (s.force) extra.push(k.forceTurn(nonce));
      if (s.heartbeat) extra.push(k.heartbeat(stampFor(k, nonce, s.heartbeat)));
      if (s.start) extra.push(k.start(nonce, { maxTokens: BigInt(s.start.maxTokens), stamp: stampFor(k, nonce, s.start.stamp) }));
    }

    // What the floor says before this nonce: the bar every stamp in it must clear.
    const floorBefore = (m: bigint) => k.replica.floorAt(m);
    const bars = new Map<DevshardTx, bigint>();
    for (const tx of [...pending, ...extra]) {
      const m = producingNonce(nonce, tx);
      if (m !== undefined && stampOf(tx)) {
        const f = floorBefore(m);
        bars.set(tx, f.known ? f.height : 0n);
      }
    }

    // A host refuses a diff forced to carry a stamp below F, whole.
    const floorNow = k.replica.floor();
    if (s.forceRegression && floorNow.height > 1n && k.replica.phase === Phase.Active) {
      const bad = k.heartbeat(stampAt(floorNow.height - 1n));
      const d = signDiff(k.escrowId, nonce, [bad], new Uint8Array(0), k.user.priv);
      expect(() => host.applyDiff(d)).toThrow(DevshardError);
      expect(host.latestNonce).toBe(nonce - 1n);
    }

    let composed;
    try {
      composed = composeDiff(k.replica, { pending, extra });
    } catch (e) {
      expect(e).toBeInstanceOf(DevshardError);
      expect(k.replica.latestNonce).toBe(nonce - 1n); // the nonce is not used
      try {
        composed = composeDiff(k.replica, { pending, extra: extra.filter((t) => t.tx.case !== 'startInference') });
      } catch (e2) {
        expect(e2).toBeInstanceOf(DevshardError); // nothing left after the log plane's drops
        continue;
      }
    }
    for (const tx of composed.applied) {
      const bar = bars.get(tx);
      if (bar !== undefined) expect(stampOf(tx)!.height >= bar, `nonce ${nonce}: a stamp below F entered the diff`).toBe(true);
      if (tx.tx.case === 'heartbeat') heartbeats.push(nonce);
    }
    const d = signDiff(k.escrowId, nonce, composed.applied, composed.root, k.user.priv);
    const hostResult = host.applyDiff(d, { warmKeys: k.warmKeys });
    expect(toHex(hostResult.root)).toBe(toHex(composed.root));
    recorded.push({ ...d, warmKeyBindings: composed.warmKeyBindings });
    roots.push(toHex(composed.root));
    floors.set(nonce + 1n, k.replica.floorAt(nonce + 1n).height);
    moneyHolds(k.replica);
    moneyHolds(host);
  }
  return { roots, recorded, kit: k, floors };
}

describe('v5 properties over random sessions', () => {
  it('the root is deterministic; no stamp below F enters a diff; the money invariant holds at every nonce', () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 5, maxLength: 30 }), (steps) => {
        const a = runSession(steps);
        const b = runSession(steps);
        expect(b.roots).toEqual(a.roots);
        const replayed = replay(a.kit.replica.params, a.recorded);
        expect(toHex(replayed.stateRoot())).toBe(toHex(a.kit.replica.stateRoot()));
        expect(replayed.heightSync()).toEqual(a.kit.replica.heightSync());
        expect(replayed.floor()).toEqual(a.kit.replica.floor());
      }),
      { numRuns: 40 },
    );
  });

  it('the floor never falls: F(m) is non-decreasing in m and F(m) for a past m never changes', () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 5, maxLength: 25 }), (steps) => {
        const { kit, floors } = runSession(steps);
        const r = kit.replica;
        for (const [m, f] of floors) expect(r.floorAt(m).height).toBe(f);
        let prev = 0n;
        for (let m = 1n; m <= r.latestNonce + 1n; m++) {
          const f = r.floorAt(m).height;
          expect(f >= prev).toBe(true);
          prev = f;
        }
      }),
      { numRuns: 25 },
    );
  });
});
