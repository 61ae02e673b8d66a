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
 * (and the warm-key lookup is the injected `warmKeyGranted`).
 */
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import {
  chargesOf,
  type Charge,
  bytesEqual,
  canonicalPromptHash,
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
  errorMissVoteBytes,
  recoverAddress,
} from '../../protocol/index.js';
import { DevshardTxSchema, type DevshardTx } from '../../protocol/gen/devshard/v1/diff_pb.js';
import { MsgConfirmStartSchema, MsgFinalizeRoundSchema, MsgStartInferenceSchema, MsgTimeoutInferenceSchema, TimeoutReason, TimeoutVoteSchema } from '../../protocol/gen/devshard/v1/tx_pb.js';
import { InferenceStatus } from '../../protocol/inference-record.js';
import { forceHeightSyncTurnTx, heartbeatTx, type HeightSyncReason } from '../../protocol/height-sync.js';
import type { ErrorMissVote } from '../../protocol/gen/devshard/v1/tx_pb.js';

/** The reference gateway's K when it opens a heartbeat turn: max(K or 10, slots) (Z5 user/heartbeat.go). */
const HEARTBEAT_TURN_K = 10;
import type { HostReceipt } from './host-events.js';
import { ReceiptMismatch, type PreparedRequest, type ProtocolSign, type SentDiff, type SessionEscrow, type WarmKeyGrantLookup, replicaParamsOf } from './session-types.js';
import { WarmKeyAnswers } from './warm-key-answers.js';

export * from './session-types.js';
export { WARM_KEY_DENIED_TTL_MS } from './warm-key-answers.js';
import { inferenceRequestJson, type InferencePayload, type SignedDiff } from './request-body.js';

/** A tx's identity: its deterministic encoding as a string (one byte a char), no digest needed. */
const txKey = (tx: DevshardTx): string => {
  const b = toBinary(DevshardTxSchema, tx);
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('latin1');
};

export class DevshardSession {
  readonly replica: Replica;
  /** What the session speaks: its route under each host's inference URL and its state-root tag. */
  readonly protocol: EscrowProtocol;
  /** Inference → what the diffs of an earlier run (the log) charged it: its Finish's cost, or 0 timed out. */
  readonly recordedCharges = new Map<bigint, Charge>();
  /** Diffs not yet acknowledged by every host, ascending. */
  private readonly unacked: SentDiff[] = [];
  /** Root after each nonce still in `unacked` (a receipt is checked against it). */
  private readonly roots = new Map<bigint, Uint8Array>();
  /** Inference URL → the latest nonce that host acknowledged. */
  private readonly acked = new Map<string, bigint>();
  /** Host txs waiting for the next diff, by content hash (a tx seen twice is taken once). */
  private readonly pending = new Map<string, DevshardTx>();
  /** Slot id → the URL its host is called at: the escrow's, until the host moved (moveHost). */
  private readonly slotUrls: string[];
  /** The distinct URLs of slotUrls, in slot order. */
  private hostUrls: string[];
  /** Payloads of our inferences not yet finished or timed out (a refusal timeout vote needs it). */
  private readonly open = new Map<bigint, InferencePayload>();
  /** Inference → our latest nonce when its MsgTimeoutInference was queued (not asked again until a diff was composed). */
  private readonly timingOut = new Map<bigint, bigint>();
  /**
   * v5: inferences whose Finish is held out of every compose while their error-miss votes are
   * collected, so the Finish and the MsgErrorMiss land in one diff (Z5 user/session.go
   * `pinnedFinishIDs`, `HandleErrorMiss`).
   */
  private readonly pinned = new Set<bigint>();
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
    for (const d of recorded) {
      this.unacked.push(d);
      this.roots.set(d.nonce, d.postStateRoot);
    }
    this.slotUrls = escrow.slots.map((s) => s.url);
    this.hostUrls = [...new Set(this.slotUrls)];
    if (recordedHostTxs.length > 0) {
      const included = new Set<string>();
      for (const d of recorded) for (const tx of d.txs) included.add(txKey(tx));
      for (const tx of recordedHostTxs) if (!included.has(txKey(tx))) this.take(tx);
    }
  }

  get latestNonce(): bigint {
    return this.replica.latestNonce;
  }

  /** The executor of a nonce: slots[nonce % n]. */
  executorUrl(nonce: bigint): string {
    return this.slotUrls[Number(nonce % BigInt(this.slotUrls.length))]!;
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
    const from = new Set<string>();
    this.escrow.slots.forEach((slot, i) => {
      if (slot.host !== address || this.slotUrls[i] === url) return;
      from.add(this.slotUrls[i]!);
      this.slotUrls[i] = url;
    });
    if (from.size === 0) return false;
    let acked = this.hostUrls.includes(url) ? (this.acked.get(url) ?? 0n) : undefined;
    for (const old of from) {
      const a = this.acked.get(old) ?? 0n;
      if (acked === undefined || a < acked) acked = a;
      // Another address still called there keeps it (and its acknowledged nonce).
      if (!this.slotUrls.includes(old)) this.acked.delete(old);
    }
    if (acked !== undefined && acked > 0n) this.acked.set(url, acked);
    else this.acked.delete(url);
    this.hostUrls = [...new Set(this.slotUrls)];
    return true;
  }

  /** Our root after `nonce`, while some host has not acknowledged it. */
  rootAt(nonce: bigint): Uint8Array | undefined {
    return this.roots.get(nonce);
  }

  /** Pending host txs (for tests and status). */
  pendingTxs(): DevshardTx[] {
    return [...this.pending.values()];
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
      for (const [key, tx] of this.pending) {
        const refusal = this.replica.stampRefusal(tx, { warmKeys: this.resolveWarmKey });
        if (refusal) {
          this.pending.delete(key);
          this.onDropped?.(tx, refusal.message);
        }
      }
    }
    const held = [...this.pending].filter(([, tx]) => this.isPinned(tx));
    const c = composeDiff(this.replica, { pending: [...this.pending.values()].filter((tx) => !this.isPinned(tx)), extra, warmKeys: this.resolveWarmKey });
    this.pending.clear();
    for (const [key, tx] of held) this.pending.set(key, tx);
    const userSig = this.sign(diffSignedBytes(this.escrow.escrowId, c.nonce, c.applied, c.root));
    const d: SentDiff = { nonce: c.nonce, txs: c.applied, postStateRoot: c.root, userSig, warmKeyBindings: c.warmKeyBindings };
    this.unacked.push(d);
    this.roots.set(c.nonce, c.root);
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
    const start = create(MsgStartInferenceSchema, {
      inferenceId: nonce,
      promptHash: canonicalPromptHash(p.prompt),
      model: p.model,
      inputLength: payload.inputLength,
      maxTokens: payload.maxTokens,
      startedAt: payload.startedAt,
    });
    this.next([create(DevshardTxSchema, { tx: { case: 'startInference', value: start } })]);
    this.open.set(nonce, payload);
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
    return this.escrow.slots.length + (this.composablePending() > 0 ? 1 : 0);
  }

  /**
   * v5: an idle span over the nonces `from`..`upTo` (reserved by the caller; empty diffs fill any
   * nonce reserved before `from` and not sent). The pending host txs go first in a diff of their
   * own when the span has room for it; then each nonce carries one MsgHeartbeat stamped exactly
   * F(nonce) (absent before any floor), the first preceded by a MsgForceHeightSyncTurn over the
   * span unless a forced turn is already open (Z5 user/heartbeat.go, heightsync/compose.go).
   * Answers the diffs and their recordings (settle before sending).
   */
  heartbeatSpan(from: bigint, upTo: bigint, reason: HeightSyncReason = 'quiet_session'): { diffs: SentDiff[]; recorded: Promise<unknown>[] } {
    if (from <= this.replica.latestNonce) throw new RangeError(`nonce ${from} is already used on escrow ${this.escrow.escrowId} (latest ${this.replica.latestNonce})`);
    this.recording = [];
    while (this.replica.latestNonce + 1n < from) this.next([]);
    const n = this.escrow.slots.length;
    const diffs: SentDiff[] = [];
    if (this.composablePending() > 0 && upTo - from + 1n > BigInt(n)) diffs.push(this.next([]));
    let first = true;
    while (this.replica.latestNonce < upTo) {
      const m = this.replica.latestNonce + 1n;
      const stamp = this.replica.referenceStamp(m);
      const extra: DevshardTx[] = [];
      if (first && !this.replica.forcedTurnActive(m)) {
        extra.push(forceHeightSyncTurnTx({ triggerNonce: m, slotsNum: n, anchorK: BigInt(Math.max(HEARTBEAT_TURN_K, n)), reason: 'heartbeat' }));
      }
      first = false;
      extra.push(heartbeatTx({ slotsNum: n, reason, ...(stamp ? { stamp } : {}) }));
      diffs.push(this.next(extra));
    }
    const recorded = this.recording;
    this.recording = [];
    return { diffs, recorded };
  }

  /** v5: host acks waiting for a diff (a span's answers bring them). */
  pendingAcks(): number {
    let k = 0;
    for (const tx of this.pending.values()) if (tx.tx.case === 'heightAck') k++;
    return k;
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
    this.pinned.clear();
    this.recording = [];
    const diff =
      this.replica.phase === Phase.Active
        ? this.next([create(DevshardTxSchema, { tx: { case: 'finalizeRound', value: create(MsgFinalizeRoundSchema, {}) } })])
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

  /** How many diffs host `url` has not acknowledged (without building the list). */
  /** The latest nonce host `url` acknowledged with a receipt (0: none yet). */
  ackedNonce(url: string): bigint {
    return this.acked.get(url) ?? 0n;
  }

  catchUpCount(url: string): number {
    const from = this.acked.get(url) ?? 0n;
    let n = 0;
    for (let i = this.unacked.length - 1; i >= 0 && this.unacked[i]!.nonce > from; i--) n++;
    return n;
  }

  /** The diffs host `url` has not acknowledged. */
  catchUp(url: string): SignedDiff[] {
    const from = this.acked.get(url) ?? 0n;
    const out: SignedDiff[] = [];
    // The kept diffs themselves (never changed once signed), so their JSON is made once (request-body.ts).
    for (const d of this.unacked) if (d.nonce > from) out.push(d);
    return out;
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
    const ours = this.roots.get(r.nonce);
    // No root kept: either a nonce we never sent, or one every host acknowledged (this one with an
    // earlier answer, whose root was checked then) while this answer was on its way.
    if (!ours) {
      if (r.nonce <= (this.acked.get(url) ?? 0n) && r.nonce <= this.replica.latestNonce) return;
      throw new ReceiptMismatch(`host ${url} sent a receipt for nonce ${r.nonce}, which we did not send it`);
    }
    if (!r.stateHash || !bytesEqual(ours, r.stateHash)) {
      const theirs = r.stateHash ? toHex(r.stateHash) : '(none)';
      throw new ReceiptMismatch(`host ${url} state_hash at nonce ${r.nonce} is ${theirs}, ours is ${toHex(ours)}`);
    }
    if ((this.acked.get(url) ?? 0n) < r.nonce) {
      this.acked.set(url, r.nonce);
      this.onAck?.(url, r.nonce, r.stateHash);
    }
    if (r.receipt && r.receipt.length > 0) {
      // v5: the stamp the executor signed into its receipt goes into the ConfirmStart unchanged.
      const stamp = { ...(r.observedHeight !== undefined ? { observedHeight: r.observedHeight } : {}), ...(r.observedBlockHash ? { observedBlockHash: r.observedBlockHash } : {}) };
      const confirm = create(DevshardTxSchema, { tx: { case: 'confirmStart', value: create(MsgConfirmStartSchema, { inferenceId, executorSig: r.receipt, confirmedAt: r.confirmedAt ?? 0n, ...stamp }) } });
      if (this.take(confirm)) this.onHostTxs?.(url, [confirm]);
    }
    this.prune();
  }

  /** `devshard_meta.mempool`: host txs (Finish, ConfirmStart, …) for later diffs. */
  onMempool(txs: readonly Uint8Array[], url = ''): void {
    let fresh: DevshardTx[] | undefined;
    for (const b of txs) {
      const tx = fromBinary(DevshardTxSchema, b);
      if (this.take(tx)) (fresh ??= []).push(tx);
    }
    if (fresh && this.onHostTxs) this.onHostTxs(url, fresh);
  }

  /**
   * Our inferences past their deadline (gonka host/timeout.go): still pending `refusal_timeout`
   * seconds after started_at (the executor never confirmed), or started and not finished
   * `execution_timeout` seconds after confirmed_at. Finished ones are forgotten here.
   */
  timeoutCandidates(nowSeconds: bigint): { nonce: bigint; reason: 'refused' | 'execution'; executorUrl: string; payload: InferencePayload }[] {
    const out: { nonce: bigint; reason: 'refused' | 'execution'; executorUrl: string; payload: InferencePayload }[] = [];
    const cfg = this.replica.config;
    for (const [nonce, payload] of this.open) {
      const rec = this.replica.inference(nonce);
      if (!rec || (rec.status !== InferenceStatus.Pending && rec.status !== InferenceStatus.Started)) {
        this.open.delete(nonce);
        this.timingOut.delete(nonce);
        continue;
      }
      const queuedAt = this.timingOut.get(nonce);
      if (queuedAt !== undefined && queuedAt >= this.replica.latestNonce) continue;
      if (rec.status === InferenceStatus.Pending && nowSeconds >= rec.startedAt + cfg.refusalTimeout) out.push({ nonce, reason: 'refused', executorUrl: this.executorUrl(nonce), payload });
      else if (rec.status === InferenceStatus.Started && nowSeconds >= rec.confirmedAt + cfg.executionTimeout) out.push({ nonce, reason: 'execution', executorUrl: this.executorUrl(nonce), payload });
    }
    return out;
  }

  /** The hosts' URLs (distinct), in slot order, as they are called now (moveHost). */
  hosts(): readonly string[] {
    return this.hostUrls;
  }

  /** More accepting weight than the session's vote threshold? (tx-rules: accept > threshold) */
  enoughVotes(acceptingSlots: number): boolean {
    return acceptingSlots > this.replica.config.voteThreshold;
  }

  /** A MsgTimeoutInference with the accepting votes, for the next diff. */
  addTimeout(nonce: bigint, reason: 'refused' | 'execution', votes: readonly { voterSlot: number; signature: Uint8Array }[]): void {
    this.timingOut.set(nonce, this.replica.latestNonce);
    this.take(
      create(DevshardTxSchema, {
        tx: {
          case: 'timeoutInference',
          value: create(MsgTimeoutInferenceSchema, {
            inferenceId: nonce,
            reason: reason === 'refused' ? TimeoutReason.REFUSED : TimeoutReason.EXECUTION,
            votes: votes.map((v) => create(TimeoutVoteSchema, { voterSlot: v.voterSlot, accept: true, signature: v.signature })),
          }),
        },
      }),
    );
  }

  /** v5: holds the Finish of `inferenceId` (arrived or still to come) out of every compose. */
  pinFinish(inferenceId: bigint): void {
    this.pinned.add(inferenceId);
  }

  /** Lets a held Finish go into the next diff as any host tx. */
  unpinFinish(inferenceId: bigint): void {
    this.pinned.delete(inferenceId);
  }

  /** The pending (not yet composed) Finish of `inferenceId`, if a host sent it. */
  pendingFinish(inferenceId: bigint): DevshardTx | undefined {
    for (const tx of this.pending.values()) if (tx.tx.case === 'finishInference' && tx.tx.value.inferenceId === inferenceId) return tx;
    return undefined;
  }

  /**
   * v5: the held Finish and a MsgErrorMiss with the accepting votes go into the next diff together,
   * the Finish first (compose orders host Finishes before the rest), as Z5's `HandleErrorMiss` composes them.
   */
  addErrorMiss(inferenceId: bigint, votes: readonly ErrorMissVote[]): void {
    this.pinned.delete(inferenceId);
    this.take(errorMissTx(inferenceId, votes));
  }

  /**
   * An accepting vote signed over ErrorMissVoteContent{escrow, id, true, response_hash} by the
   * address of its slot (or the warm key bound to it): a forged vote would make the replica refuse
   * the whole MsgErrorMiss, so it is not counted.
   */
  errorMissVoteValid(inferenceId: bigint, responseHash: Uint8Array, vote: ErrorMissVote): boolean {
    const expected = this.replica.slots[vote.voterSlot];
    if (expected === undefined || !vote.accept) return false;
    let signer: string;
    try {
      signer = recoverAddress(errorMissVoteBytes(this.escrow.escrowId, inferenceId, true, responseHash), vote.signature);
    } catch {
      return false;
    }
    return signer === expected || this.replica.warmKeys.get(vote.voterSlot) === signer;
  }

  /** Accepting weight of `votes`: each voter address counts its slots once (the replica's countVotes). */
  voteWeight(votes: readonly { voterSlot: number }[]): number {
    const addresses = new Set(votes.map((v) => this.replica.slots[v.voterSlot]).filter((a): a is string => a !== undefined));
    let w = 0;
    for (const a of addresses) w += this.replica.slots.filter((x) => x === a).length;
    return w;
  }

  private isPinned(tx: DevshardTx): boolean {
    return tx.tx.case === 'finishInference' && this.pinned.has(tx.tx.value.inferenceId);
  }

  /** Pending host txs the next compose would take (held Finishes aside). */
  private composablePending(): number {
    let k = 0;
    for (const tx of this.pending.values()) if (!this.isPinned(tx)) k++;
    return k;
  }

  /** Adds a tx to the pending set; true when it was not there (nor carried by a diff still unacknowledged). */
  private take(tx: DevshardTx): boolean {
    const key = txKey(tx);
    if (this.pending.has(key)) return false;
    this.pending.set(key, tx);
    return true;
  }

  /** Drops the diffs every host has acknowledged. */
  private prune(): void {
    let min: bigint | undefined;
    for (const url of this.hostUrls) {
      const a = this.acked.get(url) ?? 0n;
      if (min === undefined || a < min) min = a;
    }
    let drop = 0;
    while (drop < this.unacked.length && this.unacked[drop]!.nonce <= (min ?? 0n)) this.roots.delete(this.unacked[drop++]!.nonce);
    if (drop > 0) this.unacked.splice(0, drop);
  }
}
