/**
 * The InferencePort over the real devshard host protocol (opt-in: DEVSHARD_HOST_PROTOCOL=devshard).
 * Per call: the escrow's DevshardSession (session.ts) composes, applies and signs the nonce's diff
 * with its MsgStartInference; the request `InferenceRequest{diffs: catch-up + new, nonce, payload}`
 * goes to the executor slots[nonce % n] at `{inference_url}{route}/sessions/{escrow_id}/chat/completions`
 * (the escrow's route: `/devshard/<version>`, or `/v1/devshard` for a v2 escrow; src/protocol/versions.ts)
 * with `X-Devshard-Signature` (hex, 65 bytes over sha256(sha256(escrow_id‖body‖ts_be8))) and
 * `X-Devshard-Timestamp`; the SSE answer is read (host-events.ts): the receipt's state_hash must
 * equal our root (else a host error, `bad_response`), the model's output goes to the client without
 * the host's own fields (client-output.ts), the meta mempool feeds later diffs.
 * Sources: gonka 8a35022 devshard/user/session.go, httpsession.go, transport/client.go,
 * cmd/devshardctl/proxy.go.
 *
 * A call's `hostUrl` (the participant's current inference_url, gateway/chat/host-urls.ts) that differs
 * from the session's for its slot moves that host's slots there (DevshardSession.moveHost).
 *
 * Calls of one escrow are composed in nonce order: a call whose nonce is ahead waits (bounded) for
 * the nonces before it; a nonce that never reaches the transport is then filled with an empty diff.
 * The client leaving does not close the host's stream: it is read on (bounded) so the meta event's
 * Finish reaches a later diff, as devshardctl does.
 */
import type { Agent, Dispatcher } from 'undici';
import { createHttpAgent, type AgentOptions } from '../http-agent.js';
import { HostError, NotAdmitted, NotRecorded, type FinalizedSession, type ChatCall, type ChatChunk, type ChatCompletion, type ChatResult, type InferencePort, type RequestSigner, type Usage } from '../port.js';
import { SseParser, type SseEvent } from '../sse.js';
import { countCompletionTokens, countPromptTokens } from '../tokens.js';
import { chunksForClient, clientAsk, completionForClient } from './client-output.js';
import { HostEventError, readHostEvent, type HostReceipt } from './host-events.js';
import { sessionUrl, verifyTimeoutJson } from './request-body.js';
import { buildSettlement, Phase, rulesOf, settlementFileJson, settlementSignatureValid, type RecordedDiff } from '../../protocol/index.js';
import type { DevshardTx } from '../../protocol/gen/devshard/v1/diff_pb.js';
import { DevshardSession, ReceiptMismatch, type SentDiff, type SessionEscrow, type WarmKeyGrantLookup } from './session.js';
import { routeRefusalOf, type RouteRefusal } from './host-refusals.js';
import { applyTokenFloor, cutCompletion, StreamCut } from './token-floor.js';
import { HeightSeed, HeightSeedIncomplete, type HeightSeedStatus, type SeedOutcome } from './height-seed.js';
import { AnswerLines, claimOf, ErrorMissClaims, type ErrorMissOutcome } from './error-miss.js';

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

export type { FinalizedSession } from '../port.js';

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

const MAX_ERROR_BODY = 64 * 1024;

/** Most diffs one catch-up request carries (gonka user/session.go catchUpChunkSize). */
export const CATCH_UP_CHUNK = 200;
/** One seed request's bound (Z5 transport DefaultHeightSeedTimeout is of this order). */
const HEIGHT_SEED_ATTEMPT_MS = 5_000;

class Stalled extends Error {}

/** Reads SSE data payloads one by one, each within a time limit; the body is destroyed on close. */
class EventPump {
  private readonly it: AsyncIterator<unknown>;
  private readonly parser = new SseParser();
  private queue: SseEvent[] = [];
  private qi = 0;
  private ended = false;
  /** The stream's text as read (capture only). */
  text = '';

  constructor(
    private readonly body: Dispatcher.ResponseData['body'],
    private readonly keepText: boolean,
  ) {
    this.it = body[Symbol.asyncIterator]();
  }

  /** The next data payload, undefined at the end of the stream; throws Stalled after `timeoutMs` of silence. */
  async next(timeoutMs: number): Promise<string | undefined> {
    for (;;) {
      if (this.qi < this.queue.length) return this.queue[this.qi++]!.data;
      this.queue = [];
      this.qi = 0;
      if (this.ended) return undefined;
      let timer: NodeJS.Timeout | undefined;
      const r = await Promise.race([
        this.it.next(),
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Stalled()), Math.max(1, timeoutMs)))),
      ]).finally(() => clearTimeout(timer));
      if (r.done) {
        this.ended = true;
        this.parser.end(this.queue);
        continue;
      }
      const chunk = r.value as Buffer;
      if (this.keepText) this.text += chunk.toString('utf8');
      this.parser.push(chunk, this.queue);
    }
  }

  closed = false;

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.body.destroy();
  }
}

function messageOf(text: string): string {
  try {
    const p = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    if (typeof p.error === 'string') return p.error;
    if (p.error && typeof p.error.message === 'string') return p.error.message;
    if (typeof p.message === 'string') return p.message;
  } catch {
    /* not JSON */
  }
  return text.trim() || '(empty body)';
}

function isUsage(u: unknown): u is Usage {
  const x = u as Usage | null | undefined;
  return !!x && Number.isInteger(x.prompt_tokens) && Number.isInteger(x.completion_tokens) && Number.isInteger(x.total_tokens);
}

interface Turns {
  waiters: { nonce: bigint; resolve: () => void }[];
}

export function createProtocolTransport(opts: ProtocolTransportOptions): ProtocolTransport {
  const agent = opts.agent ?? createHttpAgent(opts);
  const ownsAgent = !opts.agent;
  const stallTimeoutMs = opts.stallTimeoutMs ?? 30_000;
  const timeoutMs = opts.timeoutMs ?? 300_000;
  const orderWaitMs = opts.orderWaitMs ?? 2_000;
  const drainMs = opts.drainMs ?? 30_000;
  const now = opts.now ?? Date.now;
  const sessions = new Map<string, DevshardSession>();
  const turns = new Map<string, Turns>();
  const drains = new Set<Promise<void>>();
  let onExchange = opts.onExchange;

  const opening = new Map<string, Promise<DevshardSession>>();
  /** Escrow → when its session last composed a diff (ms). */
  const lastDiffAt = new Map<string, number>();
  /** v5 sessions' height seeds, by escrow. */
  const seeds = new Map<string, HeightSeed>();
  /** Escrow → the latest answer that says its protocol, not a request, is wrong (host-refusals.ts). */
  const routeRefusals = new Map<string, RouteRefusal>();

  /** A host's non-200 answer as the error the call fails with; a protocol refusal is kept and reported. */
  function refused(s: DevshardSession, url: string, status: number, text: string, label: string): HostError {
    const r = routeRefusalOf({ escrowId: s.escrow.escrowId, host: url, status, text, protocol: s.protocol, firstDiff: s.ackedNonce(url) === 0n, at: now() });
    opts.onHostRefused?.(s.escrow.escrowId, url, status, messageOf(text), r?.rule);
    if (!r) return new HostError('rejected', `${label} answered ${status}: ${messageOf(text)}`, status);
    const before = routeRefusals.get(r.escrowId);
    routeRefusals.set(r.escrowId, r);
    if (!before || before.rule !== r.rule || before.host !== r.host) opts.onRouteRefused?.(r);
    return new HostError('rejected', r.message, status);
  }
  /** Chunked catch-ups under way, by escrow and host (one at a time per host). */
  const catchingUp = new Map<string, Promise<void>>();

  /** The escrow's session, opened once even when several calls ask for it at the same time. */
  async function sessionFor(call: Pick<ChatCall, 'escrowId' | 'signer'>): Promise<DevshardSession> {
    const s = sessions.get(call.escrowId);
    if (s) return s;
    let p = opening.get(call.escrowId);
    if (!p) {
      p = openSession(call).finally(() => opening.delete(call.escrowId));
      opening.set(call.escrowId, p);
    }
    return p;
  }

  async function openSession(call: Pick<ChatCall, 'escrowId' | 'signer'>): Promise<DevshardSession> {
    const escrow = await opts.escrowOf(call.escrowId);
    if (!escrow) throw new HostError('rejected', `escrow ${call.escrowId} is unknown to the devshard protocol transport`);
    const signer = call.signer;
    if (!signer.signProtocol) throw new HostError('rejected', `the signer of escrow ${call.escrowId} cannot make devshard protocol signatures`);
    // What an earlier run recorded (the log: a read that may go to a database server).
    const [diffs, hostTxs] = await Promise.all([opts.recordedDiffs?.(call.escrowId) ?? [], opts.recordedHostTxs?.(call.escrowId) ?? []]);
    const s = new DevshardSession(escrow, (m) => signer.signProtocol!(m), diffs, hostTxs);
    s.warmKeyGranted = opts.warmKeyGranted;
    s.now = now;
    if (opts.onHostTxDropped) {
      const dropped = opts.onHostTxDropped;
      s.onDropped = (tx, reason) => dropped(call.escrowId, tx.tx.case ?? 'unknown', reason);
    }
    // When the escrow last composed a diff: v5's idle heartbeats are due after a quiet period.
    const onDiff = opts.onDiff;
    lastDiffAt.set(call.escrowId, now());
    s.onDiff = (d) => {
      lastDiffAt.set(call.escrowId, now());
      return onDiff?.(call.escrowId, d);
    };
    if (opts.onHostTxs) {
      const onHostTxs = opts.onHostTxs;
      s.onHostTxs = (url, txs) => onHostTxs(call.escrowId, url, txs);
    }
    if (opts.onHostAck) {
      const onHostAck = opts.onHostAck;
      s.onAck = (url, nonce, stateHash) => onHostAck(call.escrowId, url, nonce, stateHash);
    }
    if (rulesOf(s.protocol) === 'v5') {
      const seed = new HeightSeed(s.hosts(), (url) => seedHost(s, url), {
        required: opts.requireHeightSeed ?? true,
        ...(opts.heightSeedGateMs !== undefined ? { gateMs: opts.heightSeedGateMs } : {}),
        ...(opts.onHeightSeed ? { onChange: (st: HeightSeedStatus) => opts.onHeightSeed!(call.escrowId, st) } : {}),
      });
      // A session rebuilt past its first stamps has a floor: nothing to seed (Z5 runHeightSeedUntil).
      if (s.replica.floor().height > 0n) seed.skip();
      else seed.start();
      seeds.set(call.escrowId, seed);
    }
    // Awaited before the session is handed out: nothing is sent for the escrow before it is done.
    await opts.onSessionOpened?.(call.escrowId, s);
    sessions.set(call.escrowId, s);
    return s;
  }

  /**
   * One seed request (Z5 transport/client_heightsync.go SeedHeightSync): `POST …/height-sync` with
   * `{}`, signed as any session request. An Anchor (height > 0, a block hash) is a seed; a 200
   * without one is to be asked again; 404/501 is the host declining (user/heightsync_seed.go
   * classifySeedVerdict).
   */
  async function seedHost(s: DevshardSession, url: string): Promise<SeedOutcome> {
    let status: number;
    let text: string;
    try {
      ({ status, text } = await postSessionRoute(s, url, 'height-sync', Buffer.from('{}'), { timeoutMs: HEIGHT_SEED_ATTEMPT_MS }));
    } catch (err) {
      return { verdict: 'retry_later', reason: (err as Error)?.message ?? String(err) };
    }
    if (status === 404 || status === 501) return { verdict: 'declined', reason: `${status} ${messageOf(text)}` };
    if (status !== 200) return { verdict: 'retry_later', reason: `${status} ${messageOf(text)}` };
    let hs: { mainnet_height?: unknown; mainnet_block_hash_hex?: unknown } | undefined;
    try {
      hs = (JSON.parse(text) as { height_sync?: typeof hs }).height_sync;
    } catch {
      return { verdict: 'retry_later', reason: 'the answer is not JSON' };
    }
    const anchor = hs && typeof hs.mainnet_height === 'number' && hs.mainnet_height > 0 && typeof hs.mainnet_block_hash_hex === 'string' && hs.mainnet_block_hash_hex.trim() !== '';
    return anchor ? { verdict: 'anchored', reason: 'ok' } : { verdict: 'retry_later', reason: 'omit' };
  }

  /**
   * Brings host `url` to our latest nonce: a catch-up longer than CATCH_UP_CHUNK diffs goes first in
   * chunks of that many (as devshardctl's sendCatchUpWith), each answer read whole, its receipt
   * checked (which moves the host's acknowledged nonce), its meta taken.
   */
  async function syncHost(s: DevshardSession, url: string): Promise<void> {
    await catchUpInChunks(s, url);
    await syncOnce(s, url, Infinity);
  }

  /** Sends host `url` its catch-up in chunks until at most CATCH_UP_CHUNK diffs are left for it. */
  async function catchUpInChunks(s: DevshardSession, url: string): Promise<void> {
    for (let left = s.catchUpCount(url); left > CATCH_UP_CHUNK; ) {
      await syncOnce(s, url, CATCH_UP_CHUNK);
      const now = s.catchUpCount(url);
      if (now >= left) throw new HostError('bad_response', `host ${url} did not acknowledge a catch-up chunk (${now} diffs still unacknowledged)`);
      left = now;
    }
  }

  async function syncOnce(s: DevshardSession, url: string, maxDiffs: number): Promise<void> {
    const { body, upTo } = s.syncBody(url, maxDiffs);
    let status: number;
    let text: string;
    try {
      ({ status, text } = await postSessionRoute(s, url, 'chat/completions', body, { stream: true }));
    } catch (err) {
      throw new HostError('unreachable', `host ${url} unreachable: ${(err as Error)?.message ?? String(err)}`);
    }
    if (status !== 200) throw refused(s, url, status, text, `host ${url}`);
    const events: SseEvent[] = [];
    const parser = new SseParser();
    parser.push(Buffer.from(text, 'utf8'), events);
    parser.end(events);
    for (const e of events) {
      const ev = readHostEvent(e.data);
      if (ev.kind === 'receipt') receiptOf(s, url, ev.receipt, upTo);
      else if (ev.kind === 'meta') s.onMempool(ev.mempool, url);
    }
  }

  async function finalize(escrowId: string, signer: RequestSigner, o: { signatureWaitMs?: number } = {}): Promise<FinalizedSession> {
    const s = await sessionFor({ escrowId, signer });
    const failures: string[] = [];
    for (let step = s.nextFinalizeDiff(); step; step = s.nextFinalizeDiff()) {
      await Promise.all(step.recorded);
      for (const url of s.hosts()) {
        try {
          await syncHost(s, url);
        } catch (err) {
          failures.push(`nonce ${step.diff.nonce}: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
    }
    // Finalize diffs composed before a restart (a crash between recording and sending them) need no
    // new step, but a host may never have received them: without them it has nothing to sign.
    for (const url of s.hosts()) {
      if (s.catchUpCount(url) === 0) continue;
      try {
        await syncHost(s, url);
      } catch (err) {
        failures.push(`nonce ${s.latestNonce}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    const settlement = buildSettlement(s.replica, s.latestNonce);
    const slots = s.escrow.slots;
    const quorum = Math.floor((2 * slots.length) / 3) + 1;
    const signed = new Map<number, Uint8Array>();
    /** Per host, why its last answer gave no valid signature (named if the wait ends short). */
    const answers = new Map<string, string>();
    const deadline = now() + (o.signatureWaitMs ?? 10_000);
    for (;;) {
      for (const url of s.hosts()) {
        try {
          const target = new URL(`${sessionUrl(url, escrowId, 'signatures', s.protocol.route)}?nonce=${settlement.nonce}`);
          const res = await agent.request({ origin: target.origin, path: target.pathname + target.search, method: 'GET', signal: AbortSignal.timeout(stallTimeoutMs) });
          const text = await res.body.text();
          if (res.statusCode !== 200) {
            answers.set(url, `${url} answered ${res.statusCode}: ${messageOf(text)}`);
            continue;
          }
          const got = (JSON.parse(text) as { signatures?: Record<string, string> }).signatures ?? {};
          if (Object.keys(got).length === 0) answers.set(url, `${url} had no signature yet`);
          for (const [slotText, b64] of Object.entries(got)) {
            const slot = Number(slotText);
            if (!Number.isInteger(slot) || slot < 0 || slot >= slots.length || signed.has(slot)) continue;
            const sig = new Uint8Array(Buffer.from(b64, 'base64'));
            if (settlementSignatureValid(settlement, slots[slot]!.host, sig)) signed.set(slot, sig);
            else answers.set(url, `${url}: slot ${slot}'s signature is not over this settlement`);
          }
        } catch (err) {
          answers.set(url, `${url}: ${err instanceof Error ? err.message : String(err)}`); // asked again on the next round
        }
      }
      if (signed.size === slots.length || (signed.size >= quorum && now() >= deadline)) break;
      if (now() >= deadline) {
        // Why hosts did not reach the settlement nonce, when a sync failed: the first few failures.
        const reasons = [...failures, ...answers.values()];
        const why = reasons.length > 0 ? `; ${reasons.slice(0, 4).join('; ')}${reasons.length > 4 ? ` (and ${reasons.length - 4} more)` : ''}` : '';
        throw new HostError('rejected', `settlement of escrow ${escrowId} at nonce ${settlement.nonce}: ${signed.size} of ${slots.length} slots signed, ${quorum} needed${why}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    const signatures = [...signed].map(([slotId, signature]) => ({ slotId, signature })).sort((a, b) => a.slotId - b.slotId);
    return { settlement, signatures, file: settlementFileJson(settlement, signatures), failures };
  }

  /** Waits (bounded) until `nonce` is the session's next one. */
  async function turn(escrowId: string, s: DevshardSession, nonce: bigint): Promise<void> {
    if (nonce <= s.latestNonce + 1n) return;
    let t = turns.get(escrowId);
    if (!t) turns.set(escrowId, (t = { waiters: [] }));
    const turns_ = t;
    await new Promise<void>((resolve) => {
      const w = { nonce, resolve };
      const timer = setTimeout(() => {
        turns_.waiters = turns_.waiters.filter((x) => x !== w);
        resolve();
      }, orderWaitMs);
      w.resolve = () => {
        clearTimeout(timer);
        resolve();
      };
      turns_.waiters.push(w);
    });
  }

  function wake(escrowId: string, s: DevshardSession): void {
    const t = turns.get(escrowId);
    if (!t) return;
    const next = s.latestNonce + 1n;
    const ready = t.waiters.filter((w) => w.nonce <= next);
    if (ready.length === 0) return;
    t.waiters = t.waiters.filter((w) => w.nonce > next);
    if (t.waiters.length === 0) turns.delete(escrowId);
    for (const w of ready) w.resolve();
  }

  /**
   * The receipt of the request for `nonce`. Its `nonce` is the host's latest after applying the
   * request's diffs: past ours when a later request to the same host (carrying our diff as catch-up)
   * got there first, which concurrent calls on one escrow do. Never below ours.
   */
  function receiptOf(s: DevshardSession, url: string, r: HostReceipt, nonce: bigint): void {
    if (r.nonce < nonce) throw new HostError('bad_response', `host ${url} sent a receipt for nonce ${r.nonce}, the request was nonce ${nonce}`);
    try {
      s.onReceipt(url, r, nonce);
    } catch (err) {
      if (err instanceof ReceiptMismatch) throw new HostError('bad_response', err.message);
      throw err;
    }
  }

  /** Reads the rest of a host stream for its meta (bounded); never throws. */
  function drain(s: DevshardSession, url: string, pump: EventPump, deadline: number, done: () => void, answer?: AnswerLines, ended?: () => void): Promise<void> {
    const p = (async () => {
      try {
        for (;;) {
          const left = deadline - now();
          if (left <= 0) break;
          const data = await pump.next(left);
          if (data === undefined) break;
          const ev = readHostEvent(data);
          if (ev.kind === 'meta') s.onMempool(ev.mempool, url);
          else answer?.add(data);
        }
      } catch {
        /* best effort: the Finish stays in the host's mempool for a later answer */
      } finally {
        pump.close();
        done();
        ended?.();
      }
    })();
    drains.add(p);
    void p.finally(() => drains.delete(p));
    return p;
  }

  /** One host's vote on a timeout, or undefined (refused, unreachable, rejected). */
  async function vote(s: DevshardSession, url: string, nonce: bigint, reason: 'refused' | 'execution', payload: Parameters<typeof verifyTimeoutJson>[3]) {
    const body = Buffer.from(verifyTimeoutJson(s.catchUp(url), nonce, reason, reason === 'refused' ? payload : undefined), 'utf8');
    try {
      const { status, text } = await postSessionRoute(s, url, 'verify-timeout', body);
      if (status !== 200) return undefined;
      const v = JSON.parse(text) as { accept?: unknown; signature?: unknown; voter_slot?: unknown };
      if (v.accept !== true || typeof v.signature !== 'string' || typeof v.voter_slot !== 'number') return undefined;
      return { voterSlot: v.voter_slot, signature: new Uint8Array(Buffer.from(v.signature, 'base64')) };
    } catch {
      return undefined;
    }
  }

  let sweeping: Promise<number> | undefined;
  async function sweep(): Promise<number> {
    let queued = 0;
    const nowS = BigInt(Math.floor(now() / 1000));
    for (const s of sessions.values()) {
      for (const c of s.timeoutCandidates(nowS)) {
        const voters = s.hosts().filter((u) => u !== c.executorUrl);
        const votes = (await Promise.all(voters.map((u) => vote(s, u, c.nonce, c.reason, c.payload)))).filter((v) => v !== undefined);
        if (s.enoughVotes(votes.length)) {
          s.addTimeout(c.nonce, c.reason, votes);
          queued++;
        }
      }
    }
    return queued;
  }
  const sweepTimeouts = (): Promise<number> => (sweeping ??= sweep().finally(() => (sweeping = undefined)));
  const sweepMs = opts.timeoutSweepMs ?? 15_000;
  const sweepTimer = sweepMs > 0 ? setInterval(() => void sweepTimeouts().catch(() => undefined), sweepMs) : undefined;
  sweepTimer?.unref();

  /**
   * A signed POST of a session route, answered whole (catch-up syncs, seeds, timeout and error-miss
   * votes); the exchange is reported once answered. Rejects when the host cannot be reached.
   */
  async function postSessionRoute(s: DevshardSession, url: string, route: string, bytes: Uint8Array, o: { timeoutMs?: number; stream?: boolean } = {}): Promise<{ status: number; text: string }> {
    const body = Buffer.from(bytes);
    const ts = BigInt(Math.floor(now() / 1000));
    const target = new URL(sessionUrl(url, s.escrow.escrowId, route, s.protocol.route));
    const headers: Record<string, string> = { 'content-type': 'application/json', ...(o.stream ? { accept: 'text/event-stream' } : {}), 'x-devshard-signature': s.headerSignature(body, ts), 'x-devshard-timestamp': String(ts) };
    const res = await agent.request({ origin: target.origin, path: target.pathname, method: 'POST', headers, body, signal: AbortSignal.timeout(o.timeoutMs ?? stallTimeoutMs) });
    const text = await res.body.text();
    onExchange?.({ url: target.href, headers, body: body.toString('utf8'), status: res.statusCode, response: text, at: now() });
    return { status: res.statusCode, text };
  }
  const errorMisses = new ErrorMissClaims({ post: postSessionRoute, now, waitMs: opts.errorMissWaitMs ?? 120_000, ...(opts.onErrorMiss ? { report: opts.onErrorMiss } : {}) });
  let missing: Promise<number> | undefined;
  const sweepErrorMisses = (): Promise<number> => (missing ??= errorMisses.sweep((id) => sessions.get(id)).finally(() => (missing = undefined)));
  const missMs = opts.errorMissSweepMs ?? 5_000;
  const missTimer = missMs > 0 ? setInterval(() => void sweepErrorMisses().catch(() => undefined), missMs) : undefined;
  missTimer?.unref();

  /**
   * A v5 stream that ended in an error, read to its end: its Finish (held since the error) and the
   * answer's lines make a claim, asked at once off the request path; or none, and the Finish goes.
   */
  function errorAnswerEnded(s: DevshardSession, hostUrl: string, nonce: bigint, answer: AnswerLines): void {
    const made = claimOf(answer, s.pendingFinish(nonce), { inferenceId: nonce, executorUrl: hostUrl, now: now() });
    if ('reason' in made) {
      errorMisses.dropped(s.escrow.escrowId, s, nonce, made.reason);
      return;
    }
    errorMisses.add(s.escrow.escrowId, made.claim);
    void sweepErrorMisses().catch(() => undefined);
  }

  return {
    session: (id) => sessions.get(id),
    routeRefusal: (id) => routeRefusals.get(id),
    acknowledged: (id) => {
      const s = sessions.get(id);
      return s ? s.hosts().map((host) => ({ host, nonce: Number(s.ackedNonce(host)) })) : undefined;
    },
    sweepTimeouts,
    sweepErrorMisses,
    errorMissClaims: (id) => errorMisses.open(id),
    finalize,
    setExchangeListener(fn) {
      onExchange = fn;
    },

    async admit(escrowId: string, signer: RequestSigner): Promise<void> {
      const s = await sessionFor({ escrowId, signer });
      try {
        await seeds.get(s.escrow.escrowId)?.wait();
      } catch (err) {
        if (err instanceof HeightSeedIncomplete) throw new NotAdmitted('height_seed_incomplete', `escrow ${escrowId}'s hosts are ${err.message}`);
        throw err;
      }
    },

    heightSeed(escrowId: string): HeightSeedStatus | undefined {
      return seeds.get(escrowId)?.status();
    },

    heartbeatDue(escrowId: string, idleMs: number): number | undefined {
      const s = sessions.get(escrowId);
      if (!s || rulesOf(s.protocol) !== 'v5' || s.replica.phase !== Phase.Active) return undefined;
      // Never before a floor exists (Z5: no_height), nor while a diff was composed within idleMs.
      if (s.replica.floor().height === 0n || now() - (lastDiffAt.get(escrowId) ?? 0) < idleMs) return undefined;
      return s.spanNonces();
    },

    async heartbeatSpan(escrowId: string, signer: RequestSigner, from: bigint, upTo: bigint): Promise<{ acks: number }> {
      const s = await sessionFor({ escrowId, signer });
      let span;
      try {
        span = s.heartbeatSpan(from, upTo);
      } finally {
        wake(escrowId, s);
      }
      if (span.recorded.length > 0) await Promise.all(span.recorded);
      // Every host is sent the span (its heartbeats answered with acks by the slot each addresses), at once.
      await Promise.allSettled(s.hosts().map((url) => syncHost(s, url)));
      return { acks: s.pendingAcks() };
    },

    async flush(escrowId: string, signer: RequestSigner, nonce: bigint): Promise<void> {
      const s = await sessionFor({ escrowId, signer });
      let step;
      try {
        step = s.flushDiff(nonce);
      } finally {
        wake(escrowId, s);
      }
      if (step.recorded.length > 0) await Promise.all(step.recorded);
      await syncHost(s, s.executorUrl(nonce));
    },

    async chat(call: ChatCall): Promise<ChatResult> {
      const s = await sessionFor(call);
      const nonce = BigInt(call.nonce);
      // A long catch-up (after a restart every recorded diff is sent once) goes in chunks first, so
      // this request carries at most CATCH_UP_CHUNK of them; before taking the nonce's turn, so the
      // calls after it do not wait on it.
      const executor = s.executorUrl(nonce);
      if (s.catchUpCount(executor) > CATCH_UP_CHUNK) {
        const key = `${call.escrowId} ${executor}`;
        let p = catchingUp.get(key);
        if (!p) {
          p = catchUpInChunks(s, executor).finally(() => catchingUp.delete(key));
          catchingUp.set(key, p);
        }
        await p;
      }
      await turn(call.escrowId, s, nonce);
      // A v5 host refuses a budget below 64: raise it as devshardctl does, cut the answer at the client's (token-floor.ts).
      const floored = rulesOf(s.protocol) === 'v5' ? applyTokenFloor(call.body) : undefined;
      const hostBody = floored?.body ?? call.body;
      const prompt = Buffer.from(JSON.stringify(hostBody), 'utf8');
      const maxTokens = typeof hostBody.max_tokens === 'number' ? BigInt(hostBody.max_tokens) : 0n;
      const cutAt = floored?.clientLimit;
      // The gateway calls a host that moved at its participant's new inference_url (gateway/chat/host-urls.ts):
      // the session follows it, for this call and every later one to that host (and its finalize).
      if (call.hostUrl && call.hostUrl !== s.executorUrl(nonce)) s.moveHost(s.executorHost(nonce), call.hostUrl);
      let prepared;
      try {
        prepared = s.prepare(nonce, { prompt, model: String(call.body.model), maxTokens, startedAt: BigInt(Math.floor(now() / 1000)) });
      } catch (err) {
        throw new HostError('rejected', `devshard session of escrow ${call.escrowId} refused nonce ${nonce}: ${err instanceof Error ? err.message : String(err)}`);
      } finally {
        wake(call.escrowId, s);
      }
      const hostUrl = prepared.hostUrl;
      const label = `host ${hostUrl}`;
      // The diffs are durable (recorded) before the first request carrying them leaves.
      if (prepared.recorded.length > 0) {
        try {
          await Promise.all(prepared.recorded);
        } catch (err) {
          throw new NotRecorded(`the diffs of nonce ${nonce} could not be recorded; not sent: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
      const url = new URL(sessionUrl(hostUrl, call.escrowId, 'chat/completions', s.protocol.route));
      const ts = BigInt(Math.floor(now() / 1000));
      const sig = call.signer.signProtocol!(s.headerMessage(prepared.body, ts));
      const stream = call.body.stream === true;
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        'x-devshard-signature': Buffer.from(sig).toString('hex'),
        'x-devshard-timestamp': String(ts),
      };
      const at = now();
      const capture = onExchange;
      const exchanged = (status: number, response: string): void =>
        capture?.({ url: url.href, headers, body: Buffer.from(prepared.body).toString('utf8'), status, response, at });

      // Our own controller: the client leaving does not close the host's stream (its meta is read on).
      const ac = new AbortController();
      const firstTimer = setTimeout(() => ac.abort(), stream ? stallTimeoutMs : timeoutMs);
      let res: Dispatcher.ResponseData;
      try {
        res = await agent.request({ origin: url.origin, path: url.pathname, method: 'POST', headers, body: Buffer.from(prepared.body), signal: ac.signal });
      } catch (err) {
        clearTimeout(firstTimer);
        if (ac.signal.aborted) throw new HostError(stream ? 'stalled' : 'timeout', `${label} did not answer in time`);
        const code = (err as { code?: string } | null)?.code;
        throw new HostError('unreachable', `${label} unreachable: ${code ? `${code}: ` : ''}${(err as Error)?.message ?? String(err)}`);
      }
      clearTimeout(firstTimer);
      if (res.statusCode !== 200) {
        let text = '';
        try {
          for await (const c of res.body) {
            text += (c as Buffer).toString('utf8');
            if (text.length >= MAX_ERROR_BODY) break;
          }
        } catch {
          /* best effort */
        }
        exchanged(res.statusCode, text);
        throw refused(s, hostUrl, res.statusCode, text, label);
      }

      const pump = new EventPump(res.body, capture !== undefined);
      const finishCapture = () => exchanged(200, pump.text);
      const ask = clientAsk(call.body);
      const deadline = now() + timeoutMs;
      const fail = (err: unknown, usageSoFar?: Usage): HostError => {
        pump.close();
        if (err instanceof HostError) return err;
        if (err instanceof Stalled) return new HostError(stream ? 'stalled' : 'timeout', `${label} sent nothing for ${stream ? stallTimeoutMs : timeoutMs} ms`, undefined, usageSoFar);
        if (err instanceof HostEventError) return new HostError('bad_response', `${label}: ${err.message}`, undefined, usageSoFar);
        return new HostError('truncated', `${label} broke the stream: ${(err as Error)?.message ?? String(err)}`, undefined, usageSoFar);
      };

      // The receipt comes first, before execution: read it before answering the client, so a host
      // whose state is not ours fails the request with a status, not mid-stream.
      let first: string | undefined;
      try {
        first = await pump.next(stream ? stallTimeoutMs : Math.max(1, deadline - now()));
        if (first === undefined) throw new HostError('truncated', `${label} closed the stream before its receipt`);
        const ev = readHostEvent(first);
        if (ev.kind !== 'receipt') throw new HostError('bad_response', `${label} answered without a devshard_receipt first`);
        receiptOf(s, hostUrl, ev.receipt, nonce);
      } catch (err) {
        finishCapture();
        throw fail(err);
      }

      if (!stream) {
        let completion: (ChatCompletion & Record<string, unknown>) | undefined;
        let text: string | undefined;
        let done = false;
        try {
          for (;;) {
            const data = await pump.next(Math.max(1, deadline - now()));
            if (data === undefined) break;
            const ev = readHostEvent(data);
            if (ev.kind === 'meta') s.onMempool(ev.mempool, hostUrl);
            else if (ev.kind === 'done') done = true;
            else if (ev.kind === 'output' && !completion) {
              const v = ev.value as (ChatCompletion & Record<string, unknown>) | undefined;
              if (!v || typeof v !== 'object' || !Array.isArray(v.choices)) throw new HostError('bad_response', `${label} answered without choices`);
              if ((v as { error?: unknown }).error) throw new HostError('rejected', `${label} failed: ${messageOf(data)}`);
              if (cutAt !== undefined) {
                const cut = cutCompletion(v, cutAt) as typeof v;
                text = completionForClient(JSON.stringify(cut), cut, ask);
                completion = cut;
              } else {
                // completionForClient strips `v` in place: `text` is `v` as JSON, no need to parse it again.
                text = completionForClient(data, v, ask);
                completion = v;
              }
            }
          }
        } catch (err) {
          finishCapture();
          throw fail(err);
        }
        finishCapture();
        pump.close();
        if (!completion || !done) throw new HostError('truncated', `${label} closed the stream without ${completion ? '[DONE]' : 'the completion'}`);
        if (!isUsage(completion.usage)) {
          const msg = completion.choices[0]?.message as { content?: unknown } | undefined;
          const chars = typeof msg?.content === 'string' ? msg.content.length : 0;
          const prompt_tokens = countPromptTokens(call.body);
          const completion_tokens = countCompletionTokens(chars);
          completion.usage = { prompt_tokens, completion_tokens, total_tokens: prompt_tokens + completion_tokens };
          return { kind: 'completion', completion };
        }
        return { kind: 'completion', completion, ...(text !== undefined ? { text } : {}) };
      }

      let reported: Usage | undefined;
      let contentChars = 0;
      const usage = (): Usage => {
        if (reported) return reported;
        const p = countPromptTokens(call.body);
        const c = countCompletionTokens(contentChars);
        return { prompt_tokens: p, completion_tokens: c, total_tokens: p + c };
      };
      const track = (v: unknown): void => {
        const chunk = v as { usage?: unknown; choices?: { delta?: { content?: unknown } }[] } | undefined;
        if (!chunk || typeof chunk !== 'object') return;
        if (isUsage(chunk.usage)) reported = chunk.usage;
        if (Array.isArray(chunk.choices)) for (const c of chunk.choices) if (typeof c?.delta?.content === 'string') contentChars += c.delta.content.length;
      };

      const cut = cutAt !== undefined ? new StreamCut(cutAt) : undefined;
      // v5: the answer's own lines, the evidence of an error-miss should it end in an error (error-miss.ts).
      const answer = rulesOf(s.protocol) === 'v5' ? new AnswerLines() : undefined;
      async function* chunks(): AsyncGenerator<ChatChunk> {
        let handedOff = false;
        let errorAnswer = false;
        try {
          for (;;) {
            const data = await pump.next(stallTimeoutMs);
            if (data === undefined) throw new HostError('truncated', `${label} closed the stream without [DONE]`, undefined, usage());
            const ev = readHostEvent(data);
            if (ev.kind !== 'meta') answer?.add(data);
            if (ev.kind === 'done') break;
            if (ev.kind === 'meta') {
              s.onMempool(ev.mempool, hostUrl);
              continue;
            }
            if (ev.kind !== 'output') continue;
            if (ev.value && typeof ev.value === 'object' && (ev.value as { error?: { message?: string } }).error) {
              const failed = new HostError('rejected', `${label} failed mid-stream: ${messageOf(data)}`, undefined, usage());
              if (answer) {
                // The executor still signs a Finish over this answer: hold it from now, read the
                // stream on to its meta without the client, then claim the miss (Z5 redundancy.go).
                errorAnswer = handedOff = true;
                s.pinFinish(nonce);
                void drain(s, hostUrl, pump, now() + drainMs, finishCapture, answer, () => errorAnswerEnded(s, hostUrl, nonce, answer));
              }
              throw failed;
            }
            track(ev.value);
            // Past the client's own max_tokens (a v5 floor raised it): read on for the meta, send nothing.
            const value = cut && ev.value && typeof ev.value === 'object' ? cut.take(ev.value as Record<string, unknown>) : ev.value;
            if (value === undefined) continue;
            for (const out of chunksForClient(value === ev.value ? data : JSON.stringify(value), value, ask)) yield JSON.parse(out) as ChatChunk;
          }
          // [DONE]: the meta follows at once; wait for it briefly, then read on without the client.
          handedOff = true;
          const rest = drain(s, hostUrl, pump, now() + drainMs, finishCapture);
          await Promise.race([rest, new Promise((r) => setTimeout(r, Math.min(drainMs, 1_000)).unref())]);
        } catch (err) {
          // An error answer's stream is the drain's now: neither captured nor closed here.
          if (errorAnswer) throw err;
          finishCapture();
          throw fail(err, usage());
        } finally {
          // The client stopped reading (or left): read the host's stream on for its Finish.
          if (!handedOff && !pump.closed) {
            void drain(s, hostUrl, pump, now() + drainMs, finishCapture);
          }
        }
      }

      return { kind: 'stream', chunks: chunks(), usage };
    },

    async close() {
      if (sweepTimer) clearInterval(sweepTimer);
      if (missTimer) clearInterval(missTimer);
      for (const seed of seeds.values()) seed.stop();
      for (const s of sessions.values()) s.onDiff = undefined;
      await Promise.race([Promise.allSettled([...drains]), new Promise((r) => setTimeout(r, 1_000).unref())]);
      if (ownsAgent) await agent.close();
    },
  };
}
