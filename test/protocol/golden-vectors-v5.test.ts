/**
 * The v5 golden vectors: five sessions produced by executing gonka's v5 apply path at
 * zpoken/gonka@86cff503 (test/fixtures/devshard-vectors/README.md). Every step is reproduced under
 * the v5 rule set: each nonce's root, phase, balance, fees, rest hash, host-stats hash, sealed
 * accumulator, warm keys, host stats, live records with their heights, sealed ids and height-sync
 * state; each refused diff's code and exact text with the nonce not advanced (user side too); each
 * settlement, and its host signatures recovering to the slot addresses.
 */
import { describe, expect, it } from 'vitest';
import { DevshardError } from '../../src/protocol/errors.js';
import { STATUS_NAMES, bitmapBytes } from '../../src/protocol/inference-record.js';
import { Replica } from '../../src/protocol/replica.js';
import { buildSettlement, settlementSignatureValid } from '../../src/protocol/settlement.js';
import { fromHex, toHex } from '../../src/protocol/bytes.js';
import { loadVectors, paramsOf, resolverOf, txsOf, VECTOR_DIR_V5, type VectorState } from './vectors.js';

const vectors = loadVectors(VECTOR_DIR_V5);

function observed(r: Replica, sealedNow: bigint[]): VectorState {
  const hs = r.heightSync();
  return {
    state_root: toHex(r.stateRoot()),
    phase: r.phase,
    latest_nonce: Number(r.latestNonce),
    finalize_nonce: Number(r.finalizeNonce),
    balance: Number(r.balance),
    fees: Number(r.fees),
    rest_hash: toHex(r.restHash()),
    host_stats_hash: toHex(r.hostStatsHash()),
    sealed_acc: r.sealedAcc ? toHex(r.sealedAcc) : '',
    warm_keys: Object.fromEntries([...r.warmKeys].map(([k, v]) => [String(k), v])),
    host_stats: r.hostStats().map((h) => ({
      slot: h.slotId,
      missed: h.missed,
      invalid: h.invalid,
      cost: Number(h.cost),
      required_validations: h.requiredValidations,
      completed_validations: h.completedValidations,
    })),
    live: r.liveRecords().map((x) => ({
      id: Number(x.id),
      status: STATUS_NAMES[x.status],
      executor_slot: x.executorSlot,
      reserved_cost: Number(x.reservedCost),
      actual_cost: Number(x.actualCost),
      confirmed_at: Number(x.confirmedAt),
      started_at_height: Number(x.startedAtHeight),
      confirmed_at_height: Number(x.confirmedAtHeight),
      votes_valid: x.votesValid,
      votes_invalid: x.votesInvalid,
      validated_by: toHex(bitmapBytes(x.validatedBy)),
    })),
    sealed_now: sealedNow.map(Number),
    height_sync: {
      forced_start: Number(hs.forcedStart),
      forced_end: Number(hs.forcedEnd),
      cadence_swallow_until: Number(hs.cadenceSwallowUntil),
      swallow_fe: Number(hs.swallowFe),
      turn_k: Number(hs.turnK),
      turn_slots: Number(hs.turnSlots),
      reason: hs.reason,
      last_completed_height: Number(hs.lastCompletedHeight),
      latest_turn_start: Number(hs.latestTurnStart),
    },
  };
}

describe('the v5 golden vectors are all here', () => {
  it('five files, version v5, steps with refusals', () => {
    expect(vectors.map((v) => v.name)).toEqual(['s5a_stamps_basic', 's5b_forced_turn', 's5c_refusals', 's5d_error_miss', 's5e_warm_ack_marks']);
    for (const v of vectors) expect(v.version).toBe('v5');
    expect(vectors.flatMap((v) => v.steps).length).toBe(82);
    expect(vectors.flatMap((v) => v.steps).filter((s) => s.rejected).length).toBe(12);
  });
});

for (const v of vectors) {
  describe(`golden vector ${v.name} (zpoken/gonka@86cff503 v5 apply path executed)`, () => {
    it('the initial state: create fee charged, height-sync state all zero', () => {
      const r = Replica.create(paramsOf(v));
      expect(r.rules).toBe('v5');
      expect(observed(r, [])).toEqual({ ...v.initial, sealed_now: [] }); // the v5 files write no sealed_now before any diff
    });

    it(`reproduces every one of the ${v.steps.length} steps (host side ApplyDiff, signatures checked)`, () => {
      const r = Replica.create(paramsOf(v));
      const resolver = resolverOf(v);
      for (const [i, step] of v.steps.entries()) {
        const diff = { nonce: BigInt(step.nonce), txs: txsOf(step), userSig: fromHex(step.user_sig), postStateRoot: fromHex(step.post_state_root) };
        const at = `step ${i} (nonce ${step.nonce}: ${step.note})`;
        if (step.rejected) {
          const before = toHex(r.stateRoot());
          let err: unknown;
          try {
            r.applyDiff(diff, { warmKeys: resolver });
          } catch (e) {
            err = e;
          }
          expect(err, at).toBeInstanceOf(DevshardError);
          expect((err as DevshardError).code, at).toBe(step.error_code);
          expect((err as DevshardError).message, at).toBe(step.error);
          expect(toHex(r.stateRoot()), at).toBe(before);
          expect(observed(r, []), at).toEqual({ ...step.after, sealed_now: [] });
          continue;
        }
        const res = r.applyDiff(diff, { warmKeys: resolver });
        expect(observed(r, res.sealed), at).toEqual(step.after);
        expect(toHex(res.root), at).toBe(step.after.state_root);
      }
    });

    it('reproduces the user side (ApplyLocal) at every step, with the user error texts', () => {
      const r = Replica.create(paramsOf(v));
      const resolver = resolverOf(v);
      for (const step of v.steps) {
        if (step.rejected) {
          expect(step.user_error).toBeTruthy();
          expect(() => r.applyLocal(BigInt(step.nonce), txsOf(step), { warmKeys: resolver })).toThrow(step.user_error!);
          expect(r.latestNonce).toBe(BigInt(step.nonce) - 1n);
          continue;
        }
        expect(toHex(r.applyLocal(BigInt(step.nonce), txsOf(step), { warmKeys: resolver }).root)).toBe(step.after.state_root);
      }
    });

    it('builds the settlement (BuildSettlement, phase 0x02) and the hosts signatures recover to the slots', () => {
      const r = Replica.create(paramsOf(v));
      for (const step of v.steps) if (!step.rejected) r.applyDiff({ nonce: BigInt(step.nonce), txs: txsOf(step), userSig: fromHex(step.user_sig), postStateRoot: fromHex(step.post_state_root) }, { warmKeys: resolverOf(v) });
      const s = buildSettlement(r);
      const want = v.settlement;
      expect(s.escrowId).toBe(want.escrow_id);
      expect(s.version).toBe(want.state_root_and_protocol_version);
      expect(Number(s.nonce)).toBe(want.nonce);
      expect(Number(s.fees)).toBe(want.fees);
      expect(toHex(s.restHash)).toBe(want.rest_hash);
      expect(toHex(r.hostStatsHash())).toBe(want.host_stats_hash);
      expect(toHex(s.stateRoot)).toBe(want.state_root);
      expect(observed(r, []).host_stats).toEqual(want.host_stats);
      expect(want.verify_settlement_ok).toBe(true);
      const sigs = Object.entries(want.signatures);
      expect(sigs.length).toBeGreaterThan(0);
      for (const [slot, sig] of sigs) {
        expect(settlementSignatureValid(s, v.slots[Number(slot)]!, fromHex(sig), r.warmKeys.get(Number(slot))), `slot ${slot}`).toBe(true);
      }
    });

    it('under the v2 rules the same diffs give other roots from the first nonce on (height_sync_hash)', () => {
      const r = Replica.create({ ...paramsOf(v), rules: 'v2' });
      expect(toHex(r.stateRoot())).not.toBe(v.initial.state_root);
    });
  });
}
