/**
 * The inference port: how the gateway sends one chat request to the network and gets the answer
 * back, whole or streamed. Implementations: the devshard host protocol (src/network/devshard/
 * protocol-transport.ts) and an OpenAI-compatible upstream (NETWORK_UPSTREAM_URL).
 */
import type { Settlement } from '../protocol/settlement.js';
import type { CancelController, CancelSignal } from './call-signal.js';

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** A chat completion chunk exactly as OpenAI streams it (`object: 'chat.completion.chunk'`). */
export interface ChatChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: {
    index: number;
    delta: Record<string, unknown>;
    finish_reason: string | null;
  }[];
  usage?: Usage | null;
}

/** A non-streamed chat completion (`object: 'chat.completion'`). */
export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: { index: number; message: Record<string, unknown>; finish_reason: string }[];
  usage: Usage;
}

/** Signs for the escrow creator (the key never leaves the signer). */
export interface RequestSigner {
  /**
   * The devshard protocol's signature (diffs, the request header): sha256(message) signed as
   * go-ethereum does, 65 bytes R‖S‖V.
   */
  signProtocol(message: Uint8Array): Uint8Array;
}

export interface ChatCall {
  escrowId: string;
  nonce: number;
  /**
   * Base URL of the executing host (slot[nonce % slots].url, or its participant's current
   * inference_url when it moved); the devshard transport moves the session's slots of that host
   * there when it differs. '' = the session's own. Ignored by the upstream mode.
   */
  hostUrl: string;
  /** The normalized OpenAI request body (model, messages, max_tokens set, stream flag). */
  body: Record<string, unknown>;
  signer: RequestSigner;
  /** Aborted when the caller gives up (an AbortSignal or a CallSignal). */
  signal: CancelSignal;
  /**
   * The controller of `signal`, when the caller owns it: the transport then aborts it itself on a
   * timeout instead of making a second controller and listener per request.
   */
  controller?: CancelController;
}

/**
 * The escrow cannot take a request yet, before any nonce is used (v5: its height seed is incomplete).
 * `rule` names why (`height_seed_incomplete`).
 */
export class NotAdmitted extends Error {
  override name = 'NotAdmitted';
  constructor(
    readonly rule: string,
    message: string,
  ) {
    super(message);
  }
}

/** The request was not sent because what must be durable before it leaves (its diffs) could not be recorded. */
export class NotRecorded extends Error {
  override name = 'NotRecorded';
}

/** Why a host call failed; the gateway maps it to an HTTP status and records it. */
export class HostError extends Error {
  constructor(
    readonly kind: 'unreachable' | 'timeout' | 'stalled' | 'truncated' | 'rejected' | 'bad_response' | 'aborted',
    message: string,
    /** HTTP status the host answered, when it did. */
    readonly status?: number,
    /** Usage delivered before the failure (a stream cut short still bills what it delivered). */
    readonly usageSoFar?: Usage,
  ) {
    super(message);
    this.name = 'HostError';
  }
}

export type ChatResult =
  | {
      kind: 'completion';
      completion: ChatCompletion;
      /**
       * The answer's exact JSON text when `completion` is that text parsed and unchanged (the server
       * reported usage): a caller that needs no other change can pass it on without serializing.
       */
      text?: string;
    }
  | {
      kind: 'stream';
      /** Chunks as they arrive; throws HostError on stall / truncation. */
      chunks: AsyncIterable<ChatChunk>;
      /** Usage reported by the host (final usage chunk) or counted so far; valid once `chunks` ends or throws. */
      usage(): Usage;
    };

/** A session finalized over the devshard protocol (the protocol transport's `finalize`). */
export interface FinalizedSession {
  settlement: Settlement;
  signatures: { slotId: number; signature: Uint8Array }[];
  /** The settlement file's JSON text (what `inferenced tx inference settle-devshard-escrow` reads). */
  file: string;
  /** Hosts that did not take a finalize diff (they may still have signed). */
  failures: string[];
}

export interface InferencePort {
  chat(call: ChatCall): Promise<ChatResult>;
  /**
   * Finalizes the escrow's session over the devshard protocol: the rounds, then the hosts'
   * signatures of the settlement. Only the protocol transport has it; in upstream mode there are
   * no hosts, and an escrow cannot be finalized.
   */
  finalize?(escrowId: string, signer: RequestSigner, o?: { signatureWaitMs?: number }): Promise<FinalizedSession>;
  /** The latest host answer refusing the escrow's route or state-root tag (the protocol transport only). */
  routeRefusal?(escrowId: string): { rule: string; host: string; status: number; message: string; at: number } | undefined;
  /** Per host of an open session, the last nonce it acknowledged (the protocol transport only). */
  acknowledged?(escrowId: string): { host: string; nonce: number }[] | undefined;
  /**
   * Before a nonce is taken: resolves when the escrow's session can take a request, or throws
   * NotAdmitted (v5: the height seed gate). Opens the session. The protocol transport only.
   */
  admit?(escrowId: string, signer: RequestSigner): Promise<void>;
  /** v5 idle heartbeats (the protocol transport only; ProtocolTransport documents them). */
  heartbeatDue?(escrowId: string, idleMs: number): number | undefined;
  heartbeatSpan?(escrowId: string, signer: RequestSigner, from: bigint, upTo: bigint): Promise<{ acks: number }>;
  flush?(escrowId: string, signer: RequestSigner, nonce: bigint): Promise<void>;
  /**
   * The escrow moved to another instance sharing the log: what memory keeps of its session is
   * dropped, so that taking it back later rebuilds it from the log (the protocol transport only).
   */
  forgetEscrow?(escrowId: string): void;
  /** v5: the escrow's height seed (state, seeded/slots, per-host verdicts), once its session is open. */
  heightSeed?(escrowId: string): { state: string; seeded: number; slots: number; outcomes: { host: string; verdict: string; reason: string }[] } | undefined;
}
