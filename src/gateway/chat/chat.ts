/**
 * One chat request through the engine: admit (access mode, limits), pick an escrow, take the next
 * nonce, which is durably reserved (NoncesReserved, in blocks) before anything leaves, record the
 * start, call the network, and account the usage (the end). Starts and ends are entries of the
 * escrow's InferencesRecorded (one event per escrow and group commit, engine.recordRequest).
 *
 * Start and end are decided synchronously (the statechart can refuse them) and committed with the
 * next group commit; the client does not wait for that fsync. A crash in that window (about one
 * commit, ~1-3 ms) loses no money and reuses no nonce: the start-up reconciler skips the previous
 * run's reserved nonces and bills what the hosts report they served beyond the log (reconcile.ts).
 */
import { admitDuringPoc } from './poc-gate.js';
import { hostUrlOf, refreshAfterHostFailure } from './host-urls.js';
import { isFinalizing } from '../escrows/finalize-hold.js';
import { randomUUID } from 'node:crypto';
import { newEvent, type InferenceEntry } from '../../events/catalog.js';
import type { Actor } from '../../events/envelope.js';
import { GatewayError, refuse } from '../errors.js';
import type { CancelController, CancelSignal } from '../../network/call-signal.js';
import { HostError, NotAdmitted, NotRecorded, type ChatResult, type Usage } from '../../network/port.js';
import type { GatewayContext } from '../context.js';
import { TransitionRefused } from '../write/engine.js';
import { isServedModel } from './models.js';
import { knownEpoch, settleWindowClosedAt } from '../workers/prune-watch.js';
import { MIN_TOKENS_FLOOR } from '../../network/devshard/token-floor.js';
import { rulesOf } from '../../protocol/versions.js';
import { escrowProtocol } from '../escrows/protocol.js';

/** A chat request as the use case takes it: validated and normalized by the HTTP layer. */
export interface ChatRequest {
  /** The body to forward to the host (model, messages, max_tokens set, stream flag). */
  body: Record<string, unknown> & { model: string; max_tokens: number; stream: boolean };
  model: string;
  stream: boolean;
  maxTokens: number;
  /** Estimated prompt tokens: admission (limiter) and the reservation's worst case. */
  inputTokens: number;
}

export interface ChatCommand {
  req: ChatRequest;
  /** 'admin' or a client key id. */
  caller: { kind: 'admin' } | { kind: 'client'; keyId: string };
  requestId: string;
  /** Aborted when the client goes away. */
  signal: CancelSignal;
  /** The controller of `signal`, lent to the transport (one controller per request). */
  controller?: CancelController;
}

export interface ChatSession {
  escrowId: string;
  nonce: number;
  result: ChatResult;
  /**
   * Records the outcome: decided at once (committed with the next group commit, not awaited), so
   * it returns nothing to wait for. Safe to call once; later calls are no-ops.
   */
  end(outcome: { usage: Usage; error?: string }): void;
  /**
   * Records a whole answer's outcome and resolves once it is durable (group commit), without
   * ending the request: the answer's last byte waits on it, so a client that got a whole answer
   * always finds it in the log, even when the process is killed right after (issue 41, item 7).
   * `end` then only gives the concurrency slot back. Never rejects: a failure is logged, and the
   * next start recovers what the host served.
   */
  record(outcome: { usage: Usage; error?: string }): Promise<void>;
}

const ZERO_USAGE: Usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };

/** Retry-After for "no escrow can take this now": balance checks and rotation act within seconds. */
const NO_CAPACITY_RETRY_S = 5;

export async function openChat(ctx: GatewayContext, cmd: ChatCommand): Promise<ChatSession> {
  const { req, caller } = cmd;
  if (!isServedModel(ctx, req.model)) throw refuse.modelNotFound(req.model);
  if (caller.kind === 'client' && ctx.projections.settings.accessMode(req.model) !== 'api_key') {
    throw refuse.adminOnlyModel(req.model);
  }
  admitDuringPoc(ctx);
  if (ctx.logCheck?.state === 'failed') throw refuse.eventLogTampered(ctx.logCheck.position, ctx.logCheck.reason);
  const release = ctx.limiter.acquire(req.inputTokens);
  let session: ChatSession;
  try {
    session = await reserveAndCall(ctx, cmd);
  } catch (err) {
    release();
    throw err;
  }
  const end = session.end;
  let released = false;
  session.end = (outcome) => {
    try {
      end(outcome);
    } finally {
      if (!released) {
        released = true;
        release();
      }
    }
  };
  return session;
}

async function reserveAndCall(ctx: GatewayContext, cmd: ChatCommand): Promise<ChatSession> {
  const { req } = cmd;
  const price = ctx.chainInfo.tokenPrice;
  // A v5 host takes no budget below 64 tokens: devshardctl raises it there, the reservation with it
  // (network/devshard/token-floor.ts). The statechart refuses a v5 escrow that cannot cover it.
  const v5Tokens = Math.max(req.maxTokens, MIN_TOKENS_FLOOR);
  const baseCost = BigInt(req.inputTokens + req.maxTokens) * price;
  // Keys in sorted order on this path: the log then writes them with JSON.stringify (canonicalJson).
  const actor: Actor = cmd.caller.kind === 'admin' ? { kind: 'admin' } : { keyId: cmd.caller.keyId, kind: 'client' };
  const metadata = { actor, correlationId: cmd.requestId, requestId: cmd.requestId };
  const requestId = cmd.requestId || randomUUID();

  // The pool follows commits; the engine's decided state can be one append ahead (a finalize or a
  // reservation still committing). The statechart has the last word: a refused escrow is skipped.
  let refused: Set<string> | undefined; // made on the first refusal (rare)
  for (let attempt = 0; ; attempt++) {
    const picked = pickEscrow(ctx, req.model, baseCost, refused);
    if (!picked && refused) throw noneAvailable(req.model);
    if (!picked) throw noCapacity(ctx, req.model, baseCost);
    const reservedCost = rulesOf(escrowProtocol(ctx.engine, picked.escrowId)) === 'v5' ? BigInt(req.inputTokens + v5Tokens) * price : baseCost;
    const creator = ctx.engine.escrow(picked.escrowId)!.context.creator;
    const signer = creator ? ctx.keyring.signerFor(creator) : undefined;
    if (!signer || ctx.engine.escrow(picked.escrowId)!.context.slots.length === 0) {
      // An escrow whose creator key this process does not hold cannot sign host requests.
      throw refuse.unavailable(`No escrow of model '${req.model}' can be used: its creator key is not loaded (set DEVSHARD_PRIVATE_KEY).`, NO_CAPACITY_RETRY_S, 'creator_key_unavailable');
    }
    // v5: before a nonce is taken, the session's height seed (at most 2 s; refused while missed).
    if (ctx.network.admit && rulesOf(escrowProtocol(ctx.engine, picked.escrowId)) === 'v5') {
      try {
        await ctx.network.admit(picked.escrowId, signer);
      } catch (err) {
        if (err instanceof NotAdmitted) throw refuse.unavailable(`Escrow ${picked.escrowId} cannot take requests yet: ${err.message}.`, 1, err.rule);
        throw hostFailure(err);
      }
    }
    // Read after the wait: other requests may have moved the escrow on meanwhile.
    const c = ctx.engine.escrow(picked.escrowId)!.context;
    const slots = c.slots;
    const nonce = c.nonce + 1;
    let reservation: Promise<unknown> | undefined;
    let startedAt: Promise<unknown>;
    try {
      reservation = ctx.nonces.ensure(picked.escrowId, nonce, metadata);
      // Keys in canonical order (data, type; data's sorted), so the log writes it with JSON.stringify.
      startedAt = ctx.engine.recordRequest(picked.escrowId, {
        data: {
          clientKeyId: cmd.caller.kind === 'client' ? cmd.caller.keyId : null,
          inputTokens: req.inputTokens,
          maxTokens: req.maxTokens,
          nonce,
          requestId,
          reservedCost: reservedCost.toString(),
        },
        type: 'InferenceStarted',
      });
    } catch (err) {
      if (err instanceof TransitionRefused) {
        (refused ??= new Set()).add(picked.escrowId);
        if (attempt < 8) continue;
        throw noneAvailable(req.model);
      }
      throw err;
    }
    const escrowId = picked.escrowId;
    startedAt.catch((err: unknown) => ctx.logger.error({ err, escrow_id: escrowId, nonce }, 'could not record the start of a request'));
    // The nonce's reservation is durable before the request leaves (docs/architecture.md, principle
    // "durable before acknowledged"); the start itself commits with the next group commit.
    if (reservation) {
      try {
        await reservation;
      } catch {
        // Logged by NonceLeases; the escrow is set aside (engine), the request never left.
        throw refuse.unavailable('The event log could not record a nonce reservation; this request was not sent. Retry shortly; the operator should check the gateway log.', 1, 'event_log_unavailable');
      }
    }
    if (nonce + 1 >= c.routingStop) stopRouting(ctx, escrowId, nonce, c.routingStop);

    let ended = false;
    let recorded: Promise<void> = Promise.resolve();
    const end = (outcome: { usage: Usage; error?: string }, urgent = false): void => {
      if (ended) return;
      ended = true;
      const tokens = BigInt(outcome.usage.total_tokens);
      // Never bill more than was reserved: the reservation is what the balance guaranteed.
      let cost = tokens * price;
      if (cost > reservedCost) cost = reservedCost;
      const usage = {
        completionTokens: outcome.usage.completion_tokens,
        promptTokens: outcome.usage.prompt_tokens,
        totalTokens: outcome.usage.total_tokens,
      };
      const entry: InferenceEntry =
        outcome.error === undefined
          ? { data: { cost: cost.toString(), nonce, requestId, usage }, type: 'InferenceFinished' }
          : { data: { cost: cost.toString(), nonce, reason: outcome.error.slice(0, 500), requestId, usage }, type: 'InferenceFailed' };
      const failed = (err: unknown) => ctx.logger.error({ err, escrow_id: escrowId, nonce }, 'could not record the end of a request; a restart bills what the host served');
      ctx.billing?.billed(escrowId, BigInt(nonce), cost);
      try {
        recorded = ctx.engine.recordRequest(escrowId, entry, { urgent }).then(() => ctx.afterRequest(escrowId), failed);
      } catch (err) {
        // The answer is already on its way; what the host served is recovered at the next start.
        failed(err);
      }
    };
    // Durable before the last byte (GATEWAY_RECORD_BEFORE_LAST_BYTE), or committed just after the answer.
    const beforeLastByte = ctx.config.behaviour.recordBeforeLastByte;
    const record = (outcome: { usage: Usage; error?: string }): Promise<void> => {
      end(outcome, beforeLastByte);
      return beforeLastByte ? recorded : Promise.resolve();
    };

    const slot = slots[nonce % slots.length]!;
    // The participant's current URL when it moved (host-urls.ts), else the recorded one.
    const hostUrl = hostUrlOf(ctx, slot);
    try {
      const result = await ctx.network.chat({ escrowId, nonce, hostUrl, body: req.body, signer, signal: cmd.signal, ...(cmd.controller ? { controller: cmd.controller } : {}) });
      return { escrowId, nonce, result, end, record };
    } catch (err) {
      const usage = err instanceof HostError && err.usageSoFar ? err.usageSoFar : ZERO_USAGE;
      end({ usage, error: err instanceof Error ? err.message : String(err) });
      await refreshAfterHostFailure(ctx, escrowId, slot, err);
      throw hostFailure(err);
    }
  }
}

/** The pool's pick, unless it is refused or no longer active in the decided state; then the next best. */
function pickEscrow(ctx: GatewayContext, model: string, reservedCost: bigint, refused: ReadonlySet<string> | undefined) {
  const usable = (id: string) => {
    const s = ctx.engine.escrow(id);
    return !refused?.has(id) && ctx.ownership.owns(id) && s?.value === 'active' && !isFinalizing(ctx, id) && !settleWindowClosedAt(ctx, s.context.epoch);
  };
  const first = ctx.projections.pool.pick(model, reservedCost.toString());
  if (!first || usable(first.escrowId)) return first;
  let best: (typeof first) | undefined;
  for (const e of ctx.projections.pool.routableOf(model)) {
    if (!usable(e.escrowId) || BigInt(e.balance) - BigInt(e.reserved) < reservedCost) continue;
    if (!best || e.inFlight < best.inFlight) best = e;
  }
  return best;
}

function stopRouting(ctx: GatewayContext, escrowId: string, nonce: number, routingStop: number): void {
  const event = newEvent('EscrowRoutingStopped', { nonce, routingStop }, { actor: { kind: 'depletion-check' } });
  if (!ctx.engine.canEscrow(escrowId, event)) return;
  ctx.engine.decideEscrow('escrow', escrowId, [event]).then(
    () => ctx.logger.warn({ escrow_id: escrowId, nonce }, 'escrow reached the nonce routing stop; no new chat is routed to it'),
    (err) => ctx.logger.error({ err, escrow_id: escrowId }, 'could not record the routing stop'),
  );
}

/** Every escrow the pool offered was refused by its statechart (finalizing, reservation, unwritable). */
const noneAvailable = (model: string): GatewayError =>
  refuse.unavailable(`No escrow of model '${model}' could take the request right now; retry shortly.`, 1, 'no_escrow_available');

function noCapacity(ctx: GatewayContext, model: string, need: bigint): GatewayError {
  const routable = ctx.projections.pool.routableOf(model);
  // Every escrow of the model reached the nonce routing stop (or was stopped there): a nonce limit, not a balance one.
  const ofModel = [...ctx.projections.pool.contexts()].filter(([, e]) => e.context.model === model && e.state !== 'removed' && e.state !== 'settled');
  const atStop = ofModel.filter(([, e]) => e.state === 'routingStopped' || (e.state === 'active' && e.context.nonce + 1 >= e.context.routingStop));
  if (ofModel.length > 0 && atStop.length === ofModel.length && routable.every((r) => atStop.some(([id]) => id === r.escrowId))) {
    const stop = atStop[0]![1].context.routingStop;
    return refuse.unavailable(
      `Every escrow of model '${model}' reached the nonce routing stop (${stop}, below the chain's max_nonce): no new request can be signed on them. Create and register a new escrow (POST /v1/admin/escrows), or enable escrow rotation so the gateway replaces them.`,
      NO_CAPACITY_RETRY_S,
      'escrow_nonce_limit',
    );
  }
  if (routable.length === 0) {
    return refuse.unavailable(`No active escrow serves model '${model}' right now; an operator must create and register one.`, NO_CAPACITY_RETRY_S, 'no_active_escrow');
  }
  // Instances sharing a log: the model's escrows are all held by the others right now.
  if (ctx.ownership.shared && routable.every((r) => !ctx.ownership.owns(r.escrowId))) {
    const owners = ctx.ownership.view().owners;
    const held = [...new Set(routable.map((r) => owners[r.escrowId]).filter((o): o is string => o !== undefined))];
    return refuse.unavailable(
      `This gateway instance (${ctx.ownership.instance}) holds no escrow of model '${model}' right now${held.length > 0 ? `; instance ${held.join(', ')} serves it` : ''}. Send the request to another instance (a reverse proxy retries the next one), or give the model at least as many escrows as there are instances so that each holds one.`,
      1,
      'no_escrow_on_this_instance',
    );
  }
  // Every routable one is past its settle window: the chain has pruned it (or does at the next block).
  const expired = routable.filter((r) => settleWindowClosedAt(ctx, ctx.engine.escrow(r.escrowId)?.context.epoch));
  if (expired.length === routable.length) {
    const epoch = knownEpoch(ctx)!.epochIndex;
    const ids = expired.map((r) => `${r.escrowId} (epoch ${ctx.engine.escrow(r.escrowId)?.context.epoch})`).join(', ');
    return refuse.unavailable(
      `Every escrow of model '${model}' is past its settle window (escrow ${ids}; the chain is at epoch ${epoch}, and an escrow serves and settles only in its own epoch and the next): the chain prunes it and pays its deposit to its hosts, so no request is routed to it. Create and register a new escrow (POST /v1/admin/escrows), or enable escrow rotation (POST /v1/admin/settings escrow_rotation) so the gateway replaces escrows before their window closes.`,
      NO_CAPACITY_RETRY_S,
      'escrow_settle_window_closed',
    );
  }
  return refuse.unavailable(
    `No escrow of model '${model}' has the usable balance for this request's worst case (${need} at the current token price); lower max_tokens or retry shortly.`,
    NO_CAPACITY_RETRY_S,
    'insufficient_escrow_balance',
  );
}

/** A host failure as the client sees it. */
export function hostFailure(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  if (err instanceof NotRecorded) return refuse.unavailable(`The event log could not record this request's diff, so it was not sent (${err.message}). Retry shortly; the operator should check the gateway log.`, 1, 'event_log_unavailable');
  if (err instanceof HostError) {
    if (err.kind === 'aborted') return new GatewayError('client_closed', 'client_closed_request', 'The client closed the request.');
    if (err.kind === 'timeout' || err.kind === 'stalled') return new GatewayError('upstream_timeout', 'upstream_timeout', `The inference host did not answer in time (${err.kind}).`);
    return refuse.upstream(`The inference host failed: ${err.message}`, `upstream_${err.kind}`);
  }
  return refuse.upstream('The inference network could not be reached.', 'upstream_error');
}

/** What a failed stream bills: the host's count of what it delivered when it gave one, else `soFar`. */
export function usageAtFailure(err: unknown, soFar: Usage): Usage {
  return err instanceof HostError && err.usageSoFar ? err.usageSoFar : soFar;
}
