/**
 * Devshard v4.1: gonka's own pinned state roots, reproduced by our replica with the tag "v4.1".
 *
 * The roots are gonka's testdata, copied unchanged as data:
 *   source  gonka-ai/gonka@bb34d444aa61d1bf95b284777e498fad7a74d384
 *           devshard/state/testdata/v41-state-roots.json (2453 bytes, sha256 40884e08…a7bbf7)
 *   here    test/fixtures/devshard-vectors/v41/v41-state-roots.json
 * gonka's test of them (devshard/state/v41_compatibility_test.go at the same commit,
 * TestV41ReleaseStateRoots) says a release/devshard/v4.1.0 build (701fab877) produced them: the
 * state before any diff, then the root after each of 34 diffs applied on the user side.
 *
 * The session below is written from the facts of that Go test and the package helpers it uses
 * (all at bb34d444): compatibilityFixture (the keys), journal_test.go journalFixture.machine
 * (escrow, group, config, balance) and .script (the 34 diffs), committed_hash_test.go
 * startTx / confirmTx / finishTx / validationTx / voteTx / timeoutTx (each tx's fields and
 * signer) and TestCommittedEntriesHashMatchesMarshalPath (what each stage is expected to do).
 *
 * The fixture sits one directory down, not beside the v2 golden vectors, because
 * test/protocol/vectors.ts reads every *.json in devshard-vectors/ as a golden-vector object, and
 * this file is a bare array of roots.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { fromHex, toHex, utf8 } from '../../src/protocol/bytes.js';
import { composeDiff, signDiff } from '../../src/protocol/compose.js';
import { DevshardTxSchema, type DevshardTx } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { MsgFinishInferenceSchema, MsgValidationSchema, MsgValidationVoteSchema, TimeoutReason, TimeoutVoteSchema } from '../../src/protocol/gen/devshard/v1/tx_pb.js';
import { Phase } from '../../src/protocol/hashes.js';
import { InferenceStatus } from '../../src/protocol/inference-record.js';
import { executorReceiptBytes, finishProposerBytes, timeoutVoteBytes, validationProposerBytes, validationVoteProposerBytes } from '../../src/protocol/preimages.js';
import { Replica } from '../../src/protocol/replica.js';
import { addressFromPrivateKey, signMessage } from '../../src/protocol/signatures.js';

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'devshard-vectors', 'v41', 'v41-state-roots.json');
const PINNED: string[] = JSON.parse(readFileSync(FIXTURE, 'utf8')) as string[];

// ---- the session's facts ----------------------------------------------------------------------

/** gonka's compatibility keys are the secp256k1 scalars 1…6 (hex, 64 digits): 1–5 the hosts, 6 the user. */
const scalarKey = (n: number) => {
  const priv = fromHex(n.toString(16).padStart(64, '0'));
  return { priv, address: addressFromPrivateKey(priv) };
};
const HOSTS = [1, 2, 3, 4, 5].map(scalarKey);
const USER = scalarKey(6);

const ESCROW = 'escrow-journal';
const AMOUNT = 1_000_000n;

/**
 * One slot per host, in key order. Price 1, vote threshold 1, seal grace 6 nonces and one hour,
 * auto-seal at every nonce; nothing else set (no fees, both timeouts 0, validation rate 0).
 */
const sessionParams = (tag: string) => ({
  escrowId: ESCROW,
  slots: HOSTS.map((h) => h.address),
  amount: AMOUNT,
  userAddress: USER.address,
  version: tag,
  config: {
    refusalTimeout: 0n,
    executionTimeout: 0n,
    tokenPrice: 1n,
    createDevshardFee: 0n,
    feePerNonce: 0n,
    voteThreshold: 1,
    validationRate: 0,
    inferenceSealGraceNonces: 6,
    inferenceSealGraceSeconds: 3600,
    autoSealEveryNNonces: 1,
  },
});

/** Every inference of the script has the same request: prompt hash = the 6 bytes "prompt". */
const REQUEST = { promptHash: utf8('prompt'), model: 'llama', inputLength: 100n, maxTokens: 50n, startedAt: 1000n };
const CONFIRMED_AT = 1000n;
/** The executor of an inference is slot id mod 5; its key signs the receipt and the finish. */
const executorOf = (id: bigint) => Number(id % BigInt(HOSTS.length));

const tx = (t: MessageInitShape<typeof DevshardTxSchema>['tx']): DevshardTx => create(DevshardTxSchema, { tx: t });

const start = (id: bigint) => tx({ case: 'startInference', value: { inferenceId: id, ...REQUEST } });

const confirm = (id: bigint) => {
  const receipt = executorReceiptBytes({ inferenceId: id, escrowId: ESCROW, confirmedAt: CONFIRMED_AT, ...REQUEST });
  return tx({ case: 'confirmStart', value: { inferenceId: id, confirmedAt: CONFIRMED_AT, executorSig: signMessage(receipt, HOSTS[executorOf(id)]!.priv) } });
};

const finish = (id: bigint) => {
  const slot = executorOf(id);
  const msg = create(MsgFinishInferenceSchema, { inferenceId: id, responseHash: utf8('response'), inputTokens: 80n, outputTokens: 40n, executorSlot: slot, escrowId: ESCROW });
  msg.proposerSig = signMessage(finishProposerBytes(msg), HOSTS[slot]!.priv);
  return tx({ case: 'finishInference', value: msg });
};

const validation = (id: bigint, slot: number, valid: boolean) => {
  const msg = create(MsgValidationSchema, { inferenceId: id, validatorSlot: slot, valid, escrowId: ESCROW });
  msg.proposerSig = signMessage(validationProposerBytes(msg), HOSTS[slot]!.priv);
  return tx({ case: 'validation', value: msg });
};

const vote = (id: bigint, slot: number, voteValid: boolean) => {
  const msg = create(MsgValidationVoteSchema, { inferenceId: id, voterSlot: slot, voteValid, escrowId: ESCROW });
  msg.proposerSig = signMessage(validationVoteProposerBytes(msg), HOSTS[slot]!.priv);
  return tx({ case: 'validationVote', value: msg });
};

/** An execution timeout accepted by slots 0 and 1 (the v2 vote preimage: no voter slot in it). */
const executionTimeout = (id: bigint) => {
  const reason = TimeoutReason.EXECUTION;
  const votes = [0, 1].map((slot) =>
    create(TimeoutVoteSchema, { voterSlot: slot, accept: true, signature: signMessage(timeoutVoteBytes(ESCROW, id, reason, true), HOSTS[slot]!.priv) }),
  );
  return tx({ case: 'timeoutInference', value: { inferenceId: id, reason, votes } });
};

const finalize = () => tx({ case: 'finalizeRound', value: {} });

/** The 34 diffs; entry i is nonce i + 1. Ids are the nonce of their start. */
function script(): DevshardTx[][] {
  const empty = (n: number): DevshardTx[][] => Array.from({ length: n }, () => []);
  return [
    // 1–3: id 1 runs to Finished and stays (the one-hour clock gate keeps a Finished record live).
    [start(1n)],
    [confirm(1n)],
    [finish(1n)],
    // 4–7: id 4 (executor slot 4); slot 0 validates it twice in one diff: the second is a no-op.
    [start(4n)],
    [confirm(4n)],
    [finish(4n)],
    [validation(4n, 0, true), validation(4n, 0, true)],
    // 8–13: id 8 (executor 3) challenged by slot 4, then votes valid from slots 0 and 1: Validated.
    [start(8n)],
    [confirm(8n)],
    [finish(8n)],
    [validation(8n, 4, false)],
    [vote(8n, 0, true)],
    [vote(8n, 1, true)],
    // 14–18: id 14 (executor 4); its start's nonce seals id 8. Slot 0 challenges, slot 1 votes invalid: refunded.
    [start(14n)],
    [confirm(14n)],
    [finish(14n)],
    [validation(14n, 0, false)],
    [vote(14n, 1, false)],
    // 19–21: id 19 (executor 4) times out in execution; nonce 20 seals id 14.
    [start(19n)],
    [confirm(19n)],
    [executionTimeout(19n)],
    // 22–28: id 22 (executor 2) finishes; nonce 25 seals id 19; then empty diffs.
    [start(22n)],
    [confirm(22n)],
    [finish(22n)],
    ...empty(4),
    // 29: finalize. 30–34: empty; 34 = finalize nonce + 5 slots: Settlement, the live set drained.
    [finalize()],
    ...empty(5),
  ];
}

// ---- three ways through the session -----------------------------------------------------------

/** The user side as gonka's test drives it: ApplyLocal per nonce. Roots: before any diff, then each nonce. */
function userSideRoots(tag: string): string[] {
  const r = Replica.create(sessionParams(tag));
  const roots = [toHex(r.stateRoot())];
  script().forEach((txs, i) => roots.push(toHex(r.applyLocal(BigInt(i + 1), txs).root)));
  return roots;
}

describe('devshard v4.1: gonka pinned state roots (gonka-ai/gonka@bb34d444 testdata/v41-state-roots.json)', () => {
  it('the fixture is 35 roots: the state before any diff and nonces 1–34', () => {
    expect(PINNED).toHaveLength(35);
    expect(script()).toHaveLength(34);
  });

  it('the user side (applyLocal) with tag "v4.1" gives all 35 roots', () => {
    const roots = userSideRoots('v4.1');
    for (let n = 0; n < PINNED.length; n++) expect(roots[n], n === 0 ? 'before any diff' : `nonce ${n}`).toBe(PINNED[n]);
  });

  it('composing each diff (composeDiff), signing it with key 6, and a host applying it (applyDiff, signatures and post_state_root checked) gives the same roots', () => {
    const user = Replica.create(sessionParams('v4.1'));
    const host = Replica.create(sessionParams('v4.1'));
    expect(toHex(host.stateRoot())).toBe(PINNED[0]);
    for (const [i, txs] of script().entries()) {
      const at = `nonce ${i + 1}`;
      const own = txs.filter((t) => t.tx.case === 'startInference' || t.tx.case === 'finalizeRound');
      const pending = txs.filter((t) => !own.includes(t));
      const composed = composeDiff(user, { pending, extra: own });
      expect(composed.nonce, at).toBe(BigInt(i + 1));
      expect(composed.skipped, at).toEqual([]);
      expect(composed.applied, at).toEqual(txs);
      expect(toHex(composed.root), at).toBe(PINNED[i + 1]);
      const applied = host.applyDiff(signDiff(ESCROW, composed.nonce, composed.applied, composed.root, USER.priv));
      expect(toHex(applied.root), at).toBe(PINNED[i + 1]);
      expect(applied.warmKeyBindings, at).toEqual([]);
    }
  });

  it('the session does what gonka expects at each stage (TestCommittedEntriesHashMatchesMarshalPath)', () => {
    const r = Replica.create(sessionParams('v4.1'));
    const steps = script();
    const sealedAt = new Map<bigint, bigint>();
    const live = () => r.liveRecords().map((x) => x.id);
    const status = (id: bigint) => r.inference(id)?.status;
    const through = (nonce: number) => {
      while (r.latestNonce < BigInt(nonce)) {
        const n = r.latestNonce + 1n;
        for (const id of r.applyLocal(n, steps[Number(n) - 1]!).sealed) sealedAt.set(id, n);
      }
    };
    through(7);
    expect(status(4n)).toBe(InferenceStatus.Finished);
    expect(r.inference(4n)!.votesValid).toBe(1);
    through(11);
    expect(status(8n)).toBe(InferenceStatus.Challenged);
    through(12);
    expect(status(8n)).toBe(InferenceStatus.Challenged);
    through(13);
    expect(status(8n)).toBe(InferenceStatus.Validated);
    through(14);
    expect(sealedAt.get(8n)).toBe(14n);
    through(18);
    expect(status(14n)).toBe(InferenceStatus.Invalidated);
    through(20);
    expect(sealedAt.get(14n)).toBe(20n);
    through(21);
    expect(status(19n)).toBe(InferenceStatus.TimedOut);
    through(25);
    expect(sealedAt.get(19n)).toBe(25n);
    expect(status(22n)).toBe(InferenceStatus.Finished);
    through(28);
    expect(live()).toEqual([1n, 4n, 22n]);
    expect(r.fees).toBe(0n);
    through(29);
    expect(r.phase).toBe(Phase.Finalizing);
    for (let n = 30; n <= 33; n++) {
      through(n);
      expect(r.phase, `nonce ${n}`).toBe(Phase.Finalizing);
      expect(live(), `nonce ${n}`).toEqual([1n, 4n, 22n]);
    }
    through(34);
    expect(r.phase).toBe(Phase.Settlement);
    expect(live()).toEqual([]);
    expect([...sealedAt].filter(([, n]) => n === 34n).map(([id]) => id)).toEqual([1n, 4n, 22n]);
  });

  it('can fail: the same session under the tag "v2" differs from the first root on', () => {
    const v2 = userSideRoots('v2');
    expect(v2[0]).not.toBe(PINNED[0]);
    for (let n = 0; n < PINNED.length; n++) expect(v2[n], `root ${n}`).not.toBe(PINNED[n]);
  });
});
