/**
 * The golden vectors: four sessions produced by executing gonka's own devshard/state at 8a35022
 * (test/fixtures/devshard-vectors/README.md). Every step is reproduced: each nonce's root, phase,
 * balance, fees, rest hash, host-stats hash, sealed accumulator, warm keys, host stats, live records
 * and sealed ids; each refused diff's code and exact text (and the nonce not advanced); each
 * settlement, and its host signatures recovering to the slot addresses.
 */
import { describe, expect, it } from 'vitest';
import { DevshardError } from '../../src/protocol/errors.js';
import { STATUS_NAMES, bitmapBytes } from '../../src/protocol/inference-record.js';
import { Replica } from '../../src/protocol/replica.js';
import { buildSettlement, settlementSignatureValid } from '../../src/protocol/settlement.js';
import { fromHex, toHex } from '../../src/protocol/bytes.js';
import { loadVectors, paramsOf, resolverOf, txsOf, type VectorState } from './vectors.js';

function observed(r: Replica, sealedNow: bigint[]): VectorState {
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
      votes_valid: x.votesValid,
      votes_invalid: x.votesInvalid,
      validated_by: toHex(bitmapBytes(x.validatedBy)),
    })),
    sealed_now: sealedNow.map(Number),
  };
}

for (const v of loadVectors()) {
  describe(`golden vector ${v.name} (gonka 8a35022 devshard/state executed)`, () => {
    it('the initial state: create fee charged, one zero host-stats entry per slot, phase Active', () => {
      const r = Replica.create(paramsOf(v));
      expect(observed(r, [])).toEqual(v.initial);
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
          if (step.user_error == null) continue; // a wrong post_state_root is a host-side refusal only
          expect(() => r.applyLocal(BigInt(step.nonce), txsOf(step), { warmKeys: resolver })).toThrow(step.user_error);
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
  });
}
