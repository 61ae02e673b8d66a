/**
 * The user side of one escrow's devshard session, as the gateway holds it (gonka 8a35022
 * devshard/user/session.go `Session`: the state machine, per-host acknowledged nonce, the pending
 * host txs, `composeDiffLocked`, `signDiff`; httpsession.go for what goes to which host).
 *
 * - One Replica (src/protocol) per escrow: every nonce's diff is composed from the pending host txs
 *   (ConfirmStart from receipts, Finish and others from `devshard_meta.mempool`) and the request's
 *   MsgStartInference, applied to the replica, signed, and kept until every host has acknowledged it.
 * - Nonces are contiguous. A diff is applied when it is composed, before it is sent: a host call
 *   that fails has still used its nonce, and the next request to any host carries it as catch-up.
 *   A nonce the gateway reserved but never sent (its call did not reach the transport) is filled
 *   with an empty diff when a later one is composed, so the hosts never see a gap.
 * - Each host (by inference URL: one address holding two slots is one host) is sent the diffs
 *   above the nonce it last acknowledged with a receipt.
 * - A host tx signed by a warm key (authorised by the slot's address through an authz grant) is taken
 *   once the grant is known: the replica's resolver is synchronous, so a pair not yet known is asked
 *   of `warmKeyGranted` in the background and refused for now (the tx is skipped; the host resends
 *   it from its mempool, and a later diff takes it). The replica binds the key the first time it is
 *   accepted, and the binding is recorded with the diff (a replay needs no chain).
 *
 * No I/O here: protocol-transport.ts sends what this composes and feeds back what hosts answer
 * (and the warm-key lookup is the injected `warmKeyGranted`). Its parts: session-hosts.ts,
 * session-pending.ts, session-txs.ts, session-timeouts.ts, session-error-miss.ts, warm-key-answers.ts.
 */
import { fromBinary } from '@bufbuild/protobuf';
import {
  chargesOf,
  type Charge,
  bytesEqual,
  composeDiff,
  diffSignedBytes,
  requestHeaderMessage,
  toHex,
  Phase,
  Replica,
  replay,
  type RecordedDiff,
  type WarmKeyResolver,
  type EscrowProtocol,
  LEGACY_PROTOCOL,
  errorMissTx,
} from '../../protocol/index.js';
import { DevshardTxSchema, type DevshardTx } from '../../protocol/gen/devshard/v1/diff_pb.js';
import type { HeightSyncReason } from '../../protocol/height-sync.js';
import type { ErrorMissVote } from '../../protocol/gen/devshard/v1/tx_pb.js';
import type { HostReceipt } from './host-events.js';
import { ReceiptMismatch, type PreparedRequest, type ProtocolSign, type SentDiff, type SessionEscrow, type WarmKeyGrantLookup, replicaParamsOf } from './session-types.js';
import { WarmKeyAnswers } from './warm-key-answers.js';
import { SessionHosts } from './session-hosts.js';
import { OpenInferences, type TimeoutCandidate } from './session-timeouts.js';
import { confirmStartTx, finalizeRoundTx, heartbeatTxs, startInferenceTx, timeoutInferenceTx } from './session-txs.js';
import { errorMissVoteValid, voteWeight } from './session-error-miss.js';
import { PendingTxs } from './session-pending.js';
import { inferenceRequestJson, type InferencePayload, type SignedDiff } from './request-body.js';

export * from './session-types.js';
export { WARM_KEY_DENIED_TTL_MS } from './warm-key-answers.js';

export class DevshardSession {
  readonly replica: Replica;
  /** What the session speaks: its route under each host's inference URL and its state-root tag. */
  readonly protocol: EscrowProtocol;
  /** Inference → what the diffs of an earlier run (the log) charged it: its Finish's cost, or 0 timed out. */
  readonly recordedCharges = new Map<bigint, Charge>();
  /** The hosts, the diffs each has not acknowledged and our roots after them (session-hosts.ts). */
  private readonly hostDiffs: SessionHosts;
  /** Host txs waiting for the next diff, and the Finishes held out of it (session-pending.ts). */
  private readonly pending = new PendingTxs();
  /** Our inferences not yet finished or timed out (session-timeouts.ts). */
  private readonly open = new OpenInferences();
  /** Called with every diff as it is composed (before it is sent); a promise answered is awaited before sending. */
  onDiff: ((d: SentDiff) => unknown) | undefined;
  /** v5: called with a host tx dropped before compose and the log plane's refusal of it. */
  onDropped: ((tx: DevshardTx, reason: string) => void) | undefined;
  /** Called with the host txs of a host's answer not seen before (the log's hook; not awaited). */
  onHostTxs: ((url: string, txs: DevshardTx[]) => void) | undefined;
  /** Called when a host's acknowledged nonce moves, with its receipt's state_hash (equal to our root). */
  onAck: ((url: string, nonce: bigint, stateHash: Uint8Array) => void) | undefined;
  /**
   * Asks whether `cold` granted `warm` its warm-key marker (the chain); none: host txs signed by a
   * warm key not yet bound in the replica are skipped.
   */
  warmKeyGranted: WarmKeyGrantLookup | undefined;
  /** The clock (ms) of the warm-key answers' expiry. */
  now: () => number = Date.now;
  /** The warm-key lookups' answers (a granted one is kept; a denial expires). */
  private readonly warmAnswers = new WarmKeyAnswers(() => this.now());
  private recording: Promise<unknown>[] = [];

  /**
   * `recorded`: the diffs of an earlier run (the log), replayed into the replica. Which of them each
   * host holds is not known, so every host is sent them all once (hosts skip what they applied).
   */
  constructor(
    readonly escrow: SessionEscrow,
    private readonly sign: ProtocolSign,
    recorded: readonly RecordedDiff[] = [],
    /** Host txs an earlier run took (the log): those no recorded diff carried are pending again. */
    recordedHostTxs: readonly DevshardTx[] = [],
  ) {
    this.protocol = escrow.protocol ?? LEGACY_PROTOCOL;
    const params = replicaParamsOf(escrow);
    // What the recorded diffs charged each inference (the log's bill is matched against it).
    const charges = this.recordedCharges;
    this.replica = recorded.length > 0 ? replay(params, recorded, { onApplied: (d, r) => { for (const c of chargesOf(d.txs, r)) charges.set(c.inferenceId, c); } }) : Replica.create(params);
    this.hostDiffs = new SessionHosts(escrow.slots);
    for (const d of recorded) this.hostDiffs.keep(d);
    if (recordedHostTxs.length > 0) this.pending.restore(recorded, recordedHostTxs);
  }

  get latestNonce(): bigint {
    return this.replica.latestNonce;
  }

  /** The executor of a nonce: slots[nonce % n]. */
  executorUrl(nonce: bigint): string {
    return this.hostDiffs.executorUrl(nonce);
  }

  /** The executor's host address at a nonce: slots[nonce % n].host. */
  executorHost(nonce: bigint): string {
    return this.escrow.slots[Number(nonce % BigInt(this.escrow.slots.length))]!.host;
  }

  /**
   * Host `address` is called at `url` from now on (its participant's inference_url changed; the
   * gateway read it again after the host was unreachable at the old one). Every slot of that
   * address moves; the nonce it acknowledged moves with it (the same host at another address holds
   * the same state). When `url` already is another slot's host, the two are one host and keep the
   * lower of their acknowledged nonces (a host skips diffs it already applied). Answers whether a
   * slot moved.
   */
  moveHost(address: string, url: string): boolean {
    return this.hostDiffs.moveHost(address, url);
  }

  /** Our root after `nonce`, while some host has not acknowledged it. */
  rootAt(nonce: bigint): Uint8Array | undefined {
    return this.hostDiffs.rootAt(nonce);
  }

  /** Pending host txs (for tests and status). */
  pendingTxs(): DevshardTx[] {
    return this.pending.all();
  }

  /**
   * The replica's warm-key resolver (asked only for a slot with no bound key, a signer other than
   * its address): a key already bound to another slot of the same address is granted; otherwise the
   * answer known for the pair, or false while the one lookup for it runs (warm-key-answers.ts).
   */
  private readonly resolveWarmKey: WarmKeyResolver = (warm, cold) => {
    for (const [slot, w] of this.replica.warmKeys) if (w === warm && this.replica.slots[slot] === cold) return true;
    const lookup = this.warmKeyGranted;
    return lookup ? this.warmAnswers.answer(cold, warm, lookup) : false;
  };

  /** Composes, applies, signs and keeps the next nonce's diff. */
  private next(extra: DevshardTx[]): SentDiff {
    // v5: a host tx the log plane refuses (a stamp below the floor, a bad ack) is dropped before
    // compose, for good: the floor never falls, so it would never be accepted (and a diff of only
    // refused txs cannot be composed at all).
    if (this.replica.rules === 'v5') {
      this.pending.drop(
        (tx) => this.replica.stampRefusal(tx, { warmKeys: this.resolveWarmKey })?.message,
        (tx, reason) => this.onDropped?.(tx, reason),
      );
    }
    // A held Finish stays pending (pinFinish).
    const c = composeDiff(this.replica, { pending: this.pending.composable(), extra, warmKeys: this.resolveWarmKey });
    this.pending.composed();
    const userSig = this.sign(diffSignedBytes(this.escrow.escrowId, c.nonce, c.applied, c.root));
    const d: SentDiff = { nonce: c.nonce, txs: c.applied, postStateRoot: c.root, userSig, warmKeyBindings: c.warmKeyBindings };
    this.hostDiffs.keep(d);
    const r = this.onDiff?.(d);
    if (r instanceof Promise) this.recording.push(r);
    return d;
  }

  /**
   * The request for `nonce`: empty diffs for nonces reserved but never sent, then the nonce's
   * MsgStartInference. `prompt` is the OpenAI body bytes sent as the payload (its canonical hash
   * is the prompt_hash; its length the input_length, as devshardctl sets it).
   */
  prepare(nonce: bigint, p: { prompt: Uint8Array; model: string; maxTokens: bigint; startedAt: bigint }): PreparedRequest {
    if (nonce <= this.replica.latestNonce) throw new RangeError(`nonce ${nonce} is already used on escrow ${this.escrow.escrowId} (latest ${this.replica.latestNonce})`);
    this.recording = [];
    while (this.replica.latestNonce + 1n < nonce) this.next([]);
    const payload: InferencePayload = { prompt: p.prompt, model: p.model, inputLength: BigInt(p.prompt.length), maxTokens: p.maxTokens, startedAt: p.startedAt };
    this.next([startInferenceTx(nonce, p.prompt, payload)]);
    this.open.add(nonce, payload);
    const hostUrl = this.executorUrl(nonce);
    const diffs = this.catchUp(hostUrl);
    const recorded = this.recording;
    this.recording = [];
    return { nonce, hostUrl, body: new TextEncoder().encode(inferenceRequestJson(diffs, nonce, payload)), diffs: diffs.length, recorded };
  }

  /**
   * v5: how many nonces an idle span takes now (Z5 user/heartbeat.go): one heartbeat diff per slot,
   * after a diff of its own for the host txs still pending (the heartbeat diffs stay payload-less).
   */
  spanNonces(): number {
    return this.escrow.slots.length + (this.pending.composableCount() > 0 ? 1 : 0);
  }

  /**
   * v5: an idle span over the nonces `from`..`upTo` (reserved by the caller; empty diffs fill any
   * nonce reserved before `from` and not sent). The pending host txs go first in a diff of their
   * own when the span has room for it; then each nonce carries one MsgHeartbeat, the first after a
   * MsgForceHeightSyncTurn (session-txs.ts heartbeatTxs).
   * Answers the diffs and their recordings (settle before sending).
   */
  heartbeatSpan(from: bigint, upTo: bigint, reason: HeightSyncReason = 'quiet_session'): { diffs: SentDiff[]; recorded: Promise<unknown>[] } {
    if (from <= this.replica.latestNonce) throw new RangeError(`nonce ${from} is already used on escrow ${this.escrow.escrowId} (latest ${this.replica.latestNonce})`);
    this.recording = [];
    while (this.replica.latestNonce + 1n < from) this.next([]);
    const n = this.escrow.slots.length;
    const diffs: SentDiff[] = [];
    if (this.pending.composableCount() > 0 && upTo - from + 1n > BigInt(n)) diffs.push(this.next([]));
    let first = true;
    while (this.replica.latestNonce < upTo) {
      const extra = heartbeatTxs(this.replica, this.replica.latestNonce + 1n, n, first, reason);
      first = false;
      diffs.push(this.next(extra));
    }
    const recorded = this.recording;
    this.recording = [];
    return { diffs, recorded };
  }

  /** v5: host acks waiting for a diff (a span's answers bring them). */
  pendingAcks(): number {
    return this.pending.acks();
  }

  /** A diff at `nonce` carrying only the pending host txs (v5: the acks after a span). */
  flushDiff(nonce: bigint): { diff: SentDiff; recorded: Promise<unknown>[] } {
    if (nonce <= this.replica.latestNonce) throw new RangeError(`nonce ${nonce} is already used on escrow ${this.escrow.escrowId} (latest ${this.replica.latestNonce})`);
    this.recording = [];
    while (this.replica.latestNonce + 1n < nonce) this.next([]);
    const diff = this.next([]);
    const recorded = this.recording;
    this.recording = [];
    return { diff, recorded };
  }

  /**
   * The next finalize diff (gonka user/session.go `Finalize`): the MsgFinalizeRound while the
   * session is active, then diffs with only the pending host txs until the phase is Settlement
   * (FinalizeNonce + n). Undefined once there. Answers the diff and its recording to await.
   */
  nextFinalizeDiff(): { diff: SentDiff; recorded: Promise<unknown>[] } | undefined {
    if (this.replica.phase === Phase.Settlement) return undefined;
    // A Finish held for its error-miss votes goes in now: after the MsgFinalizeRound no vote can land.
    this.pending.unpinAll();
    this.recording = [];
    const diff =
      this.replica.phase === Phase.Active
        ? this.next([finalizeRoundTx()])
        : this.next([]);
    const recorded = this.recording;
    this.recording = [];
    return { diff, recorded };
  }

  /**
   * The body that brings host `url` up (diffs only, no payload): to our latest nonce, or with at most
   * `maxDiffs` of its catch-up, to the last of those (gonka user/session.go sendCatchUpWith sends a
   * long catch-up in chunks of 200). Answers the body and the nonce it brings the host to.
   */
  syncBody(url: string, maxDiffs = Infinity): { body: Uint8Array; upTo: bigint } {
    const all = this.catchUp(url);
    const diffs = all.length > maxDiffs ? all.slice(0, maxDiffs) : all;
    const upTo = diffs.length < all.length ? diffs.at(-1)!.nonce : this.replica.latestNonce;
    return { body: new TextEncoder().encode(inferenceRequestJson(diffs, upTo)), upTo };
  }

  /** The latest nonce host `url` acknowledged with a receipt (0: none yet). */
  ackedNonce(url: string): bigint {
    return this.hostDiffs.ackedNonce(url);
  }

  /** How many diffs host `url` has not acknowledged (without building the list). */
  catchUpCount(url: string): number {
    return this.hostDiffs.catchUpCount(url);
  }

  /** The diffs host `url` has not acknowledged. */
  catchUp(url: string): SignedDiff[] {
    return this.hostDiffs.catchUp(url);
  }

  /** The signature input of the `X-Devshard-Signature` header for `body` at `timestampSeconds`. */
  headerMessage(body: Uint8Array, timestampSeconds: bigint): Uint8Array {
    return requestHeaderMessage(this.escrow.escrowId, body, timestampSeconds);
  }

  /** The `X-Devshard-Signature` value (hex, 65 bytes) for `body` at `timestampSeconds`. */
  headerSignature(body: Uint8Array, timestampSeconds: bigint): string {
    return Buffer.from(this.sign(this.headerMessage(body, timestampSeconds))).toString('hex');
  }

  /**
   * A host's receipt: its state_hash must equal our root at that nonce (else ReceiptMismatch, and
   * nothing is taken from it). The executor's signature becomes a MsgConfirmStart for a later diff,
   * for `inferenceId`: the request's nonce (`r.nonce` is the host's latest, which a later request to
   * the same host that got there first has moved past it).
   */
  onReceipt(url: string, r: HostReceipt, inferenceId: bigint = r.nonce): void {
    const ours = this.hostDiffs.rootAt(r.nonce);
    // No root kept: either a nonce we never sent, or one every host acknowledged (this one with an
    // earlier answer, whose root was checked then) while this answer was on its way.
    if (!ours) {
      if (r.nonce <= this.hostDiffs.ackedNonce(url) && r.nonce <= this.replica.latestNonce) return;
      throw new ReceiptMismatch(`host ${url} sent a receipt for nonce ${r.nonce}, which we did not send it`);
    }
    if (!r.stateHash || !bytesEqual(ours, r.stateHash)) {
      const theirs = r.stateHash ? toHex(r.stateHash) : '(none)';
      throw new ReceiptMismatch(`host ${url} state_hash at nonce ${r.nonce} is ${theirs}, ours is ${toHex(ours)}`);
    }
    if (this.hostDiffs.acknowledge(url, r.nonce)) this.onAck?.(url, r.nonce, r.stateHash);
    if (r.receipt && r.receipt.length > 0) {
      const confirm = confirmStartTx(r, r.receipt, inferenceId);
      if (this.pending.take(confirm)) this.onHostTxs?.(url, [confirm]);
    }
    this.hostDiffs.prune();
  }

  /** `devshard_meta.mempool`: host txs (Finish, ConfirmStart, …) for later diffs. */
  onMempool(txs: readonly Uint8Array[], url = ''): void {
    let fresh: DevshardTx[] | undefined;
    for (const b of txs) {
      const tx = fromBinary(DevshardTxSchema, b);
      if (this.pending.take(tx)) (fresh ??= []).push(tx);
    }
    if (fresh && this.onHostTxs) this.onHostTxs(url, fresh);
  }

  /**
   * Our inferences past their deadline (gonka host/timeout.go): still pending `refusal_timeout`
   * seconds after started_at (the executor never confirmed), or started and not finished
   * `execution_timeout` seconds after confirmed_at. Finished ones are forgotten here.
   */
  timeoutCandidates(nowSeconds: bigint): TimeoutCandidate[] {
    return this.open.candidates(this.replica, nowSeconds, (nonce) => this.executorUrl(nonce));
  }

  /** The hosts' URLs (distinct), in slot order, as they are called now (moveHost). */
  hosts(): readonly string[] {
    return this.hostDiffs.hosts();
  }

  /** More accepting weight than the session's vote threshold? (tx-rules: accept > threshold) */
  enoughVotes(acceptingSlots: number): boolean {
    return acceptingSlots > this.replica.config.voteThreshold;
  }

  /** A MsgTimeoutInference with the accepting votes, for the next diff. */
  addTimeout(nonce: bigint, reason: 'refused' | 'execution', votes: readonly { voterSlot: number; signature: Uint8Array }[]): void {
    this.open.queued(nonce, this.replica.latestNonce);
    this.pending.take(timeoutInferenceTx(nonce, reason, votes));
  }

  /** v5: holds the Finish of `inferenceId` (arrived or still to come) out of every compose. */
  pinFinish(inferenceId: bigint): void {
    this.pending.pin(inferenceId);
  }

  /** Lets a held Finish go into the next diff as any host tx. */
  unpinFinish(inferenceId: bigint): void {
    this.pending.unpin(inferenceId);
  }

  /** The pending (not yet composed) Finish of `inferenceId`, if a host sent it. */
  pendingFinish(inferenceId: bigint): DevshardTx | undefined {
    return this.pending.finishOf(inferenceId);
  }

  /**
   * v5: the held Finish and a MsgErrorMiss with the accepting votes go into the next diff together,
   * the Finish first (compose orders host Finishes before the rest), as Z5's `HandleErrorMiss` composes them.
   */
  addErrorMiss(inferenceId: bigint, votes: readonly ErrorMissVote[]): void {
    this.pending.unpin(inferenceId);
    this.pending.take(errorMissTx(inferenceId, votes));
  }

  /** An accepting vote signed by its slot's address or warm key (a forged one is not counted; session-error-miss.ts). */
  errorMissVoteValid(inferenceId: bigint, responseHash: Uint8Array, vote: ErrorMissVote): boolean {
    return errorMissVoteValid(this.replica, this.escrow.escrowId, inferenceId, responseHash, vote);
  }

  /** Accepting weight of `votes`: each voter address counts its slots once (the replica's countVotes). */
  voteWeight(votes: readonly { voterSlot: number }[]): number {
    return voteWeight(this.replica, votes);
  }
}
