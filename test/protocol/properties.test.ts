/**
 * Properties of the replica (fast-check), over random sessions built from the tx kinds of
 * gonka 8a35022 devshard/state/machine.go:
 * - apply is deterministic (two replicas fed the same diffs give the same roots, accepted or not);
 * - the money adds up after every diff, accepted or refused. The invariant the Go code keeps:
 *     amount = balance + fees + Σ host cost + Σ reserved_cost of live Pending/Started records
 *              + Σ reserved_cost of Pending/Started records drained at Settlement
 *   (a start moves its reservation out of the balance, a finish splits it into host cost and
 *   surplus, a timeout returns it, an invalidation moves the cost back; the drain freezes what is
 *   still in flight: on chain it is part of the remainder the creator gets back);
 * - any change of a hashed field changes the root (record entry, host stats, balance, fees,
 *   sealed accumulator, warm keys, version, phase);
 * - no input makes apply throw anything but a DevshardError.
 */
import { create } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sha256, toHex } from '../../src/protocol/bytes.js';
import { DevshardError } from '../../src/protocol/errors.js';
import { DevshardTxSchema, type DevshardTx } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { hostStatsHash, liveHash, Phase, restHashV2, stateRoot, warmKeysHash } from '../../src/protocol/hashes.js';
import { inferenceEntry, InferenceStatus, type InferenceRecord } from '../../src/protocol/inference-record.js';
import { Replica } from '../../src/protocol/replica.js';
import { composeDiff } from '../../src/protocol/compose.js';
import { Kit, TimeoutReason } from './session-kit.js';

type Op =
  | { k: 'start'; input: number; max: number }
  | { k: 'confirm'; back: number; at: number }
  | { k: 'finish'; back: number; tokens: number; wrongSlot: boolean }
  | { k: 'timeout'; back: number; execution: boolean; voters: number[]; accept: boolean }
  | { k: 'validation'; back: number; slot: number; valid: boolean }
  | { k: 'vote'; back: number; slot: number; valid: boolean }
  | { k: 'finalize' }
  | { k: 'reveal' };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 8, arbitrary: fc.record({ k: fc.constant('start' as const), input: fc.integer({ min: 0, max: 400 }), max: fc.integer({ min: 0, max: 400 }) }) },
  { weight: 8, arbitrary: fc.record({ k: fc.constant('confirm' as const), back: fc.integer({ min: 0, max: 4 }), at: fc.integer({ min: 0, max: 100 }) }) },
  { weight: 8, arbitrary: fc.record({ k: fc.constant('finish' as const), back: fc.integer({ min: 0, max: 4 }), tokens: fc.integer({ min: 0, max: 900 }), wrongSlot: fc.boolean() }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('timeout' as const), back: fc.integer({ min: 0, max: 6 }), execution: fc.boolean(), voters: fc.uniqueArray(fc.integer({ min: 0, max: 3 }), { maxLength: 4 }), accept: fc.boolean() }) },
  { weight: 6, arbitrary: fc.record({ k: fc.constant('validation' as const), back: fc.integer({ min: 0, max: 6 }), slot: fc.integer({ min: 0, max: 3 }), valid: fc.boolean() }) },
  { weight: 6, arbitrary: fc.record({ k: fc.constant('vote' as const), back: fc.integer({ min: 0, max: 6 }), slot: fc.integer({ min: 0, max: 3 }), valid: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ k: 'finalize' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'reveal' as const }) },
);

/** A session: diffs of ops; ids are addressed backwards from the current nonce. */
const session = fc.array(fc.array(op, { minLength: 1, maxLength: 3 }), { minLength: 10, maxLength: 40, size: 'max' });

const newKit = () => new Kit({ slotsPerHost: [2, 1, 1], amount: 40_000n, config: { createDevshardFee: 500n, feePerNonce: 50n, voteThreshold: 2, autoSealEveryNNonces: 8, inferenceSealGraceNonces: 5, inferenceSealGraceSeconds: 60 } });

/** The record an op aims at: mostly one in the status the op needs (by index), sometimes any id. */
function target(kit: Kit, o: Op, nonce: bigint): bigint {
  const back = 'back' in o ? o.back : 0;
  const want: Partial<Record<Op['k'], InferenceStatus[]>> = {
    confirm: [InferenceStatus.Pending],
    finish: [InferenceStatus.Started],
    timeout: [InferenceStatus.Pending, InferenceStatus.Started],
    validation: [InferenceStatus.Finished, InferenceStatus.Challenged, InferenceStatus.Validated],
    vote: [InferenceStatus.Challenged],
  };
  const candidates = kit.replica.liveRecords().filter((r) => want[o.k]?.includes(r.status));
  if (back < 4 && candidates.length > 0) return candidates[back % candidates.length]!.id;
  return nonce - 1n - BigInt(back);
}

function txOf(kit: Kit, o: Op, nonce: bigint): DevshardTx | undefined {
  const id = target(kit, o, nonce);
  if (id < 1n && o.k !== 'start' && o.k !== 'finalize' && o.k !== 'reveal') return undefined;
  switch (o.k) {
    case 'start':
      return kit.start(nonce, { inputLength: BigInt(o.input), maxTokens: BigInt(o.max), startedAt: nonce * 10n });
    case 'confirm':
      return kit.replica.inference(id) ? kit.confirm(id, nonce * 10n + BigInt(o.at)) : undefined;
    case 'finish':
      return kit.finish(id, { inputTokens: BigInt(o.tokens), outputTokens: 7n, slot: o.wrongSlot ? (kit.executorSlot(id) + 1) % 4 : kit.executorSlot(id) });
    case 'timeout':
      return kit.timeout(id, o.execution ? TimeoutReason.EXECUTION : TimeoutReason.REFUSED, o.voters, o.accept);
    case 'validation':
      return kit.validation(id, o.slot, o.valid);
    case 'vote':
      return kit.vote(id, o.slot, o.valid);
    case 'finalize':
      return kit.finalize();
    case 'reveal':
      return kit.revealSeed(0);
  }
}

const inFlight = (r: Replica, rec: InferenceRecord) => rec.status === InferenceStatus.Pending || rec.status === InferenceStatus.Started;

function moneyHolds(r: Replica, amount: bigint, locked: bigint): void {
  const cost = r.hostStats().reduce((a, h) => a + h.cost, 0n);
  const reserved = r.liveRecords().reduce((a, rec) => a + (inFlight(r, rec) ? rec.reservedCost : 0n), 0n);
  expect(r.balance + r.fees + cost + reserved + locked).toBe(amount);
}

/** The root with every part hashed again from the replica's state (no cache). */
const rootFromScratch = (r: Replica): string =>
  toHex(stateRoot(hostStatsHash(r.hostStats()), r.fees, restHashV2(r.balance, r.sealedAcc ?? new Uint8Array(32), liveHash(r.liveRecords().map(inferenceEntry)), warmKeysHash(r.warmKeys)), r.version, r.phase));

describe('replica properties', () => {
  it('deterministic; the host accepts what the user composes; the money adds up after every diff', () => {
    let accepted = 0;
    let composed = 0;
    const seen = new Set<InferenceStatus>();
    let settled = 0;
    fc.assert(
      fc.property(session, (diffs) => {
        const kit = newKit(); // kit.replica is the host (ApplyDiff)
        const user = Replica.create(kit.replica.params); // the gateway's replica
        let locked = 0n;
        for (const ops of diffs) {
          const nonce = kit.nextNonce;
          const txs = ops.map((o) => txOf(kit, o, nonce)).filter((t): t is DevshardTx => t !== undefined);
          // 1. the raw txs, strictly: host and user agree on accept / refuse and on the root
          let hostRoot: string, userRoot: string;
          let res;
          try {
            res = kit.apply(txs);
            hostRoot = toHex(res.root);
          } catch (e) {
            expect(e).toBeInstanceOf(DevshardError);
            hostRoot = `refused ${(e as Error).message}`;
          }
          try {
            userRoot = toHex(user.applyLocal(nonce, txs).root);
          } catch (e) {
            userRoot = `refused ${(e as Error).message}`;
          }
          expect(userRoot).toBe(hostRoot);
          // 2. refused: the user composes best effort instead, the host must accept that diff and its root
          if (!res) {
            const starts = txs.filter((t) => t.tx.case === 'startInference' || t.tx.case === 'finalizeRound');
            const others = txs.filter((t) => !starts.includes(t));
            let c;
            try {
              c = composeDiff(user, { pending: others, extra: starts });
            } catch (e) {
              expect(e).toBeInstanceOf(DevshardError); // a refused start: the nonce is not used
              continue;
            }
            res = kit.apply(c.applied, c.root);
            composed++;
          } else accepted++;
          for (const rec of kit.replica.liveRecords()) seen.add(rec.status);
          if (kit.replica.phase === Phase.Settlement) settled++;
          // the drain at Settlement freezes the reservations still in flight
          if (kit.replica.phase === Phase.Settlement) for (const rec of res.sealedRecords) if (inFlight(kit.replica, rec)) locked += rec.reservedCost;
          expect(user.stateRoot()).toEqual(kit.replica.stateRoot());
          // the replica's incremental live hash is the hash of the whole live set, recomputed
          expect(toHex(user.stateRoot())).toBe(rootFromScratch(user));
          expect(toHex(kit.replica.stateRoot())).toBe(rootFromScratch(kit.replica));
          moneyHolds(kit.replica, 40_000n, locked);
        }
      }),
      // A fixed seed by default: the coverage check below (the sessions reach every interesting state)
      // failed about one run in ten with a random seed. PROP_SEED / PROP_RUNS explore further.
      { numRuns: Number(process.env.PROP_RUNS ?? 25), seed: Number(process.env.PROP_SEED ?? 20261125) },
    );
    // the generated sessions do reach the interesting states
    expect(accepted).toBeGreaterThan(30);
    expect(composed).toBeGreaterThan(30);
    expect(settled).toBeGreaterThan(0);
    for (const st of [InferenceStatus.Pending, InferenceStatus.Started, InferenceStatus.Finished, InferenceStatus.Challenged, InferenceStatus.TimedOut]) expect(seen.has(st), InferenceStatus[st]).toBe(true);
  });

  it('no input makes apply throw anything but a DevshardError', () => {
    const anyTx: fc.Arbitrary<DevshardTx> = fc.oneof(
      fc.record({ inferenceId: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), promptHash: fc.uint8Array({ maxLength: 40 }), model: fc.string(), inputLength: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), maxTokens: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), startedAt: fc.bigInt({ min: -(1n << 63n), max: (1n << 63n) - 1n }) }).map((value) => create(DevshardTxSchema, { tx: { case: 'startInference', value } })),
      fc.record({ inferenceId: fc.bigInt({ min: 0n, max: 5n }), executorSig: fc.uint8Array({ minLength: 64, maxLength: 66 }), confirmedAt: fc.bigInt({ min: -(1n << 63n), max: (1n << 63n) - 1n }) }).map((value) => create(DevshardTxSchema, { tx: { case: 'confirmStart', value } })),
      fc.record({ inferenceId: fc.bigInt({ min: 0n, max: 5n }), inputTokens: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), outputTokens: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), executorSlot: fc.nat(), proposerSig: fc.uint8Array({ minLength: 65, maxLength: 65 }), escrowId: fc.string() }).map((value) => create(DevshardTxSchema, { tx: { case: 'finishInference', value } })),
      fc.record({ inferenceId: fc.bigInt({ min: 0n, max: 5n }), reason: fc.integer({ min: -3, max: 5 }), votes: fc.array(fc.record({ voterSlot: fc.nat(), accept: fc.boolean(), signature: fc.uint8Array({ minLength: 65, maxLength: 65 }) }), { maxLength: 3 }) }).map((value) => create(DevshardTxSchema, { tx: { case: 'timeoutInference', value } })),
      fc.record({ inferenceId: fc.bigInt({ min: 0n, max: 5n }), validatorSlot: fc.nat(), valid: fc.boolean(), proposerSig: fc.uint8Array({ maxLength: 65 }), escrowId: fc.string() }).map((value) => create(DevshardTxSchema, { tx: { case: 'validation', value } })),
      fc.record({ inferenceId: fc.bigInt({ min: 0n, max: 5n }), voterSlot: fc.nat(), voteValid: fc.boolean(), proposerSig: fc.uint8Array({ maxLength: 65 }), escrowId: fc.string() }).map((value) => create(DevshardTxSchema, { tx: { case: 'validationVote', value } })),
      fc.constant(create(DevshardTxSchema, {})),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.bigInt({ min: 0n, max: 4n }), fc.array(anyTx, { maxLength: 4 }), fc.uint8Array({ maxLength: 33 })), { maxLength: 6 }), (steps) => {
        const kit = newKit();
        for (const [nonce, txs, root] of steps) {
          for (const f of [() => kit.replica.applyLocal(nonce, txs), () => kit.replica.applyLocalBestEffort(nonce, txs), () => kit.replica.applyDiff({ nonce, txs, userSig: root, postStateRoot: root })]) {
            try {
              f();
            } catch (e) {
              expect(e).toBeInstanceOf(DevshardError);
            }
          }
        }
      }),
      { numRuns: 150 },
    );
  });

  it('changing any hashed field changes the root', () => {
    const record = fc.record({
      id: fc.bigInt({ min: 0n, max: 1n << 40n }),
      status: fc.integer({ min: 0, max: 6 }),
      executorSlot: fc.integer({ min: 0, max: 127 }),
      model: fc.string({ maxLength: 8 }),
      promptHash: fc.uint8Array({ maxLength: 32 }),
      responseHash: fc.uint8Array({ maxLength: 32 }),
      inputLength: fc.bigInt({ min: 0n, max: 1n << 40n }),
      maxTokens: fc.bigInt({ min: 0n, max: 1n << 40n }),
      inputTokens: fc.bigInt({ min: 0n, max: 1n << 40n }),
      outputTokens: fc.bigInt({ min: 0n, max: 1n << 40n }),
      reservedCost: fc.bigInt({ min: 0n, max: 1n << 40n }),
      actualCost: fc.bigInt({ min: 0n, max: 1n << 40n }),
      startedAt: fc.bigInt({ min: -(1n << 40n), max: 1n << 40n }),
      confirmedAt: fc.bigInt({ min: -(1n << 40n), max: 1n << 40n }),
      startedAtHeight: fc.bigInt({ min: 0n, max: 1n << 40n }),
      confirmedAtHeight: fc.bigInt({ min: 0n, max: 1n << 40n }),
      votesValid: fc.integer({ min: 0, max: 200 }),
      votesInvalid: fc.integer({ min: 0, max: 200 }),
      validatedBy: fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }),
    }) as fc.Arbitrary<InferenceRecord>;
    const bump = (v: unknown): unknown =>
      typeof v === 'bigint' ? v + 1n : typeof v === 'number' ? v + 1 : typeof v === 'string' ? `${v}x` : v instanceof Uint8Array ? Uint8Array.from([...v, 1]) : v;
    const fields = ['id', 'status', 'executorSlot', 'model', 'promptHash', 'responseHash', 'inputLength', 'maxTokens', 'inputTokens', 'outputTokens', 'reservedCost', 'actualCost', 'startedAt', 'confirmedAt', 'startedAtHeight', 'confirmedAtHeight', 'votesValid', 'votesInvalid'] as const;
    fc.assert(
      fc.property(record, fc.constantFrom(...fields, 'validatedBy' as const), fc.integer({ min: 0, max: 127 }), (rec, field, bit) => {
        const changed = { ...rec, [field]: field === 'validatedBy' ? rec.validatedBy ^ (1n << BigInt(bit)) : bump(rec[field]) } as InferenceRecord;
        expect(toHex(inferenceEntry(changed))).not.toBe(toHex(inferenceEntry(rec)));
        const rootOf = (r: InferenceRecord) => toHex(restHashV2(0n, new Uint8Array(32), liveHash([inferenceEntry(r)]), warmKeysHash(new Map())));
        expect(rootOf(changed)).not.toBe(rootOf(rec));
      }),
      { numRuns: 300 },
    );
    const stats = fc.array(fc.record({ missed: fc.nat(1000), invalid: fc.nat(1000), cost: fc.bigInt({ min: 0n, max: 1n << 50n }), requiredValidations: fc.nat(1000), completedValidations: fc.nat(1000) }), { minLength: 1, maxLength: 6 });
    fc.assert(
      fc.property(stats, fc.nat(), fc.constantFrom('missed', 'invalid', 'cost', 'requiredValidations', 'completedValidations'), (st, i, f) => {
        const list = st.map((s, slotId) => ({ slotId, ...s }));
        const j = i % list.length;
        const changed = list.map((s, k) => (k === j ? { ...s, [f]: bump(s[f]) } : s));
        expect(toHex(hostStatsHash(changed))).not.toBe(toHex(hostStatsHash(list)));
      }),
      { numRuns: 200 },
    );
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 1n << 60n }), fc.bigInt({ min: 0n, max: 1n << 60n }), fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.integer({ min: 0, max: 2 }), fc.nat(200), (balance, fees, acc, phase, slot) => {
        const hs = sha256(Uint8Array.of(1));
        const live = liveHash([]);
        const warm = new Map([[slot, 'gonka1warm']]);
        const root = (b = balance, f = fees, a: Uint8Array = acc, p = phase as Phase, w: ReadonlyMap<number, string> = warm, v = 'v2') => toHex(stateRoot(hs, f, restHashV2(b, a, live, warmKeysHash(w)), v, p));
        const base = root();
        expect(root(balance + 1n)).not.toBe(base);
        expect(root(balance, fees + 1n)).not.toBe(base);
        expect(root(balance, fees, sha256(acc))).not.toBe(base);
        expect(root(balance, fees, acc, ((phase + 1) % 3) as Phase)).not.toBe(base);
        expect(root(balance, fees, acc, phase as Phase, new Map([[slot + 1, 'gonka1warm']]))).not.toBe(base);
        expect(root(balance, fees, acc, phase as Phase, new Map())).not.toBe(base);
        expect(root(balance, fees, acc, phase as Phase, warm, 'v1')).not.toBe(base);
      }),
      { numRuns: 100 },
    );
  });
});
