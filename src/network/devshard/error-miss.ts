/**
 * v5 error-miss, the gateway's evidence (zpoken/gonka@86cff503 devshard/cmd/devshardctl/redundancy.go
 * `retainErrorStreamLines`, `ssePayloadDataLines`, `errorMissArtifacts`, `errorMissRejectLabel`;
 * user/session.go `HandleErrorMiss`): a streamed answer that turned into an error is still signed
 * by its executor's Finish, over the stream's stored bytes `{"events":["data: …",…,"data: [DONE]"]}`.
 * The gateway keeps the answer's own `data:` lines (the devshard receipt and meta left out), reads
 * the stream on to its meta for the Finish, and rebuilds those bytes; the other hosts vote on them.
 */
import { create, toBinary } from '@bufbuild/protobuf';
import { isTerminalErrorResponse, streamedPayloadFor } from '../../protocol/error-answer.js';
import { DevshardTxSchema, type DevshardTx } from '../../protocol/gen/devshard/v1/diff_pb.js';
import { ErrorMissVoteSchema, type ErrorMissVote } from '../../protocol/gen/devshard/v1/tx_pb.js';
import { InferenceStatus } from '../../protocol/inference-record.js';
import { Phase } from '../../protocol/index.js';
import { verifyErrorMissJson } from './request-body.js';
import type { DevshardSession } from './session.js';

/** Most bytes of one answer kept as evidence (Z5 `defaultMaxErrorStreamBytes`, 1 MiB per attempt). */
export const MAX_ERROR_STREAM_BYTES = 1 << 20;

/** The `data:` lines of one streamed answer, as the executor stored them, bounded. */
export class AnswerLines {
  readonly lines: string[] = [];
  private bytes = 0;
  /** The bound was hit: what is kept no longer hashes to the Finish. */
  truncated = false;
  /** `data: [DONE]` was kept. */
  complete = false;
  /** An error event came: the answer is a candidate miss. */
  errored = false;

  /** One SSE data payload of the answer (never the receipt or the meta). */
  add(data: string): void {
    if (this.truncated) return;
    const line = `data: ${data}`;
    const n = Buffer.byteLength(line, 'utf8') + 1;
    if (this.bytes + n > MAX_ERROR_STREAM_BYTES) {
      this.truncated = true;
      return;
    }
    this.lines.push(line);
    this.bytes += n;
    if (data === '[DONE]') this.complete = true;
  }
}

/** What the other hosts are asked to vote on: the executor's signed Finish and the bytes it covers. */
export interface ErrorMissClaim {
  inferenceId: bigint;
  executorUrl: string;
  /** The Finish as DevshardTx bytes (`finish_tx`). */
  finishTx: Uint8Array;
  responseHash: Uint8Array;
  /** The stored answer (`response_payload`): sha256 of it is responseHash. */
  payload: Uint8Array;
  /** When the claim was made (ms): a claim not voted on in time lets its Finish go. */
  since: number;
}

/**
 * The claim an errored answer makes, or why it makes none (Z5: no Finish, no miss; a payload that
 * is not the signed one is `truncated`, `cancelled` (no [DONE]) or `drift`; one the hosts' rule
 * does not read as an error is never offered).
 */
export function claimOf(
  answer: AnswerLines,
  finish: DevshardTx | undefined,
  o: { inferenceId: bigint; executorUrl: string; now: number },
): { claim: ErrorMissClaim } | { reason: string } {
  if (!finish || finish.tx.case !== 'finishInference') return { reason: 'no Finish from the executor' };
  if (answer.truncated) return { reason: 'truncated: the answer exceeded the evidence bound' };
  if (!answer.complete) return { reason: 'cancelled: the stream ended before [DONE]' };
  const responseHash = finish.tx.value.responseHash;
  const payload = streamedPayloadFor(answer.lines, responseHash);
  if (!payload) return { reason: 'drift: the answer as read does not hash to the Finish' };
  if (!isTerminalErrorResponse(payload)) return { reason: 'not a terminal error under the hosts\' rule' };
  return { claim: { inferenceId: o.inferenceId, executorUrl: o.executorUrl, finishTx: toBinary(DevshardTxSchema, finish), responseHash, payload, since: o.now } };
}

/** How a claim ended (the log line the transport's owner writes). */
export interface ErrorMissOutcome {
  inferenceId: bigint;
  /** queued: the Finish and MsgErrorMiss go into the next diff; votes_short: nothing is sent; dropped: no vote was asked. */
  outcome: 'queued' | 'votes_short' | 'dropped';
  /** Accepting weight (slots of the accepting addresses) and the threshold it must exceed. */
  weight?: number;
  threshold?: number;
  /** The hosts' reject causes (`no_finish_tx`, `hash_mismatch`, …) and failures. */
  rejects?: string[];
  reason?: string;
}

/** A signed POST of a session route to one host: its status and body, or a throw when unreachable. */
export type PostSessionRoute = (s: DevshardSession, url: string, route: string, body: Uint8Array) => Promise<{ status: number; text: string }>;

/**
 * The open claims of every session, and the vote round over them (Z5 user/session.go
 * `HandleErrorMiss`, `CollectErrorMissVotes`, `HasSufficientErrorMissVotes`): every host but the
 * executor is asked `verify-error-miss` with its catch-up diffs; accepting weight above the
 * session's vote threshold puts the held Finish and the MsgErrorMiss into the next diff; short,
 * the Finish is let go alone and nothing else is sent. A claim waits while its record is Pending
 * (the hosts reject a Pending one: its ConfirmStart rides the next diff), at most `waitMs`.
 */
export class ErrorMissClaims {
  private readonly byEscrow = new Map<string, Map<bigint, ErrorMissClaim>>();

  constructor(
    private readonly o: {
      post: PostSessionRoute;
      now: () => number;
      /** How long a claim may wait for its record to leave Pending. */
      waitMs: number;
      report?: (escrowId: string, outcome: ErrorMissOutcome) => void;
    },
  ) {}

  add(escrowId: string, claim: ErrorMissClaim): void {
    let m = this.byEscrow.get(escrowId);
    if (!m) this.byEscrow.set(escrowId, (m = new Map()));
    m.set(claim.inferenceId, claim);
  }

  /** The inferences of `escrowId` with a claim still open. */
  open(escrowId: string): bigint[] {
    return [...(this.byEscrow.get(escrowId)?.keys() ?? [])];
  }

  /** No claim for `inferenceId` (its answer gave none): the Finish is let go. */
  dropped(escrowId: string, s: DevshardSession, inferenceId: bigint, reason: string): void {
    s.unpinFinish(inferenceId);
    this.o.report?.(escrowId, { inferenceId, outcome: 'dropped', reason });
  }

  /** One round over every open claim whose record is ready; answers how many were queued. */
  async sweep(sessionOf: (escrowId: string) => DevshardSession | undefined): Promise<number> {
    let queued = 0;
    for (const [escrowId, claims] of this.byEscrow) {
      const s = sessionOf(escrowId);
      if (!s) continue;
      for (const claim of [...claims.values()]) {
        const id = claim.inferenceId;
        const rec = s.replica.inference(id);
        const end = (o: Omit<ErrorMissOutcome, 'inferenceId'>): void => {
          claims.delete(id);
          s.unpinFinish(id);
          this.o.report?.(escrowId, { inferenceId: id, ...o });
        };
        if (s.replica.phase !== Phase.Active) {
          end({ outcome: 'dropped', reason: 'the session is finalizing' });
          continue;
        }
        if (rec?.status === InferenceStatus.Pending) {
          if (this.o.now() - claim.since >= this.o.waitMs) end({ outcome: 'dropped', reason: `the inference was still pending after ${this.o.waitMs} ms` });
          continue;
        }
        if (!rec || (rec.status !== InferenceStatus.Started && rec.status !== InferenceStatus.Finished)) {
          end({ outcome: 'dropped', reason: `the inference is ${rec ? InferenceStatus[rec.status] : 'gone'}` });
          continue;
        }
        const voters = s.hosts().filter((u) => u !== claim.executorUrl);
        const answers = await Promise.all(voters.map((u) => this.ask(s, u, claim)));
        const votes = answers.flatMap((a) => ('vote' in a && s.errorMissVoteValid(id, claim.responseHash, a.vote) ? [a.vote] : []));
        const rejects = answers.flatMap((a) => ('reject' in a ? [a.reject] : 'vote' in a && !votes.includes(a.vote) ? ['invalid vote signature'] : []));
        const weight = s.voteWeight(votes);
        const threshold = s.replica.config.voteThreshold;
        // The Finish must still be ours to send (pending), or already applied with the same hash.
        const sendable = rec.status === InferenceStatus.Finished || s.pendingFinish(id) !== undefined;
        if (!s.enoughVotes(weight) || !sendable || s.replica.phase !== Phase.Active) {
          end({ outcome: 'votes_short', weight, threshold, rejects, ...(sendable ? {} : { reason: 'the Finish is no longer pending' }) });
          continue;
        }
        claims.delete(id);
        s.addErrorMiss(id, votes);
        queued++;
        this.o.report?.(escrowId, { inferenceId: id, outcome: 'queued', weight, threshold, rejects });
      }
      if (claims.size === 0) this.byEscrow.delete(escrowId);
    }
    return queued;
  }

  /** One host's answer: an accepting vote, or why not. */
  private async ask(s: DevshardSession, url: string, claim: ErrorMissClaim): Promise<{ vote: ErrorMissVote } | { reject: string }> {
    const body = new TextEncoder().encode(verifyErrorMissJson(s.catchUp(url), claim.inferenceId, claim.finishTx, claim.payload));
    try {
      const r = await this.o.post(s, url, 'verify-error-miss', body);
      if (r.status !== 200) return { reject: `${url} answered ${r.status}` };
      const v = JSON.parse(r.text) as { accept?: unknown; signature?: unknown; voter_slot?: unknown; reject_cause?: unknown };
      if (v.accept !== true) return { reject: typeof v.reject_cause === 'string' ? v.reject_cause : 'rejected' };
      if (typeof v.signature !== 'string' || typeof v.voter_slot !== 'number') return { reject: `${url}: an accept without a signature` };
      return { vote: create(ErrorMissVoteSchema, { voterSlot: v.voter_slot, accept: true, signature: new Uint8Array(Buffer.from(v.signature, 'base64')) }) };
    } catch (err) {
      return { reject: `${url}: ${err instanceof Error ? err.message : String(err)}` };
    }
  }
}
