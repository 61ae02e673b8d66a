/**
 * A 400-nonce session end to end: composed on the user side, applied by an independent host-side
 * replica (ApplyDiff: signature, nonce, root), rebuilt by `replay` from the recorded diffs and their
 * warm-key bindings alone, reaching Settlement at FinalizeNonce + N = 400.
 *
 * With SHARDGATE_CAPTURE_DIR set, it also writes the session in the realnet capture format
 * (`<dir>/captures/*.json`) and the settlement file (`<dir>/settlement.json`) plus the flags the
 * witness needs (`<dir>/witness-args.txt`); docs/protocol.md shows the witness run.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { Phase } from '../../src/protocol/hashes.js';
import { InferenceStatus } from '../../src/protocol/inference-record.js';
import { Replica } from '../../src/protocol/replica.js';
import { replay } from '../../src/protocol/replay.js';
import { buildLongSession, LONG, type LongSession } from './long-session.js';

let s: LongSession;
beforeAll(() => {
  s = buildLongSession();
}, 120_000);

describe('a 400-nonce session (compose, apply, replay)', () => {
  it('reaches Settlement at FinalizeNonce + N, with seals along the way and everything drained', () => {
    const r = s.kit.replica;
    expect(r.latestNonce).toBe(400n);
    expect(r.finalizeNonce).toBe(LONG.finalizeAt);
    expect(r.phase).toBe(Phase.Settlement);
    expect(r.liveRecords()).toEqual([]);
    expect(s.sealNonces.length).toBeGreaterThan(5);
    expect(s.sealNonces.every((n) => n % 25n === 0n)).toBe(true);
    // fees: create + fee × (F − 1): the finalize diff and those after it are free
    expect(r.fees).toBe(10_000n + 100n * (LONG.finalizeAt - 1n));
    const stats = r.hostStats();
    expect(stats.reduce((a, h) => a + h.missed, 0)).toBe(2);
    expect(stats.reduce((a, h) => a + h.invalid, 0)).toBe(1);
    expect(r.warmKeys.get(4)).toBe(LONG.warm.address);
  });

  it('every diff is accepted by a host-side replica (user signature, nonce, post_state_root)', () => {
    const host = Replica.create(s.kit.replica.params);
    const warmKeys = s.kit.warmKeys;
    const seen = new Set<InferenceStatus>();
    for (const d of s.diffs) {
      expect(host.applyDiff(d, { warmKeys }).root).toEqual(d.postStateRoot);
      for (const rec of host.liveRecords()) seen.add(rec.status);
    }
    expect(seen).toEqual(new Set([InferenceStatus.Pending, InferenceStatus.Started, InferenceStatus.Finished, InferenceStatus.Challenged, InferenceStatus.Validated, InferenceStatus.Invalidated, InferenceStatus.TimedOut]));
  });

  it('replay rebuilds the replica from the recorded diffs and warm-key bindings alone (no resolver)', () => {
    const rebuilt = replay(s.kit.replica.params, s.diffs, { checkUserSig: true });
    expect(rebuilt.stateRoot()).toEqual(s.kit.replica.stateRoot());
    expect(rebuilt.settlementRoot()).toEqual(s.kit.replica.settlementRoot());
    // Without the recorded binding the replay refuses the first warm-key confirmation.
    const stripped = s.diffs.map((d) => ({ ...d, warmKeyBindings: [] }));
    expect(() => replay(s.kit.replica.params, stripped)).toThrow(/invalid executor signature/);
  });

  it('writes the capture and the settlement file when SHARDGATE_CAPTURE_DIR is set', () => {
    const dir = process.env.SHARDGATE_CAPTURE_DIR;
    if (!dir) return;
    mkdirSync(join(dir, 'captures'), { recursive: true });
    for (const c of s.captures) writeFileSync(join(dir, 'captures', c.name), `${JSON.stringify(c.json, null, 1)}\n`);
    writeFileSync(join(dir, 'settlement.json'), s.settlementJson);
    const C = LONG.config;
    const args = [
      `--slots ${s.slots.join(',')}`,
      `--amount ${LONG.amount}`,
      `--creator ${s.kit.user.address}`,
      `--token-price ${C.tokenPrice} --fee-create ${C.createDevshardFee} --fee-per-nonce ${C.feePerNonce}`,
      `--seal-grace-nonces ${C.inferenceSealGraceNonces} --seal-grace-seconds ${C.inferenceSealGraceSeconds} --auto-seal-every ${C.autoSealEveryNNonces}`,
      `--vote-threshold ${C.voteThreshold}`,
      `--warm 4=${LONG.warm.address}`,
    ];
    writeFileSync(join(dir, 'witness-args.txt'), `${args.join(' ')}\n`);
  });
});
