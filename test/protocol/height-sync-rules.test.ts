/**
 * The v5 rules the golden vectors leave open, as given/when/then tests of the replica. Each test
 * names the Z5 Go test or function it follows (zpoken/gonka@86cff503: devshard/state/
 * heightsync_floor_test.go, logplane_test.go, heightsync_test.go; state/heightsync.go,
 * state/machine.go, state/seal.go; heightsync/logplane.go, floor.go, cadence.go, turn.go). Keys are
 * ours, so figures and texts are checked, not roots.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { toHex, utf8 } from '../../src/protocol/bytes.js';
import { composeDiff } from '../../src/protocol/compose.js';
import { DevshardError } from '../../src/protocol/errors.js';
import { FLOOR_WINDOW, HeightFloor } from '../../src/protocol/floor.js';
import { heartbeatTx } from '../../src/protocol/height-sync.js';
import { cadenceSwallow, NO_HEIGHT_SYNC_FLAGS } from '../../src/protocol/height-sync-flags.js';
import { ACK_DEADLINE_BLOCKS, turnQuorum } from '../../src/protocol/height-turns.js';
import { Phase } from '../../src/protocol/hashes.js';
import { InferenceStatus } from '../../src/protocol/inference-record.js';
import { Replica } from '../../src/protocol/replica.js';
import { SEQUENCER_SIGNER } from '../../src/protocol/stamps.js';
import { Kit, keyOf, stampAt } from './session-kit.js';

const v5 = (opts: ConstructorParameters<typeof Kit>[0] = {}) => new Kit({ hosts: 4, amount: 1_000_000n, ...opts, rules: 'v5' });

/** A diff that must be refused whole with `code` (and `text`), the nonce not used. */
function refusedWith(k: Kit, txs: Parameters<Kit['apply']>[0], code: DevshardError['code'], text?: string | RegExp): DevshardError {
  const before = toHex(k.replica.stateRoot());
  const nonce = k.replica.latestNonce;
  let err: unknown;
  try {
    k.apply(txs);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(DevshardError);
  expect((err as DevshardError).code).toBe(code);
  if (typeof text === 'string') expect((err as DevshardError).message).toBe(text);
  else if (text) expect((err as DevshardError).message).toMatch(text);
  expect(toHex(k.replica.stateRoot())).toBe(before);
  expect(k.replica.latestNonce).toBe(nonce);
  return err as DevshardError;
}

describe('the floor F (heightsync/floor.go, state/heightsync.go observeHeightSyncLocked)', () => {
  it('TestHeightSyncFloor_HostClaimSetsLogicalTimeAtAnyDistance: a host ack above F sets it, however far', () => {
    const k = v5();
    k.apply([k.heartbeat()]);
    k.apply([k.ack(1n, 1, stampAt(250n))]);
    expect(k.replica.floorAt(3n).height).toBe(250n);
    const far = stampAt((1n << 63n) - 1n);
    k.apply([k.ack(1n, 0, far)]);
    const f = k.replica.floorAt(4n);
    expect([f.height, toHex(f.hash), f.known]).toEqual([far.height, toHex(far.hash), true]);
    expect(k.replica.phase).toBe(Phase.Active);
  });

  it('TestHeightSyncFloor_PoisonedLowFloorIsRepairedByAnHonestHost: the next honest host stamp moves it', () => {
    const k = v5();
    k.apply([k.heartbeat()]);
    k.apply([k.ack(1n, 0, stampAt(1n))]);
    expect(k.replica.floorAt(3n).height).toBe(1n);
    k.apply([k.heartbeat(stampAt(1n))]); // the user carries F while it is wrong
    k.apply([k.ack(3n, 1, stampAt(10_000n))]);
    expect(k.replica.floorAt(5n).height).toBe(10_000n);
  });

  it('TestHeightSyncFloor_ReorgReturnsToTheLiveBranch: the floor never falls; hosts carry it until the live branch passes it', () => {
    const k = v5();
    const dead = stampAt(250n, Uint8Array.of(0xde, 0xad));
    k.apply([k.heartbeat(dead)]);
    k.apply([0, 1, 2, 3].map((s) => k.ack(1n, s, dead)));
    expect(k.replica.floorAt(3n).height).toBe(250n);
    // A host on the shorter branch stamping its own 240 is a regression, refused whole.
    k.apply([k.heartbeat(dead)]);
    refusedWith(k, [k.ack(3n, 0, stampAt(240n))], 'HeightRegression', 'INVALID(height_regression): ack height 240 < floor 250 as of nonce 4');
    // Carrying F is honest and keeps the escrow going; the floor stays where it was.
    k.apply([0, 1, 2, 3].map((s) => k.ack(3n, s, dead)));
    expect(k.replica.floorAt(5n).height).toBe(250n);
    const live = stampAt(260n, Uint8Array.of(0x11, 0xfe));
    k.apply([k.heartbeat(dead)]);
    k.apply([0, 1, 2, 3].map((s) => k.ack(5n, s, live)));
    expect(toHex(k.replica.floorAt(7n).hash)).toBe(toHex(live.hash));
    expect(k.replica.floorAt(7n).height).toBe(260n);
  });

  it('TestHeightSyncFloor_SequencerHeartbeatDoesNotRaise: user-signed stamps above F never raise it; a host ack at that height does', () => {
    const k = v5();
    const hash = Uint8Array.of(0xaa);
    k.apply([k.heartbeat(stampAt(100n, hash))]);
    expect(k.replica.floorAt(2n).height).toBe(0n);
    k.apply([k.ack(1n, 0, stampAt(100n, hash))]);
    k.apply([k.heartbeat(stampAt(180n, hash))]);
    k.apply([k.start(4n, { stamp: stampAt(180n, hash) })]);
    expect(k.replica.floorAt(5n).height).toBe(100n);
    expect(k.replica.inference(4n)!.startedAtHeight).toBe(180n); // recorded, unbacked
    k.apply([k.ack(3n, 1, stampAt(180n, hash))]);
    expect(k.replica.floorAt(6n).height).toBe(180n);
  });

  it('FloorIndex.AsOf: F(m) counts raises at nonces strictly below m; ties go to the lowest signer', () => {
    const f = new HeightFloor();
    const h = (n: number) => Uint8Array.of(n);
    f.observe(3n, [{ signer: 2, height: 50n, hash: h(2) }, { signer: 1, height: 50n, hash: h(1) }, { signer: SEQUENCER_SIGNER, height: 99n, hash: h(9) }]);
    expect(f.asOf(3n).height).toBe(0n);
    expect(f.asOf(4n)).toMatchObject({ height: 50n, author: 1, nonce: 3n, known: true });
    f.observe(5n, [{ signer: 0, height: 40n, hash: h(0) }]); // below the floor: nothing
    f.observe(6n, [{ signer: 0, height: 70n, hash: new Uint8Array(0) }]); // no hash: not a claim
    f.observe(7n, [{ signer: 0, height: 0n, hash: h(0) }]); // zero height: not a claim
    expect(f.size).toBe(1);
    expect(f.asOf(100n).height).toBe(50n);
  });

  it('FloorIndex window: past FLOOR_WINDOW raises the oldest are dropped, and F before them is unknown (L0 skips it)', () => {
    const f = new HeightFloor();
    for (let i = 1; i <= FLOOR_WINDOW + 2; i++) f.observe(BigInt(i), [{ signer: 0, height: BigInt(i), hash: Uint8Array.of(1) }]);
    expect(f.size).toBe(FLOOR_WINDOW);
    expect(f.asOf(3n).known).toBe(false);
    expect(f.asOf(4n)).toMatchObject({ height: 3n, known: true });
    expect(f.max()).toBe(BigInt(FLOOR_WINDOW + 2));
  });

  it('stamps are judged at their producing nonce, not where they land: a confirm queued behind a raise is not a regression', () => {
    const k = v5();
    k.apply([k.start(1n)]);
    k.apply([k.start(2n)]);
    k.apply([k.confirm(1n, 1000n, undefined, stampAt(500n))]); // F(4) = 500
    // Confirm of 2 was produced at nonce 2, when F was 0: 400 is honest there, though it lands at 4.
    k.apply([k.confirm(2n, 1000n, undefined, stampAt(400n))]);
    expect(k.replica.floorAt(5n).height).toBe(500n);
    expect(k.replica.inference(2n)!.confirmedAtHeight).toBe(400n);
  });
});

describe('the log plane (heightsync/logplane.go CheckDiffLogPlane)', () => {
  it('TestLogPlane_ApplyDiff_FabricatedAckRejected: a tampered host_sig refuses the whole diff', () => {
    const k = new Kit({ hosts: 3, rules: 'v5' });
    k.apply([k.heartbeat(stampAt(50n))]);
    const ack = k.ack(1n, 0, stampAt(50n));
    if (ack.tx.case === 'heightAck') ack.tx.value.hostSig[0]! ^= 0xff;
    refusedWith(k, [ack], 'AckSigInvalid', /^INVALID\(ack_sig_invalid\): /);
  });

  it('L2 texts: no signature; a stranger; the signer named with %q', () => {
    const k = v5();
    k.apply([k.heartbeat()]);
    const unsigned = k.ack(1n, 0);
    if (unsigned.tx.case === 'heightAck') unsigned.tx.value.hostSig = new Uint8Array(0);
    refusedWith(k, [unsigned], 'AckSigInvalid', 'INVALID(ack_sig_invalid): heightsync: missing host_sig');
    const stranger = keyOf('stranger');
    refusedWith(k, [k.ack(1n, 2, undefined, stranger)], 'AckSigInvalid', `INVALID(ack_sig_invalid): signer "${stranger.address}" != slot key "${k.slotKeys[2]!.address}"`);
  });

  it('L1 framing: ref_nonce 0, a slot outside the group, peer_seen not ceil(n/8) bytes, a hash over 32 bytes, a sync vector longer than the group', () => {
    const k = v5();
    k.apply([k.heartbeat()]);
    refusedWith(k, [k.ack(0n, 0)], 'BadFraming', 'INVALID(bad_framing): ack ref_nonce 0');
    const outside = k.ack(1n, 0);
    if (outside.tx.case === 'heightAck') outside.tx.value.slotId = 4;
    refusedWith(k, [outside], 'BadFraming', 'INVALID(bad_framing): slot 4 >= 4');
    const wide = k.ack(1n, 0);
    if (wide.tx.case === 'heightAck') wide.tx.value.peerSeen = new Uint8Array(2);
    refusedWith(k, [wide], 'BadFraming', 'INVALID(bad_framing): peer_seen len 2 for slots_num 4');
    refusedWith(k, [k.ack(1n, 0, stampAt(5n, new Uint8Array(33)))], 'BadFraming', 'INVALID(bad_framing): observed_block_hash len 33');
    refusedWith(k, [k.heartbeat(stampAt(5n, new Uint8Array(33)))], 'BadFraming', 'INVALID(bad_framing): observed_block_hash len 33');
    const hb = k.heartbeat();
    if (hb.tx.case === 'heartbeat') hb.tx.value.syncVector = Array.from({ length: 5 }, (_, i) => ({ $typeName: 'devshard.v1.SyncVectorEntry' as const, slotId: i, status: 1, observedHeight: 0n, ackNonce: 0n }));
    refusedWith(k, [hb], 'BadFraming', 'INVALID(bad_framing): sync_vector len 5 for slots_num 4');
  });

  it('L3: an ack may name a heartbeat in the same diff or any heartbeat ever applied, nothing else', () => {
    const k = v5();
    k.apply([k.heartbeat(), k.ack(1n, 0)]); // TestApplyLocalBestEffort_HeartbeatAndAckStayInDiff, host side
    refusedWith(k, [k.ack(2n, 1)], 'AckCausality', 'INVALID(ack_causality): ref_nonce 2 has no heartbeat');
    k.apply([]);
    k.apply([k.ack(1n, 1)]); // old heartbeats stay acknowledgeable
  });

  it('L0b: within one diff a finish stamped below its confirm is a regression; unstamped legs are skipped', () => {
    const k = v5();
    k.apply([k.start(1n)]);
    refusedWith(k, [k.confirm(1n, 1000n, undefined, stampAt(600n)), k.finish(1n, { stamp: stampAt(590n) })], 'HeightRegression', 'INVALID(height_regression): inference 1 finish 590 < confirm 600');
    k.apply([k.confirm(1n, 1000n, undefined, stampAt(600n)), k.finish(1n)]);
  });

  it('CheckDiffLogPlane order: L1, then L2, then L3, then L0, then L0b: the first failing check names the refusal', () => {
    const k = v5();
    k.apply([k.start(1n)]);
    k.apply([k.confirm(1n, 1000n, undefined, stampAt(600n))]); // F(3) = 600
    k.apply([k.start(3n)]);
    const stranger = keyOf('stranger');
    const l0b = [k.confirm(3n, 1000n, undefined, stampAt(700n)), k.finish(3n, { stamp: stampAt(650n) })];
    const l0 = k.heartbeat(stampAt(10n));
    const l3 = k.ack(99n, 0);
    const l2 = k.ack(99n, 1, undefined, stranger);
    const l1 = k.heartbeat(undefined, { slotsNum: 3 });
    refusedWith(k, [...l0b, l0, l3, l2, l1], 'BadFraming');
    refusedWith(k, [...l0b, l0, l3, l2], 'AckSigInvalid');
    refusedWith(k, [...l0b, l0, l3], 'AckCausality');
    refusedWith(k, [...l0b, l0], 'HeightRegression', 'INVALID(height_regression): heartbeat height 10 < floor 600 as of nonce 4');
    refusedWith(k, [...l0b], 'HeightRegression', 'INVALID(height_regression): inference 3 finish 650 < confirm 700');
    // The log plane runs before any tx: a diff that would also fail a tx rule is named by the log plane.
    refusedWith(k, [k.start(4n, { maxTokens: 1n }), l0], 'HeightRegression');
  });

  it('TestValidateDiff_UnauthorizedWarmAckRejected / TestApplyLocalBestEffort_SiblingWarmAckApplies: warm signers of acks', () => {
    const warm = keyOf('warm-of-host-0');
    let authorised = true;
    // host-0 holds slots 0 and 1; host-1 holds slot 2.
    const k = new Kit({ slotsPerHost: [2, 1], amount: 1_000_000n, rules: 'v5', warmKeys: (w, cold) => authorised && w === warm.address && cold === keyOf('host-0').address });
    k.apply([k.heartbeat()]);
    refusedWith(k, [k.ack(1n, 2, undefined, warm)], 'AckSigInvalid'); // not host-1's
    k.apply([k.ack(1n, 0, undefined, warm)]); // first use: admitted by the resolver, bound by applyHeightAck
    expect(k.replica.warmKeys.get(0)).toBe(warm.address);
    authorised = false; // the grant is gone: only the sibling binding can admit it now
    const r = k.apply([k.ack(1n, 1, undefined, warm)]);
    expect(r.warmKeyBindings).toEqual([]); // admitted by L2 through slot 0; slot 1 is not bound
    expect(k.replica.warmKeys.has(1)).toBe(false);
  });
});

describe('forced turns and cadence (state/heightsync.go, heightsync/cadence.go)', () => {
  it('applyForceHeightSyncTurn refusals, with their texts', () => {
    const k = v5();
    refusedWith(k, [k.forceTurn(2n)], 'InvalidNonce', 'invalid nonce: must be sequential: trigger_nonce must equal diff nonce');
    refusedWith(k, [k.forceTurn(1n, { slotsNum: 3 })], 'InvalidForceHeightSyncTurn', 'MsgForceHeightSyncTurn slots_num 3 must equal group size 4');
    refusedWith(k, [k.forceTurn(1n, { anchorK: 3n })], 'InvalidSchedulerConfig', 'heightsync: invalid scheduler config (K < SlotsNum)');
    const badEnd = k.forceTurn(1n);
    if (badEnd.tx.case === 'forceHeightSyncTurn') badEnd.tx.value.endNonce = 5n;
    refusedWith(k, [badEnd], 'InvalidForceHeightSyncTurn', 'MsgForceHeightSyncTurn end_nonce must be trigger_nonce+slots_num-1');
    refusedWith(k, [k.forceTurn(1n), k.forceTurn(1n)], 'MultipleForceHeightSyncTurnMsgs', 'at most one MsgForceHeightSyncTurn per diff');
    k.apply([k.finalize()]);
    refusedWith(k, [k.forceTurn(2n)], 'SessionFinalizing', 'session is finalizing: no new inferences');
  });

  it('clearExpiredHeightSyncFlags: the window clears past its end; with no swallow, K, slots and reason stay hashed until the next forced turn', () => {
    const k = v5();
    for (let i = 0; i < 4; i++) k.apply([]);
    k.apply([k.forceTurn(5n, { anchorK: 4n, reason: 'quiet' })]); // [5, 8] ends at a window start: no swallow
    expect(k.replica.heightSync()).toMatchObject({ forcedStart: 5n, forcedEnd: 8n, cadenceSwallowUntil: 0n, turnK: 4n, turnSlots: 4n, reason: 'quiet' });
    expect(k.replica.forcedTurnActive(8n)).toBe(true);
    for (let i = 0; i < 3; i++) k.apply([]);
    expect(k.replica.heightSync().forcedEnd).toBe(8n); // 8 is not past 8
    k.apply([]);
    expect(k.replica.heightSync()).toMatchObject({ forcedStart: 0n, forcedEnd: 0n, turnK: 4n, turnSlots: 4n, reason: 'quiet' });
    expect(k.replica.forcedTurnActive(9n)).toBe(false);
    // The leftovers are hashed: the root differs from a replica whose flags are all zero.
    const plain = Replica.create({ ...k.replica.params });
    for (let n = 1n; n <= 9n; n++) plain.applyLocal(n, n === 5n ? [k.forceTurn(5n, { anchorK: 4n, reason: 'quiet' })] : []);
    expect(toHex(plain.stateRoot())).toBe(toHex(k.replica.stateRoot()));
    expect(plain.heightSync()).not.toMatchObject(NO_HEIGHT_SYNC_FLAGS);
    // A new forced turn after the window replaces every flag.
    k.apply([k.forceTurn(10n, { anchorK: 10n, reason: 'heartbeat' })]);
    expect(k.replica.heightSync()).toMatchObject({ forcedStart: 10n, forcedEnd: 13n, turnK: 10n, reason: 'heartbeat', cadenceSwallowUntil: 0n });
  });

  it('a duplicate open inside the window is ignored; the same open after the window is applied', () => {
    const k = v5();
    k.apply([k.forceTurn(1n, { reason: 'a' })]);
    k.apply([k.forceTurn(2n, { reason: 'b' })]);
    expect(k.replica.heightSync()).toMatchObject({ forcedStart: 1n, forcedEnd: 4n, reason: 'a' });
    k.apply([]);
    k.apply([]);
    k.apply([k.forceTurn(5n, { reason: 'c' })]);
    expect(k.replica.heightSync()).toMatchObject({ forcedStart: 5n, forcedEnd: 8n, reason: 'c' });
  });

  it('ComputeCadenceSwallow equals Go\'s walk over periodic windows (property)', () => {
    // Go's loop, transcribed as the reference this module's closed form must equal.
    const walk = (fs: bigint, fe: bigint, k: bigint, n: bigint) => {
      if (k === 0n || n === 0n || k < n) return undefined;
      for (let i = 1n; ; i++) {
        const ps = i * k;
        const pe = ps + n - 1n;
        if (ps > fe + k) return undefined;
        if (fs <= pe && fe >= ps && fe > ps && fe < pe) return { until: pe, fe };
      }
    };
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 500n }), fc.bigInt({ min: 0n, max: 40n }), fc.bigInt({ min: 0n, max: 30n }), fc.bigInt({ min: 0n, max: 30n }), (fs, len, k, n) => {
        const fe = fs + len;
        expect(cadenceSwallow(fs, fe, k, n)).toEqual(walk(fs, fe, k, n));
      }),
      { numRuns: 2000 },
    );
    expect(cadenceSwallow(9n, 12n, 10n, 4n)).toEqual({ until: 13n, fe: 12n });
    expect(cadenceSwallow(1n, (1n << 64n) - 2n, 10n, 4n)).toBeUndefined(); // Go's bound wraps
  });
});

describe('stamps and records (state/machine.go applyStartInference, applyConfirmStart)', () => {
  it('the max_tokens floor: 63 refused with its text, 64 accepted; a replay of persisted diffs does not apply it', () => {
    const k = v5();
    refusedWith(k, [k.start(1n, { maxTokens: 63n })], 'MaxTokensBelowFloor', 'max_tokens below min_tokens floor: max_tokens 63, floor 64');
    expect(() => k.replica.applyLocalBestEffort(1n, [k.start(1n, { maxTokens: 63n })])).toThrow('mandatory start inference: max_tokens below min_tokens floor: max_tokens 63, floor 64');
    k.apply([k.start(1n, { maxTokens: 64n })]);
    const replay = Replica.create(k.replica.params);
    replay.applyLocal(1n, [k.start(1n, { maxTokens: 63n })], { replayingPersisted: true });
    expect(replay.inference(1n)!.maxTokens).toBe(63n);
    // v2 has no floor.
    new Kit({ rules: 'v2' }).apply([new Kit().start(1n, { maxTokens: 1n })]);
  });

  it('record heights are set only by a stamp with a hash; a height without one is no stamp', () => {
    const k = v5();
    const heightOnly = k.start(1n);
    if (heightOnly.tx.case === 'startInference') heightOnly.tx.value.observedHeight = 77n;
    k.apply([heightOnly]);
    expect(k.replica.inference(1n)!.startedAtHeight).toBe(0n);
    k.apply([k.start(2n, { stamp: stampAt(80n) })]);
    k.apply([k.confirm(2n, 1000n, undefined, stampAt(90n)), k.confirm(1n)]);
    expect(k.replica.inference(2n)).toMatchObject({ startedAtHeight: 80n, confirmedAtHeight: 90n });
    expect(k.replica.inference(1n)!.confirmedAtHeight).toBe(0n);
  });

  it('the executor signs its stamp: a stamp added to the relayed receipt breaks the signature', () => {
    const k = v5();
    k.apply([k.start(1n)]);
    const signedWithout = k.confirm(1n);
    if (signedWithout.tx.case === 'confirmStart') {
      signedWithout.tx.value.observedHeight = 5n;
      signedWithout.tx.value.observedBlockHash = utf8('x');
    }
    refusedWith(k, [signedWithout], 'InvalidExecutorSig', /^invalid executor signature: expected executor /);
    k.apply([k.confirm(1n, 1000n, undefined, stampAt(5n))]);
  });

  it('under v2 the stamps are ignored (unknown fields to a v2 host) and the v5 kinds have no message set', () => {
    const k = new Kit({ rules: 'v2' });
    k.apply([k.start(1n, { stamp: stampAt(80n) })]);
    k.apply([k.confirm(1n)]); // a v2 receipt signs no stamp
    expect(k.replica.inference(1n)).toMatchObject({ startedAtHeight: 0n, confirmedAtHeight: 0n });
    for (const tx of [k.heartbeat(), k.forceTurn(), k.ack(1n, 0), k.errorMiss(1n, [0, 2])]) k.refused([tx], 'EmptyTx', 'devshard tx has no message set');
    expect(k.replica.heightSync()).toMatchObject({ ...NO_HEIGHT_SYNC_FLAGS, lastCompletedHeight: 0n, latestTurnStart: 0n });
    expect(k.replica.stampRefusal(k.heartbeat(stampAt(1n)))).toBeUndefined();
  });
});

describe('error-miss (state/machine.go applyErrorMiss)', () => {
  const finished = () => {
    const k = v5();
    k.apply([k.start(1n)]);
    k.apply([k.confirm(1n)]);
    k.apply([k.finish(1n, { inputTokens: 10n, outputTokens: 20n })]);
    return k;
  };

  it('refund: TimedOut, the executor missed +1 and unpaid, the balance gets the actual cost back', () => {
    const k = finished();
    const before = k.replica.balance;
    expect(k.replica.hostStats()[1]!.cost).toBe(30n);
    k.apply([k.errorMiss(1n, [0, 2, 3])]);
    expect(k.replica.inference(1n)!.status).toBe(InferenceStatus.TimedOut);
    expect(k.replica.balance).toBe(before + 30n);
    expect(k.replica.hostStats()[1]).toMatchObject({ missed: 1, cost: 0n });
  });

  it('refusals: votes at the threshold, a duplicate voter, a stranger\'s vote, a slot outside the group, a status other than finished, an unknown id', () => {
    const k = finished();
    refusedWith(k, [k.errorMiss(1n, [0, 2])], 'InsufficientVotes', 'insufficient votes for timeout: need >2 accept votes, got 2');
    refusedWith(k, [k.errorMiss(1n, [0, 2, 3], false)], 'InsufficientVotes', 'insufficient votes for timeout: need >2 accept votes, got 0');
    refusedWith(k, [k.errorMiss(1n, [0, 0, 2])], 'DuplicateVote', 'duplicate vote from slot: slot 0');
    const stranger = keyOf('stranger');
    refusedWith(k, [k.errorMiss(1n, [0, 2, 3], true, [k.slotKeys[0]!, stranger, k.slotKeys[3]!])], 'InvalidVoteSig', `invalid vote signature: vote from slot 2: expected ${k.slotKeys[2]!.address}, got ${stranger.address}`);
    const outside = k.errorMiss(1n, [0, 2, 3]);
    if (outside.tx.case === 'errorMiss') outside.tx.value.votes[0]!.voterSlot = 9;
    refusedWith(k, [outside], 'SlotNotInGroup', 'slot not in group: slot 9');
    refusedWith(k, [k.errorMiss(7n, [0, 2, 3])], 'InferenceNotFound', 'inference not found: inference 7');
    k.apply([k.validation(1n, 2, false)]); // challenged: no longer finished
    refusedWith(k, [k.errorMiss(1n, [0, 2, 3])], 'InvalidTransition', 'invalid status transition: error-miss requires finished, got 3');
  });

  it('a vote signs the recorded response hash: a vote over another hash does not recover to its slot', () => {
    const k = finished();
    const tx = k.errorMiss(1n, [0, 2, 3]);
    k.replica.inference(1n); // the record's hash is the kit's
    const forged = new Kit({ hosts: 4, rules: 'v5', escrowId: 'other-escrow' }).errorMiss(1n, [0, 2, 3]);
    if (forged.tx.case === 'errorMiss' && tx.tx.case === 'errorMiss') tx.tx.value.votes[1] = forged.tx.value.votes[1]!;
    refusedWith(k, [tx], 'InvalidVoteSig', /^invalid vote signature: vote from slot 2: expected /);
  });
});

describe('seal gate and settlement drain (state/seal.go, machine.go settleLiveRecordLocked)', () => {
  it('FinishedClockRequiredSeconds: a Finished record waits grace + ExecutionTimeout of state clock under v5, grace alone under v2', () => {
    const run = (rules: 'v2' | 'v5') => {
      const k = new Kit({ hosts: 4, amount: 1_000_000n, rules, config: { inferenceSealGraceNonces: 1, inferenceSealGraceSeconds: 5, autoSealEveryNNonces: 1, executionTimeout: 100n } });
      k.apply([k.start(1n)]);
      k.apply([k.confirm(1n, 1000n)]);
      k.apply([k.finish(1n)]);
      k.apply([k.start(4n)]);
      k.apply([k.confirm(4n, 1050n)]); // clock 1050: 50 s after id 1's confirm
      return k.replica.isSealed(1n);
    };
    expect(run('v2')).toBe(true); // 50 >= 5
    expect(run('v5')).toBe(false); // 50 < 5 + 100
  });

  it('drain: records still Pending or Started are paid their reservation (Finished, no miss); Challenged seal as they are; v2 leaves them', () => {
    const run = (rules: 'v2' | 'v5') => {
      const k = new Kit({ hosts: 4, amount: 1_000_000n, rules });
      k.apply([k.start(1n)]); // stays pending
      k.apply([k.start(2n)]);
      k.apply([k.confirm(2n)]); // stays started
      k.apply([k.start(4n)]);
      k.apply([k.confirm(4n)]);
      k.apply([k.finish(4n)]);
      k.apply([k.validation(4n, 1, false)]); // challenged
      k.apply([k.finalize()]);
      const balance = k.replica.balance;
      const drained: number[] = [];
      for (let i = 0; i < 4; i++) drained.push(...k.apply([]).sealedRecords.map((r) => r.status));
      expect(k.replica.phase).toBe(Phase.Settlement);
      expect(k.replica.balance).toBe(balance);
      return { statuses: drained, costs: k.replica.hostStats().map((s) => s.cost), missed: k.replica.hostStats().map((s) => s.missed) };
    };
    const reserved = 100n + 64n;
    const v5r = run('v5');
    expect(v5r.statuses).toEqual([InferenceStatus.Finished, InferenceStatus.Finished, InferenceStatus.Challenged]);
    expect(v5r.costs).toEqual([120n, reserved, reserved, 0n]); // slot 0: id 4's actual 120; slots 1, 2: ids 1, 2 paid in full
    expect(v5r.missed).toEqual([0, 0, 0, 0]);
    const v2r = run('v2');
    expect(v2r.statuses).toEqual([InferenceStatus.Pending, InferenceStatus.Started, InferenceStatus.Challenged]);
    expect(v2r.costs).toEqual([120n, 0n, 0n, 0n]);
  });
});

describe('heartbeat turns (heightsync/turn.go TurnTracker)', () => {
  it('TestLogPlane_DeterminismAcrossVerifiers: Q = ceil(2/3 · n) in-window acks complete a turn, the same on every replica', () => {
    expect([1, 2, 3, 4, 5, 6, 16].map(turnQuorum)).toEqual([1, 2, 2, 3, 4, 4, 11]);
    const run = () => {
      const k = new Kit({ hosts: 3, amount: 100_000n, rules: 'v5' });
      const hash = Uint8Array.of(0xaa, 0xbb);
      k.apply([k.heartbeat(stampAt(50n, hash))]);
      k.apply([k.ack(1n, 0, stampAt(50n, hash)), k.ack(1n, 1, stampAt(50n, hash))]);
      return k.replica;
    };
    const a = run();
    const b = run();
    expect(a.heightTurns!.record(1n)).toEqual(b.heightTurns!.record(1n));
    expect(a.heightTurns!.record(1n)).toMatchObject({ state: 'complete', hReq: 50n, completedAtHeight: 50n, spanEnd: 3n, reason: 'quiet_session' });
    expect(a.heightSync()).toMatchObject({ lastCompletedHeight: 50n, latestTurnStart: 1n });
  });

  it('TestHeightSyncMissingAcksReportsDegradedTurnThroughSMAPI: a host stamp past h_req + D_ack degrades an unanswered turn', () => {
    const k = v5();
    const hash = Uint8Array.of(0xaa);
    for (let n = 1n; n <= 4n; n++) k.replica.applyLocalBestEffort(n, [k.heartbeat(stampAt(500n, hash))]);
    expect(k.replica.heightTurns!.record(1n)).toMatchObject({ state: 'open', spanEnd: 4n });
    const late = 500n + ACK_DEADLINE_BLOCKS + 1n;
    const r = k.replica.applyLocalBestEffort(5n, [k.start(5n, { stamp: stampAt(500n, hash) }), k.confirm(5n, 1000n, undefined, stampAt(late, hash))]);
    expect(r.applied).toHaveLength(2);
    expect(k.replica.heightTurns!.record(1n)!.state).toBe('degraded');
    expect(k.replica.heightTurns!.missingAcks(1n)).toEqual([0, 1, 2, 3]);
    expect(k.replica.heightSync().lastCompletedHeight).toBe(late); // the executor stamp moves h_last
  });

  it('a heartbeat inside the newest span joins its turn; past the span it opens a new one; a late ack does not count', () => {
    const k = v5();
    k.apply([k.heartbeat(stampAt(100n))]);
    k.apply([k.heartbeat(stampAt(90n))]);
    expect(k.replica.heightTurns!.record(1n)!.hReq).toBe(90n); // the lowest stamp
    k.apply([k.ack(1n, 0, stampAt(100n + 90n)), k.ack(2n, 1, stampAt(100n)), k.ack(2n, 2, stampAt(100n))]);
    const t = k.replica.heightTurns!.record(1n)!;
    expect(t.acks.get(0)!.late).toBe(true); // 190 > 90 + 37
    expect(t.state).toBe('degraded'); // its height closed the window with 2 < 3 counting acks
    for (let i = 0; i < 2; i++) k.apply([]);
    k.apply([k.heartbeat()]); // nonce 6: past [1, 4]
    expect(k.replica.heightSync().latestTurnStart).toBe(6n);
  });
});

describe('compose under v5 (state/machine.go localBestEffortLocked)', () => {
  it('TestApplyLocalBestEffort_LogPlaneInvalidFailsBeforeNonce: a diff left with nothing after log-plane drops is not composed', () => {
    const k = new Kit({ hosts: 3, amount: 100_000n, rules: 'v5' });
    const hash = Uint8Array.of(0xaa);
    k.replica.applyLocalBestEffort(1n, [k.heartbeat(stampAt(80n, hash))]);
    k.replica.applyLocalBestEffort(2n, [k.ack(1n, 0, stampAt(80n, hash))]);
    expect(() => k.replica.applyLocalBestEffort(3n, [k.heartbeat(stampAt(50n, hash))])).toThrow('INVALID(height_regression): heartbeat height 50 < floor 80 as of nonce 3');
    expect(() => k.replica.applyLocalBestEffort(3n, [k.heartbeat(undefined, { slotsNum: 4 })])).toThrow('INVALID(bad_framing): slots_num 4 != group 3');
    expect(k.replica.latestNonce).toBe(2n);
  });

  it('a poisoned ack among good txs is dropped, the rest composed; a Start refused by the log plane aborts the nonce with its own text', () => {
    const k = v5();
    k.apply([k.start(1n)]);
    k.apply([k.confirm(1n, 1000n, undefined, stampAt(300n))]);
    const bad = k.ack(1n, 0, stampAt(1n));
    const res = composeDiff(k.replica, { pending: [bad, k.finish(1n, { stamp: stampAt(310n) })], extra: [k.heartbeat(k.replica.referenceStamp())] });
    expect(res.applied.map((t) => t.tx.case)).toEqual(['finishInference', 'heartbeat']);
    expect(res.skipped.map((s) => s.error.code)).toEqual(['AckCausality']);
    expect(() => composeDiff(k.replica, { pending: [], extra: [k.start(4n, { stamp: stampAt(5n) })] })).toThrow(/^INVALID\(height_regression\): start height 5 < floor 310 as of nonce 4$/); // the finish at nonce 3 raised F
    expect(k.replica.latestNonce).toBe(3n);
  });

  it('once Finalizing, heartbeats and acks are skipped before the log plane: a leftover ack cannot abort a finalize round', () => {
    const k = v5();
    k.apply([k.heartbeat()]);
    const ack = k.ack(1n, 0);
    const res = k.replica.applyLocalBestEffort(2n, [k.finalize(), ack, k.heartbeat()]);
    expect(res.applied.map((t) => t.tx.case)).toEqual(['finalizeRound']);
    expect(res.skipped.map((s) => s.error.code)).toEqual(['SessionFinalizing', 'SessionFinalizing']);
  });
});

describe('what the gateway asks (floor, reference stamp, stamp refusal)', () => {
  it('F(next), the reference stamp (exactly F or none), and a host tx below F refused before compose', () => {
    const k = v5();
    expect(k.replica.floor().height).toBe(0n);
    expect(k.replica.referenceStamp()).toBeUndefined();
    k.apply([k.start(1n)]);
    k.apply([k.start(2n)]);
    const f = stampAt(700n);
    k.apply([k.confirm(1n, 1000n, undefined, f)]);
    expect(k.replica.floor()).toMatchObject({ height: 700n, author: 1, nonce: 3n });
    expect(k.replica.referenceStamp()).toEqual({ height: 700n, hash: f.hash });
    expect(k.replica.stampRefusal(k.heartbeat(k.replica.referenceStamp()))).toBeUndefined();
    // A confirm of 2 was produced at nonce 2 (F = 0): any stamp passes, even landing later.
    expect(k.replica.stampRefusal(k.confirm(2n, 1000n, undefined, stampAt(5n)))).toBeUndefined();
    k.apply([k.confirm(2n, 1000n, undefined, stampAt(5n))]);
    // A finish of 1 is judged at F(1) = 0 too; an inference started after the raise is judged at 700.
    expect(k.replica.stampRefusal(k.finish(1n, { stamp: stampAt(5n) }))).toBeUndefined();
    k.apply([k.start(5n)]);
    expect(k.replica.stampRefusal(k.confirm(5n, 1000n, undefined, stampAt(699n)))?.message).toBe('INVALID(height_regression): confirm height 699 < floor 700 as of nonce 5');
    expect(k.replica.stampRefusal(k.confirm(5n, 1000n, undefined, stampAt(700n)))).toBeUndefined();
    expect(k.replica.stampRefusal(k.confirm(5n))).toBeUndefined(); // no stamp: nothing to judge
    expect(k.replica.stampRefusal(k.ack(9n, 0))?.code).toBe('AckCausality');
    expect(k.replica.stampRefusal(heartbeatTx({ slotsNum: 4, reason: 'x', stamp: stampAt(1n) }))?.code).toBe('HeightRegression');
  });
});

describe('the replica stays pure across refusals (rollback of the height-sync fold)', () => {
  it('a diff refused after its txs applied (post_state_root) leaves turns, floor and flags as they were', () => {
    const k = v5();
    k.apply([k.heartbeat()]);
    const before = { hs: k.replica.heightSync(), f: k.replica.floor(), t: k.replica.heightTurns!.record(1n) };
    k.refused([k.ack(1n, 0, stampAt(42n)), k.forceTurn(2n), k.heartbeat()], 'PostStateRootMismatch', undefined, new Uint8Array(32).fill(1));
    expect(k.replica.heightSync()).toEqual(before.hs);
    expect(k.replica.floor()).toEqual(before.f);
    expect(k.replica.heightTurns!.record(1n)).toEqual(before.t);
    expect(k.replica.heightTurns!.heartbeatTurn(2n)).toBeUndefined();
  });
});
