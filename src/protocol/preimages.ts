/**
 * The bytes each devshard signature covers (deterministic proto; protobuf-es writes fields in
 * field-number order and omits proto3 defaults, as Go's `proto.MarshalOptions{Deterministic: true}`).
 * Sources (gonka 8a35022): devshard/state/machine.go `BuildDiffContent`, `applyConfirmStart`,
 * `applyTimeout`, `verifyProposerSig`; devshard/state/settlement.go `VerifySettlement`;
 * devshard/transport/auth.go (request header); devshard/proto/devshard/v1/diff.proto.
 */
import { create, toBinary } from '@bufbuild/protobuf';
import {
  DiffContentSchema,
  ErrorMissVoteContentSchema,
  ExecutorReceiptContentSchema,
  StateSignatureContentSchema,
  TimeoutVoteContentSchema,
  type DevshardTx,
} from './gen/devshard/v1/diff_pb.js';
import {
  MsgFinishInferenceSchema,
  MsgValidationSchema,
  MsgValidationVoteSchema,
  type MsgFinishInference,
  type MsgValidation,
  type MsgValidationVote,
  type TimeoutReason,
} from './gen/devshard/v1/tx_pb.js';
import { sha256, u64be, utf8 } from './bytes.js';

/** What the user signs: DiffContent{nonce, txs, escrow_id, post_state_root}. */
export const diffSignedBytes = (escrowId: string, nonce: bigint, txs: readonly DevshardTx[], postStateRoot: Uint8Array): Uint8Array =>
  toBinary(DiffContentSchema, create(DiffContentSchema, { nonce, txs: [...txs], escrowId, postStateRoot }));

/** What goes on the wire as a diff's `txs` (std base64 in JSON): DiffContent{nonce, txs}. */
export const diffWireBytes = (nonce: bigint, txs: readonly DevshardTx[]): Uint8Array =>
  toBinary(DiffContentSchema, create(DiffContentSchema, { nonce, txs: [...txs] }));

/** What a host signs over a state root: StateSignatureContent{state_root, escrow_id, nonce}. */
export const stateSignatureBytes = (stateRoot: Uint8Array, escrowId: string, nonce: bigint): Uint8Array =>
  toBinary(StateSignatureContentSchema, create(StateSignatureContentSchema, { stateRoot, escrowId, nonce }));

export interface ExecutorReceiptFields {
  inferenceId: bigint;
  promptHash: Uint8Array;
  model: string;
  inputLength: bigint;
  maxTokens: bigint;
  startedAt: bigint;
  escrowId: string;
  confirmedAt: bigint;
  /** v5: the executor's stamp (ExecutorReceiptContent 9/10); absent under v2. */
  observedHeight?: bigint;
  observedBlockHash?: Uint8Array;
}

/** What the executor signs in MsgConfirmStart.executor_sig: ExecutorReceiptContent. */
export const executorReceiptBytes = (f: ExecutorReceiptFields): Uint8Array => toBinary(ExecutorReceiptContentSchema, create(ExecutorReceiptContentSchema, f));

/** What a host signs when it votes on a timeout: TimeoutVoteContent{escrow_id, inference_id, reason, accept}. */
export const timeoutVoteBytes = (escrowId: string, inferenceId: bigint, reason: TimeoutReason, accept: boolean): Uint8Array =>
  toBinary(TimeoutVoteContentSchema, create(TimeoutVoteContentSchema, { escrowId, inferenceId, reason, accept }));

/**
 * v5: what a host signs when it votes on an error-miss: ErrorMissVoteContent{escrow_id,
 * inference_id, accept, response_hash}, the response hash being the one the Finish recorded.
 */
export const errorMissVoteBytes = (escrowId: string, inferenceId: bigint, accept: boolean, responseHash: Uint8Array): Uint8Array =>
  toBinary(ErrorMissVoteContentSchema, create(ErrorMissVoteContentSchema, { escrowId, inferenceId, accept, responseHash }));

const EMPTY = new Uint8Array(0);

/**
 * What a proposer signs: the message itself with `proposer_sig` cleared. Unknown fields the
 * message carried stay in the bytes (protobuf-go keeps and re-emits them; protobuf-es too: the
 * shallow copy keeps `$unknown`). A shallow copy, not `clone` (a deep reflective copy): nothing
 * here changes the fields it shares.
 */
export function finishProposerBytes(msg: MsgFinishInference): Uint8Array {
  return toBinary(MsgFinishInferenceSchema, { ...msg, proposerSig: EMPTY });
}

export function validationProposerBytes(msg: MsgValidation): Uint8Array {
  return toBinary(MsgValidationSchema, { ...msg, proposerSig: EMPTY });
}

export function validationVoteProposerBytes(msg: MsgValidationVote): Uint8Array {
  return toBinary(MsgValidationVoteSchema, { ...msg, proposerSig: EMPTY });
}

/**
 * The digest the request header `X-Devshard-Signature` signs: the transport hashes
 * escrow_id ‖ body ‖ timestamp (8 bytes big-endian, unix seconds) once and the signer hashes
 * again, so the ECDSA input is sha256(sha256(preimage)) (real-network.md §3 "Headers").
 * Returns the inner hash: sign it with `signMessage` (which hashes once more).
 */
export const requestHeaderMessage = (escrowId: string, body: Uint8Array, timestampSeconds: bigint): Uint8Array =>
  sha256(utf8(escrowId), body, u64be(timestampSeconds));
