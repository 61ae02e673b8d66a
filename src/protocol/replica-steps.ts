/**
 * The steps of the replica's `applyCore` around its txs (replica.ts): the nonce and start checks
 * before, the rule context the txs apply in, and the per-nonce fee, phase deadline and seals after.
 * Pure: they read and change only the session state handed in.
 */
import { refuse } from './errors.js';
import type { DevshardTx } from './gen/devshard/v1/diff_pb.js';
import { Phase } from './hashes.js';
import { clearExpiredHeightSyncFlags } from './height-sync-flags.js';
import type { InferenceRecord } from './inference-record.js';
import { safe } from './replica-helpers.js';
import type { ApplyOptions } from './replica-types.js';
import { autoSeal, drainLive, shouldAutoSealAtNonce } from './seal.js';
import type { SessionState } from './session-state.js';
import type { RuleContext } from './tx-rules.js';
import type { RuleSet } from './versions.js';

/** Steps 1–2 of `applyCore`: contiguous nonce; at most one start, and its id is the nonce. */
export function precheckDiff(st: SessionState, rules: RuleSet, nonce: bigint, txs: readonly DevshardTx[]): void {
  const expected = st.latestNonce + 1n;
  if (nonce !== expected) throw refuse('InvalidNonce', `expected ${expected}, got ${nonce}`);
  let starts = 0;
  for (const tx of txs) {
    if (tx.tx.case === 'startInference') {
      starts++;
      if (tx.tx.value.inferenceId !== nonce) throw refuse('InvalidInferenceID');
    }
  }
  if (starts > 1) throw refuse('MultipleStartMsgs');
  if (rules === 'v5' && txs.filter((t) => t.tx.case === 'forceHeightSyncTurn').length > 1) throw refuse('MultipleForceHeightSyncTurnMsgs');
}

/**
 * Steps 5–6b: the per-nonce fee while still Active (the finalize diff is free), the nonce, the
 * Finalizing → Settlement deadline (FinalizeNonce + N) with the drain, the auto-seal.
 */
export function finishNonce(st: SessionState, rules: RuleSet, nonce: bigint): InferenceRecord[] {
  if (st.phase === Phase.Active) {
    if (st.balance < st.config.feePerNonce) throw refuse('InsufficientBalance');
    st.balance -= st.config.feePerNonce;
    st.fees += st.config.feePerNonce;
  }
  st.latestNonce = nonce;
  if (rules === 'v5') st.heightSync = clearExpiredHeightSyncFlags(st.heightSync, nonce);
  if (st.phase === Phase.Finalizing && st.finalizeNonce === 0n) st.finalizeNonce = nonce;
  if (st.phase === Phase.Finalizing && st.latestNonce >= st.finalizeNonce + BigInt(st.slots.length)) {
    st.phase = Phase.Settlement;
    return drainLive(st, st.latestNonce, rules);
  }
  if (st.phase === Phase.Active && shouldAutoSealAtNonce(st.config.autoSealEveryNNonces, nonce)) return autoSeal(st, nonce, rules);
  return [];
}

/** The context the txs of one diff apply in; a warm key the resolver authorises is bound to its slot. */
export function ruleContext(
  st: SessionState,
  rules: RuleSet,
  addressSlots: Map<string, number[]>,
  diffNonce: bigint,
  opts: ApplyOptions,
): RuleContext {
  const resolver = opts.warmKeys;
  return {
    state: st,
    rules,
    diffNonce,
    replayingPersisted: opts.replayingPersisted === true,
    addressSlots,
    resolveWarmKey(slot, recovered, expected) {
      const bound = st.warmKeys.get(slot);
      if (bound !== undefined) return bound === recovered;
      if (!resolver || !safe(() => resolver(recovered, expected))) return false;
      st.warmKeys.set(slot, recovered);
      return true;
    },
  };
}
