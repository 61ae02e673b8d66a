/**
 * What the devshard log audit (audit.ts) answers, and how a reader sees it: per escrow its diffs,
 * replica, settlements, hosts and failures; each diff's txs as lines (`replay`), each inference's
 * trail (`explain`), and a failure as `shardgate verify` names it.
 */
import type { DevshardTx } from '../../protocol/gen/devshard/v1/diff_pb.js';
import { TimeoutReason } from '../../protocol/gen/devshard/v1/tx_pb.js';
import { STATUS_NAMES, type InferenceRecord } from '../../protocol/index.js';

export type AuditRule =
  | 'nonce-contiguous'
  | 'host-ack'
  | 'diff-decode'
  | 'user-signature'
  | 'state-machine'
  | 'post-state-root'
  | 'session-facts'
  | 'settlement'
  | 'settlement-signature';

export interface AuditFailure {
  escrowId: string;
  /** The diff's nonce (or the settlement's). */
  nonce?: number;
  /** Global position of the event found wrong. */
  position: number;
  rule: AuditRule;
  message: string;
}

/** One tx of a diff as a reader sees it. */
export interface TxLine {
  kind: 'StartInference' | 'ConfirmStart' | 'Finish' | 'Timeout' | 'Validation' | 'ValidationVote' | 'RevealSeed' | 'FinalizeRound' | 'Empty';
  inferenceId?: number;
  /** "in 12 out 20 → cost 32", "refused, 2 votes", … */
  detail: string;
}

/** One recorded diff as a reader sees it (for `replay`'s lines). */
export interface DiffLine {
  escrowId: string;
  position: number;
  nonce: number;
  txs: TxLine[];
  /** The recorded post_state_root, hex. */
  root: string;
  /** The replica's phase after the diff, when it was rebuilt. */
  phase?: string;
  /** The failure this diff was found with. */
  failure?: AuditFailure;
}

/** What one inference went through in the diffs (for `explain`). */
export interface InferenceTrail {
  escrowId: string;
  inferenceId: number;
  /** Each diff that carried a tx about it, in nonce order. */
  steps: { nonce: number; position: number; tx: TxLine }[];
  /** The replica's record after the latest of those diffs (absent once sealed or never rebuilt). */
  record?: { status: string; executorSlot: number; inputTokens: string; outputTokens: string; reservedCost: string; actualCost: string };
  /** The record was sealed (folded into the accumulator) at this nonce. */
  sealedAt?: number;
}

export interface EscrowAudit {
  escrowId: string;
  diffs: number;
  /** Nonce of the last recorded diff (0: none). */
  lastNonce: number;
  /** 'recorded': DevshardSessionOpened in the log; 'missing': a log older than it (roots not recomputed). */
  facts: 'recorded' | 'missing';
  /** The protocol the session was opened with (with the facts). */
  protocol?: { version: string; route: string; tag: string };
  /** The rebuilt replica's state after the last diff it accepted (absent without facts). */
  replica?: { nonce: number; phase: string; balance: string; fees: string; finalizeNonce: number; root: string };
  /** The protocol settlements (EscrowFinalized v2) checked against the replica. */
  settlements: { nonce: number; position: number; signatures: number; valid: number; matches: boolean }[];
  /**
   * What each host did with the diffs, as recorded (DevshardHostAcknowledged, DevshardHostRefused):
   * the last nonce it applied (its receipt's state_hash equal to our root there) and its latest
   * refusal since. Diffs above `applied` were composed by us and not (yet) acknowledged by that host.
   */
  hosts: HostAudit[];
  failures: AuditFailure[];
}

export interface HostAudit {
  host: string;
  /** The last nonce the host acknowledged (0: none recorded). */
  applied: number;
  /** Its latest refusal after that acknowledgement, if any. */
  refused?: { status: number; message: string; rule?: string; position: number };
}


export interface AuditOptions {
  /** Keep each inference's trail (for `explain`); off by default (memory). */
  trails?: boolean;
}

/** Whether a failure only says the facts are missing (a log older than DevshardSessionOpened): a warning, not a broken log. */
export const isMissingFacts = (f: AuditFailure): boolean => f.rule === 'session-facts' && f.position === 0;

export function recordView(rec: InferenceRecord): NonNullable<InferenceTrail['record']> {
  return {
    status: STATUS_NAMES[rec.status],
    executorSlot: rec.executorSlot,
    inputTokens: rec.inputTokens.toString(),
    outputTokens: rec.outputTokens.toString(),
    reservedCost: rec.reservedCost.toString(),
    actualCost: rec.actualCost.toString(),
  };
}

/** One tx as a reader sees it. */
export function describeTx(tx: DevshardTx): TxLine {
  const t = tx.tx;
  switch (t.case) {
    case 'startInference':
      return { kind: 'StartInference', inferenceId: Number(t.value.inferenceId), detail: `model ${t.value.model}, input_length ${t.value.inputLength}, max_tokens ${t.value.maxTokens}` };
    case 'confirmStart':
      return { kind: 'ConfirmStart', inferenceId: Number(t.value.inferenceId), detail: `confirmed_at ${t.value.confirmedAt}` };
    case 'finishInference':
      return { kind: 'Finish', inferenceId: Number(t.value.inferenceId), detail: `slot ${t.value.executorSlot}, tokens in ${t.value.inputTokens} out ${t.value.outputTokens}` };
    case 'timeoutInference':
      return {
        kind: 'Timeout',
        inferenceId: Number(t.value.inferenceId),
        detail: `${t.value.reason === TimeoutReason.REFUSED ? 'refused' : t.value.reason === TimeoutReason.EXECUTION ? 'execution' : 'unspecified'}, ${t.value.votes.filter((v) => v.accept).length}/${t.value.votes.length} votes accept`,
      };
    case 'validation':
      return { kind: 'Validation', inferenceId: Number(t.value.inferenceId), detail: `slot ${t.value.validatorSlot}, ${t.value.valid ? 'valid' : 'invalid'}` };
    case 'validationVote':
      return { kind: 'ValidationVote', inferenceId: Number(t.value.inferenceId), detail: `slot ${t.value.voterSlot}, ${t.value.voteValid ? 'valid' : 'invalid'}` };
    case 'revealSeed':
      return { kind: 'RevealSeed', detail: `slot ${t.value.slotId}` };
    case 'finalizeRound':
      return { kind: 'FinalizeRound', detail: '' };
    default:
      return { kind: 'Empty', detail: '' };
  }
}

/** "StartInference#3, ConfirmStart#1, Finish#1 (slot 1, tokens in 10 out 5 → cost 15)". */
export function formatTxs(txs: readonly TxLine[]): string {
  if (txs.length === 0) return '(empty diff)';
  return txs.map((t) => `${t.kind}${t.inferenceId !== undefined ? `#${t.inferenceId}` : ''}${t.kind === 'Finish' || t.kind === 'Timeout' || t.kind === 'Validation' || t.kind === 'ValidationVote' ? ` (${t.detail})` : ''}`).join(', ');
}

/** `shardgate verify`'s reason for a failure: escrow, nonce, rule and what differs. */
export const failureText = (f: AuditFailure): string => `devshard escrow ${f.escrowId}${f.nonce !== undefined ? `, nonce ${f.nonce}` : ''}: ${f.rule}: ${f.message}`;
