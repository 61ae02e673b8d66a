/**
 * Every phase change the replica makes is a transition the session-phase statechart allows
 * (src/machines/devshard-session-phase.ts), over the golden vectors (gonka 8a35022 devshard/state
 * executed) and the 400-nonce session; and the chart has no transition the replica never makes.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { devshardSessionPhaseMachine, DEVSHARD_PHASE_STATES, type DevshardSessionPhaseEvent } from '../../src/machines/devshard-session-phase.js';
import { Phase } from '../../src/protocol/hashes.js';
import { Replica, type Diff } from '../../src/protocol/replica.js';
import { fromHex } from '../../src/protocol/bytes.js';
import { buildLongSession } from './long-session.js';
import { loadVectors, paramsOf, resolverOf, txsOf } from './vectors.js';

const EVENT_FOR: Record<string, DevshardSessionPhaseEvent['type']> = {
  [`${Phase.Active}->${Phase.Finalizing}`]: 'FinalizeRoundApplied',
  [`${Phase.Finalizing}->${Phase.Settlement}`]: 'FinalizeDeadlineReached',
};

function followPhases(replica: Replica, diffs: Iterable<Diff>, warmKeys?: (w: string, c: string) => boolean): string[] {
  const actor = createActor(devshardSessionPhaseMachine).start();
  const taken: string[] = [];
  for (const d of diffs) {
    const before = replica.phase;
    try {
      replica.applyDiff(d, { warmKeys });
    } catch {
      continue;
    }
    const after = replica.phase;
    if (after === before) continue;
    const type = EVENT_FOR[`${before}->${after}`];
    expect(type, `phase ${before} -> ${after} has no event`).toBeDefined();
    const snap = actor.getSnapshot();
    expect(snap.can({ type: type! }), `${snap.value} cannot take ${type}`).toBe(true);
    actor.send({ type: type! });
    expect(actor.getSnapshot().value).toBe(DEVSHARD_PHASE_STATES[after]);
    taken.push(type!);
  }
  return taken;
}

describe('the replica moves phases only as the session-phase chart allows', () => {
  for (const v of loadVectors()) {
    it(`golden vector ${v.name}`, () => {
      const diffs = v.steps.map((s) => ({ nonce: BigInt(s.nonce), txs: txsOf(s), userSig: fromHex(s.user_sig), postStateRoot: fromHex(s.post_state_root) }));
      expect(followPhases(Replica.create(paramsOf(v)), diffs, resolverOf(v))).toEqual(['FinalizeRoundApplied', 'FinalizeDeadlineReached']);
    });
  }

  it('the 400-nonce session', () => {
    const s = buildLongSession();
    expect(followPhases(Replica.create(s.kit.replica.params), s.diffs, s.kit.warmKeys)).toEqual(['FinalizeRoundApplied', 'FinalizeDeadlineReached']);
  }, 60_000);
});
