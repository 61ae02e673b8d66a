/**
 * Rebuilding a replica from recorded diffs alone: each recorded diff carries the warm-key bindings
 * applying it made, so the replay's resolver approves exactly those and never asks the chain
 * (the role devshardctl's per-diff `WarmKeyDelta` plays in gonka 8a35022 devshard/user/session.go).
 */
import type { Diff, ReplicaParams, WarmKeyBinding } from './replica.js';
import { Replica } from './replica.js';

export interface RecordedDiff extends Diff {
  /** The bindings applying this diff made (ApplyResult.warmKeyBindings when it was applied). */
  warmKeyBindings: readonly WarmKeyBinding[];
}

export interface ReplayOptions {
  /** Check each diff's user signature again (default false: the log is ours and hash-chained). */
  checkUserSig?: boolean;
  /** Called after each diff is applied (its records are live then). */
  onApplied?: (d: RecordedDiff, replica: Replica) => void;
}

/**
 * Applies every recorded diff in order and returns the replica. Each diff's post_state_root is
 * compared, so a replay that diverges throws the refusal at the first wrong nonce.
 */
export function replay(params: ReplicaParams, recorded: Iterable<RecordedDiff>, opts: ReplayOptions = {}): Replica {
  const replica = Replica.create(params);
  for (const d of recorded) {
    const allowed = d.warmKeyBindings.map((b) => ({ warm: b.warm, cold: params.slots[b.slot] }));
    replica.applyDiff(d, {
      checkUserSig: opts.checkUserSig ?? false,
      // These diffs were accepted once: checks that only guard new work (v5's max_tokens floor) do not apply.
      replayingPersisted: true,
      warmKeys: (warm, cold) => allowed.some((a) => a.warm === warm && a.cold === cold),
    });
    opts.onApplied?.(d, replica);
  }
  return replica;
}
