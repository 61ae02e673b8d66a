/** What the devshard protocol transport (protocol-transport.ts) is given and what it answers. */
import type { AgentOptions } from '../../http-agent.js';
import type { Agent } from 'undici';
import type { FinalizedSession, InferencePort, RequestSigner } from '../../port.js';
import type { RecordedDiff } from '../../../protocol/index.js';
import type { DevshardTx } from '../../../protocol/gen/devshard/v1/diff_pb.js';
import type { DevshardSession, SentDiff, SessionEscrow, WarmKeyGrantLookup } from '../session.js';
import type { RouteRefusal } from '../host-refusals.js';
import type { HeightSeedStatus } from '../height-seed.js';
import type { ErrorMissOutcome } from '../error-miss.js';

export interface ProtocolTransportOptions extends AgentOptions {
  /** The escrow's chain facts for its session (creator, amount, slots, session fields). */
  /** The escrow's session facts; may read the chain (once per escrow: the session is kept). */
  escrowOf(escrowId: string): SessionEscrow | undefined | Promise<SessionEscrow | undefined>;
  /** A stream with no event for this long fails with 'stalled'. Default 30 s. */
  stallTimeoutMs?: number;
  /** A non-stream call without its whole answer after this long fails with 'timeout'. Default 300 s. */
  timeoutMs?: number;
  /** How long a call waits for the nonces before its own to be composed. Default 2 s. */
  orderWaitMs?: number;
  /** After the client stopped reading, how long the host's stream is still read for its meta. Default 30 s. */
  drainMs?: number;
  now?: () => number;
  agent?: Agent;
  /** Every diff as it is composed (the log's hook); a promise answered is awaited before the request leaves. */
  onDiff?: (escrowId: string, d: SentDiff) => unknown;
  /** The diffs an earlier run recorded for an escrow (the log), to rebuild its session; none: a new session. */
  recordedDiffs?: (escrowId: string) => readonly RecordedDiff[] | Promise<readonly RecordedDiff[]>;
  /** A session was opened (rebuilt from the log, before its first diff of this run). */
  onSessionOpened?: (escrowId: string, s: DevshardSession) => void | Promise<void>;
  /** Host txs taken from a host's answer, not seen before (the log's hook; not awaited). */
  onHostTxs?: (escrowId: string, hostUrl: string, txs: DevshardTx[]) => void;
  /** The host txs an earlier run took (the log), to make pending again those no recorded diff carried. */
  recordedHostTxs?: (escrowId: string) => readonly DevshardTx[] | Promise<readonly DevshardTx[]>;
  /** Every exchange with a host, when it ends (traffic capture). */
  onExchange?: (x: Exchange) => void;
  /** A host refused an escrow's route or tag (host-refusals.ts): called once per escrow, rule and host. */
  onRouteRefused?: (r: RouteRefusal) => void;
  /** A host answered a session request with a non-200 status (the log's hook; not awaited). */
  onHostRefused?: (escrowId: string, host: string, status: number, message: string, rule?: string) => void;
  /** A host's acknowledged nonce moved (the log's hook; not awaited). */
  onHostAck?: (escrowId: string, host: string, nonce: bigint, stateHash: Uint8Array) => void;
  /** Period of the timeout sweep (sweepTimeouts), ms; 0 = only when called. Default 15 s. */
  timeoutSweepMs?: number;
  /**
   * Whether `cold` granted `warm` its warm-key marker (ChainPort.warmKeyGranted), handed to each
   * session; none: host txs signed by a warm key are never taken.
   */
  warmKeyGranted?: WarmKeyGrantLookup;
  /**
   * v5: chat waits on the session's height seed and is refused while it is missed
   * (DEVSHARD_REQUIRE_HEIGHT_SEED, the reference gateway's gate). Default true.
   */
  requireHeightSeed?: boolean;
  /** v5: how long the seed may stay short of its quorum before it is missed. Default 30 s. */
  heightSeedGateMs?: number;
  /** v5: a host tx the log plane refuses was dropped before compose (a stamp below the floor). */
  onHostTxDropped?: (escrowId: string, kind: string, reason: string) => void;
  /** v5: the height seed's state moved (the log's hook; not awaited). */
  onHeightSeed?: (escrowId: string, s: HeightSeedStatus) => void;
  /** v5: period of the error-miss vote round (sweepErrorMisses), ms; 0 = only when called. Default 5 s. */
  errorMissSweepMs?: number;
  /** v5: how long an error-miss claim waits for its inference to leave Pending. Default 120 s. */
  errorMissWaitMs?: number;
  /** v5: an error-miss claim ended: queued for the next diff, short of votes, or never asked (the owner logs it). */
  onErrorMiss?: (escrowId: string, o: ErrorMissOutcome) => void;
}

export interface Exchange {
  url: string;
  headers: Record<string, string>;
  body: string;
  status: number;
  /** The answer's text as read (SSE). */
  response: string;
  /** When it was sent, ms. */
  at: number;
}

export interface ProtocolTransport extends InferencePort {
  /** The escrow's session, when one was opened (tests, status). */
  session(escrowId: string): DevshardSession | undefined;
  /**
   * Asks the other hosts to vote on every inference of ours past its refusal or execution timeout
   * (POST verify-timeout); with more accepting votes than the session's threshold a
   * MsgTimeoutInference goes into the escrow's next diff, which releases its reservation. Answers
   * how many were queued.
   */
  sweepTimeouts(): Promise<number>;
  /**
   * v5: asks the other hosts `verify-error-miss` for every streamed answer that ended in an error
   * whose executor signed its Finish (error-miss.ts); with enough accepting weight the Finish and a
   * MsgErrorMiss go into the escrow's next diff, which refunds the inference. Answers how many were queued.
   */
  sweepErrorMisses(): Promise<number>;
  /** v5: the inferences of an escrow with an error-miss claim still open (tests, status). */
  errorMissClaims(escrowId: string): bigint[];
  /**
   * Finalizes the escrow's session over the protocol (gonka user/session.go `Finalize`): the
   * MsgFinalizeRound, then diffs until the Settlement phase, each sent to every host; then
   * `GET …/signatures?nonce=N` until every slot signed (or, after `signatureWaitMs`, at least
   * ⌊2n/3⌋+1). Answers the settlement, the slots' signatures (each checked) and the file
   * `inferenced tx inference settle-devshard-escrow` reads.
   */
  finalize(escrowId: string, signer: RequestSigner, o?: { signatureWaitMs?: number }): Promise<FinalizedSession>;
  /** The latest answer of a host that refused the escrow's route or state-root tag, if any. */
  routeRefusal(escrowId: string): RouteRefusal | undefined;
  /** v5: the escrow's height seed, once its session is open. */
  heightSeed(escrowId: string): HeightSeedStatus | undefined;
  /**
   * v5: the nonces an idle span would take now, or undefined when none is due: not a v5 session,
   * not active, no floor yet, or a diff composed within `idleMs`.
   */
  heartbeatDue(escrowId: string, idleMs: number): number | undefined;
  /** v5: composes the span over the reserved nonces `from`..`upTo`, sends it to every host; answers the acks taken. */
  heartbeatSpan(escrowId: string, signer: RequestSigner, from: bigint, upTo: bigint): Promise<{ acks: number }>;
  /** A diff at the reserved `nonce` carrying the pending host txs (the acks after a span), sent to its host. */
  flush(escrowId: string, signer: RequestSigner, nonce: bigint): Promise<void>;
  /** Replaces the traffic listener (ProtocolTransportOptions.onExchange); undefined stops it. */
  setExchangeListener(fn: ((x: Exchange) => void) | undefined): void;
  close(): Promise<void>;
}
