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
 *
 * The parts, in ./transport/: opening an escrow's session (session-opening.ts), the chat call
 * (chat-call.ts), catch-up syncs and receipts (catch-up.ts), finalize and its signatures
 * (finalize.ts), height-seed requests, timeout and error-miss votes, nonce turns, host streams
 * read after their client (drain.ts); this file assembles them.
 */
import { createHttpAgent } from '../http-agent.js';
import { NotAdmitted, type ChatCall, type ChatResult, type FinalizedSession, type RequestSigner } from '../port.js';
import { Phase, rulesOf } from '../../protocol/index.js';
import type { DevshardSession } from './session.js';
import { HeightSeedIncomplete, type HeightSeed, type HeightSeedStatus } from './height-seed.js';
import type { RouteRefusal } from './host-refusals.js';
import type { ProtocolTransport, ProtocolTransportOptions } from './transport/types.js';
import type { TransportContext } from './transport/context.js';
import { sessionOpener } from './transport/session-opening.js';
import { syncHost } from './transport/catch-up.js';
import { finalizeSession } from './transport/finalize.js';
import { NonceTurns } from './transport/nonce-turns.js';
import { sweepTimeoutVotes } from './transport/timeout-votes.js';
import { ErrorMissSweep } from './transport/error-miss-sweep.js';
import { chatCaller } from './transport/chat-call.js';

// Its public names stay importable from here.
export type { Exchange, ProtocolTransport, ProtocolTransportOptions } from './transport/types.js';
export type { FinalizedSession } from '../port.js';
export { CATCH_UP_CHUNK } from './transport/catch-up.js';

export function createProtocolTransport(opts: ProtocolTransportOptions): ProtocolTransport {
  const agent = opts.agent ?? createHttpAgent(opts);
  const ownsAgent = !opts.agent;
  const ctx: TransportContext = {
    opts,
    agent,
    now: opts.now ?? Date.now,
    stallTimeoutMs: opts.stallTimeoutMs ?? 30_000,
    timeoutMs: opts.timeoutMs ?? 300_000,
    drainMs: opts.drainMs ?? 30_000,
    onExchange: opts.onExchange,
    sessions: new Map<string, DevshardSession>(),
    drains: new Set<Promise<void>>(),
    lastDiffAt: new Map<string, number>(),
    seeds: new Map<string, HeightSeed>(),
    routeRefusals: new Map<string, RouteRefusal>(),
  };
  const { now, sessions, drains, lastDiffAt, seeds, routeRefusals } = ctx;
  const sessionFor = sessionOpener(ctx);
  const turns = new NonceTurns(opts.orderWaitMs ?? 2_000);

  let sweeping: Promise<number> | undefined;
  const sweepTimeouts = (): Promise<number> => (sweeping ??= sweepTimeoutVotes(ctx).finally(() => (sweeping = undefined)));
  const sweepMs = opts.timeoutSweepMs ?? 15_000;
  const sweepTimer = sweepMs > 0 ? setInterval(() => void sweepTimeouts().catch(() => undefined), sweepMs) : undefined;
  sweepTimer?.unref();

  const errorMisses = new ErrorMissSweep(ctx);
  const chat: (call: ChatCall) => Promise<ChatResult> = chatCaller(ctx, sessionFor, turns, errorMisses);

  return {
    session: (id) => sessions.get(id),
    routeRefusal: (id) => routeRefusals.get(id),
    acknowledged: (id) => {
      const s = sessions.get(id);
      return s ? s.hosts().map((host) => ({ host, nonce: Number(s.ackedNonce(host)) })) : undefined;
    },
    sweepTimeouts,
    sweepErrorMisses: errorMisses.sweep,
    errorMissClaims: (id) => errorMisses.open(id),
    finalize: (escrowId: string, signer: RequestSigner, o?: { signatureWaitMs?: number }): Promise<FinalizedSession> => finalizeSession(ctx, sessionFor, escrowId, signer, o),
    setExchangeListener(fn) {
      ctx.onExchange = fn;
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
        turns.wake(escrowId, s);
      }
      if (span.recorded.length > 0) await Promise.all(span.recorded);
      // Every host is sent the span (its heartbeats answered with acks by the slot each addresses), at once.
      await Promise.allSettled(s.hosts().map((url) => syncHost(ctx, s, url)));
      return { acks: s.pendingAcks() };
    },

    async flush(escrowId: string, signer: RequestSigner, nonce: bigint): Promise<void> {
      const s = await sessionFor({ escrowId, signer });
      let step;
      try {
        step = s.flushDiff(nonce);
      } finally {
        turns.wake(escrowId, s);
      }
      if (step.recorded.length > 0) await Promise.all(step.recorded);
      await syncHost(ctx, s, s.executorUrl(nonce));
    },

    chat,

    forgetEscrow(escrowId: string): void {
      sessions.delete(escrowId);
      seeds.get(escrowId)?.stop();
      seeds.delete(escrowId);
      lastDiffAt.delete(escrowId);
      routeRefusals.delete(escrowId);
    },

    async close() {
      if (sweepTimer) clearInterval(sweepTimer);
      errorMisses.stop();
      for (const seed of seeds.values()) seed.stop();
      for (const s of sessions.values()) s.onDiff = undefined;
      await Promise.race([Promise.allSettled([...drains]), new Promise((r) => setTimeout(r, 1_000).unref())]);
      if (ownsAgent) await agent.close();
    },
  };
}
