/**
 * A small kit to drive a replica the way gonka's devshard/state tests drive the Go machine
 * (devshard/internal/testutil: MakeGroup, MakeMultiSlotGroup, SignDiff, SignExecutorReceipt,
 * SignProposerTx, SignTimeoutVote): deterministic keys, signed txs, signed diffs.
 */
import { create } from '@bufbuild/protobuf';
import { expect } from 'vitest';
import { sha256, utf8 } from '../../src/protocol/bytes.js';
import { signDiff } from '../../src/protocol/compose.js';
import { DevshardError } from '../../src/protocol/errors.js';
import { DevshardTxSchema, type DevshardTx } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import {
  MsgFinishInferenceSchema,
  MsgValidationSchema,
  MsgValidationVoteSchema,
  TimeoutReason,
  TimeoutVoteSchema,
} from '../../src/protocol/gen/devshard/v1/tx_pb.js';
import { errorMissTx, signErrorMissVote } from '../../src/protocol/error-miss.js';
import { SyncState } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { forceHeightSyncTurnTx, heartbeatTx, heightAckTx, signHeightAck, type HeightSyncReason } from '../../src/protocol/height-sync.js';
import { executorReceiptBytes, finishProposerBytes, timeoutVoteBytes, validationProposerBytes, validationVoteProposerBytes } from '../../src/protocol/preimages.js';
import { Replica, type ApplyResult, type WarmKeyResolver } from '../../src/protocol/replica.js';
import { defaultSessionConfig, type SessionConfig } from '../../src/protocol/session-config.js';
import { addressFromPrivateKey, signMessage } from '../../src/protocol/signatures.js';
import type { Stamp } from '../../src/protocol/stamps.js';
import type { RuleSet } from '../../src/protocol/versions.js';

/** A stamp at `height` with a short hash naming it (presence is the hash). */
export const stampAt = (height: bigint, hash: Uint8Array = utf8(`block-${height}`)): Stamp => ({ height, hash });
const stampFields = (s: Stamp | undefined) => (s ? { observedHeight: s.height, observedBlockHash: s.hash } : {});
/** The response hash every kit Finish carries (an error-miss vote signs it). */
export const KIT_RESPONSE_HASH = utf8('response');

export interface Key {
  priv: Uint8Array;
  address: string;
}

export const keyOf = (label: string): Key => {
  const priv = sha256(utf8(`shardgate-test-key/${label}`));
  return { priv, address: addressFromPrivateKey(priv) };
};

export interface KitOptions {
  /** Slots per signer (default one each); `hosts` signers in all. */
  hosts?: number;
  slotsPerHost?: number[];
  amount?: bigint;
  config?: Partial<SessionConfig>;
  escrowId?: string;
  warmKeys?: WarmKeyResolver;
  /** The rule set (default v2). Under v5 a Start reserves 64 tokens by default (the floor). */
  rules?: RuleSet;
}

export class Kit {
  readonly user = keyOf('user');
  readonly hosts: Key[];
  /** Slot id → the key holding it. */
  readonly slotKeys: Key[];
  readonly escrowId: string;
  readonly replica: Replica;
  readonly rules: RuleSet;
  warmKeys: WarmKeyResolver | undefined;
  /** Records per started id (to sign receipts). */
  private starts = new Map<bigint, { promptHash: Uint8Array; model: string; inputLength: bigint; maxTokens: bigint; startedAt: bigint }>();

  constructor(opts: KitOptions = {}) {
    const layout = opts.slotsPerHost ?? Array.from({ length: opts.hosts ?? 3 }, () => 1);
    this.hosts = layout.map((_, i) => keyOf(`host-${i}`));
    this.slotKeys = layout.flatMap((n, i) => Array.from({ length: n }, () => this.hosts[i]!));
    this.escrowId = opts.escrowId ?? 'escrow-1';
    this.warmKeys = opts.warmKeys;
    this.rules = opts.rules ?? 'v2';
    // gonka testutil.DefaultConfig: price 1, no fees, threshold n/2.
    const config = { ...defaultSessionConfig(this.slotKeys.length), createDevshardFee: 0n, feePerNonce: 0n, ...opts.config };
    this.replica = Replica.create({
      escrowId: this.escrowId,
      slots: this.slotKeys.map((k) => k.address),
      amount: opts.amount ?? 10_000n,
      userAddress: this.user.address,
      config,
      ...(opts.rules ? { rules: opts.rules } : {}),
    });
  }

  get nextNonce(): bigint {
    return this.replica.latestNonce + 1n;
  }

  /** Signs and applies a diff at the next nonce (host side, ApplyDiff). */
  apply(txs: DevshardTx[], postStateRoot: Uint8Array = new Uint8Array(0)): ApplyResult {
    const d = signDiff(this.escrowId, this.nextNonce, txs, postStateRoot, this.user.priv);
    return this.replica.applyDiff(d, { warmKeys: this.warmKeys });
  }

  /** Applies and expects the refusal, with the state untouched. */
  refused(txs: DevshardTx[], code: DevshardError['code'], text?: string, postStateRoot?: Uint8Array): DevshardError {
    const before = this.replica.stateRoot();
    const nonce = this.replica.latestNonce;
    let err: unknown;
    try {
      this.apply(txs, postStateRoot);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DevshardError);
    expect((err as DevshardError).code).toBe(code);
    if (text !== undefined) expect((err as DevshardError).message).toBe(text);
    expect(this.replica.stateRoot()).toEqual(before);
    expect(this.replica.latestNonce).toBe(nonce);
    return err as DevshardError;
  }

  start(id = this.nextNonce, f: { inputLength?: bigint; maxTokens?: bigint; startedAt?: bigint; model?: string; prompt?: string; stamp?: Stamp } = {}): DevshardTx {
    const s = { promptHash: utf8(f.prompt ?? 'prompt'), model: f.model ?? 'llama', inputLength: f.inputLength ?? 100n, maxTokens: f.maxTokens ?? (this.rules === 'v5' ? 64n : 50n), startedAt: f.startedAt ?? 1000n };
    this.starts.set(id, s);
    return create(DevshardTxSchema, { tx: { case: 'startInference', value: { inferenceId: id, ...s, ...stampFields(f.stamp) } } });
  }

  /** Replaces the prompt hash a later receipt signs for `id`. */
  setPromptHash(id: bigint, promptHash: Uint8Array): void {
    this.starts.set(id, { ...this.starts.get(id)!, promptHash });
  }

  executorSlot(id: bigint): number {
    return Number(id % BigInt(this.slotKeys.length));
  }

  /** The executor's receipt relayed as MsgConfirmStart; under v5 `stamp` is signed with it. */
  confirm(id: bigint, confirmedAt = 1000n, signer: Key = this.slotKeys[this.executorSlot(id)]!, stamp?: Stamp): DevshardTx {
    const s = this.starts.get(id)!;
    const executorSig = signMessage(executorReceiptBytes({ inferenceId: id, escrowId: this.escrowId, confirmedAt, ...s, ...stampFields(stamp) }), signer.priv);
    return create(DevshardTxSchema, { tx: { case: 'confirmStart', value: { inferenceId: id, executorSig, confirmedAt, ...stampFields(stamp) } } });
  }

  finish(id: bigint, f: { inputTokens?: bigint; outputTokens?: bigint; slot?: number; signer?: Key; escrowId?: string; stamp?: Stamp } = {}): DevshardTx {
    const slot = f.slot ?? this.executorSlot(id);
    const msg = create(MsgFinishInferenceSchema, {
      inferenceId: id,
      responseHash: KIT_RESPONSE_HASH,
      inputTokens: f.inputTokens ?? 80n,
      outputTokens: f.outputTokens ?? 40n,
      executorSlot: slot,
      escrowId: f.escrowId ?? this.escrowId,
      ...stampFields(f.stamp),
    });
    msg.proposerSig = signMessage(finishProposerBytes(msg), (f.signer ?? this.slotKeys[slot]!).priv);
    return create(DevshardTxSchema, { tx: { case: 'finishInference', value: msg } });
  }

  validation(id: bigint, slot: number, valid: boolean, signer: Key = this.slotKeys[slot]!, escrowId = this.escrowId): DevshardTx {
    const msg = create(MsgValidationSchema, { inferenceId: id, validatorSlot: slot, valid, escrowId });
    msg.proposerSig = signMessage(validationProposerBytes(msg), signer.priv);
    return create(DevshardTxSchema, { tx: { case: 'validation', value: msg } });
  }

  vote(id: bigint, slot: number, voteValid: boolean, signer: Key = this.slotKeys[slot]!): DevshardTx {
    const msg = create(MsgValidationVoteSchema, { inferenceId: id, voterSlot: slot, voteValid, escrowId: this.escrowId });
    msg.proposerSig = signMessage(validationVoteProposerBytes(msg), signer.priv);
    return create(DevshardTxSchema, { tx: { case: 'validationVote', value: msg } });
  }

  timeoutVote(id: bigint, slot: number, reason: TimeoutReason, accept = true, signer: Key = this.slotKeys[slot]!) {
    return create(TimeoutVoteSchema, { voterSlot: slot, accept, signature: signMessage(timeoutVoteBytes(this.escrowId, id, reason, accept), signer.priv) });
  }

  timeout(id: bigint, reason: TimeoutReason, slots: number[], accept = true): DevshardTx {
    return create(DevshardTxSchema, { tx: { case: 'timeoutInference', value: { inferenceId: id, reason, votes: slots.map((s) => this.timeoutVote(id, s, reason, accept)) } } });
  }

  finalize(): DevshardTx {
    return create(DevshardTxSchema, { tx: { case: 'finalizeRound', value: {} } });
  }

  revealSeed(slot: number): DevshardTx {
    return create(DevshardTxSchema, { tx: { case: 'revealSeed', value: { slotId: slot, signature: new Uint8Array(8), escrowId: this.escrowId } } });
  }

  // ---- v5 ----------------------------------------------------------------------------------

  heartbeat(stamp?: Stamp, f: { slotsNum?: number; reason?: HeightSyncReason } = {}): DevshardTx {
    return heartbeatTx({ slotsNum: f.slotsNum ?? this.slotKeys.length, reason: f.reason ?? 'quiet_session', ...(stamp ? { stamp } : {}) });
  }

  /** A host's signed ack of the heartbeat at `refNonce` (peer_seen sized for the group). */
  ack(refNonce: bigint, slot: number, stamp?: Stamp, signer: Key = this.slotKeys[slot]!, syncState = SyncState.SYNCED): DevshardTx {
    const peerSeen = new Uint8Array(Math.ceil(this.slotKeys.length / 8)).fill(0xff);
    const ack = signHeightAck(
      { $typeName: 'devshard.v1.MsgHeightAck', refNonce, slotId: slot, observedHeight: stamp?.height ?? 0n, observedBlockHash: stamp?.hash ?? new Uint8Array(0), syncState, peerSeen, hostSig: new Uint8Array(0) },
      signer.priv,
    );
    return heightAckTx(ack);
  }

  forceTurn(triggerNonce = this.nextNonce, f: { anchorK?: bigint; slotsNum?: number; reason?: string } = {}): DevshardTx {
    return forceHeightSyncTurnTx({ triggerNonce, slotsNum: f.slotsNum ?? this.slotKeys.length, anchorK: f.anchorK ?? 10n, reason: f.reason ?? 'forced' });
  }

  errorMiss(id: bigint, slots: number[], accept = true, signers: Key[] = slots.map((s) => this.slotKeys[s]!)): DevshardTx {
    return errorMissTx(
      id,
      slots.map((slot, i) => signErrorMissVote(this.escrowId, id, KIT_RESPONSE_HASH, slot, accept, signers[i]!.priv)),
    );
  }

  /** gonka's applyStartConfirmFinish: start at nonce id, confirm, finish (three diffs). */
  startConfirmFinish(id: bigint, confirmedAt = 1000n): void {
    expect(this.nextNonce).toBe(id);
    this.apply([this.start(id)]);
    this.apply([this.confirm(id, confirmedAt)]);
    this.apply([this.finish(id)]);
  }
}

export { TimeoutReason };
