/**
 * The real devshard host routes of one simulated host, under `{host prefix}/devshard/<version>`
 * for each version it serves (and `{host prefix}/v1/devshard` for v2 with the legacy route on;
 * mounting: ../index.ts, versiond.ts) (gonka 8a35022 devshard/transport/server.go `Register`,
 * devshard/server/routes.go):
 *   POST sessions/:id/chat/completions   owner only; SSE receipt → output (executor) → meta
 *   POST sessions/:id/verify-timeout     owner only; {accept, signature, voter_slot}
 *   GET  sessions/:id/diffs?from=&to=    [{diff:{nonce,txs,user_sig,post_state_root}, state_hash}]
 *   GET  sessions/:id/mempool            {txs:[base64 DevshardTx]}
 *   GET  sessions/:id/signatures?nonce=N {signatures:{"<slot>":"<base64>"}}
 * GETs are unauthenticated, as in gonka. Refusals are echo errors: `{"message": text}`.
 * Under v5 (Z5 = zpoken/gonka@86cff503; docs/notes/v5-host-wire.md) the same routes change as a Z5
 * host changes them: the body may be a protobuf envelope (envelope.ts), sessions are bound by chat
 * and the seed only (session-access.ts), diffs apply through the v5 rules with Z5's texts, the host
 * acks its heartbeats (height-acks.ts), stamps its receipt and Finish (stamped-receipt.ts,
 * host-stamps.ts) and adds its `height_sync` Anchor (height-section.ts); the seed RPC and
 * verify-error-miss are added (v5-routes.ts).
 */
import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { create, toBinary } from '@bufbuild/protobuf';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { DevshardTxSchema, type DevshardTx } from '../../../protocol/gen/devshard/v1/diff_pb.js';
import { MsgFinishInferenceSchema } from '../../../protocol/gen/devshard/v1/tx_pb.js';
import { finishProposerBytes } from '../../../protocol/preimages.js';
import { signMessage } from '../../../protocol/signatures.js';
import { LEGACY_ROUTE_PREFIX } from '../../../protocol/versions.js';
import type { RuleSet } from '../../../protocol/versions.js';
import { PlanError, planCompletion } from '../completion-plan.js';
import { faultFor, type HostFaults } from '../faults.js';
import { recoverRequestSigner, requireOwner } from './auth.js';
import { unwrapInferenceRequest } from './envelope.js';
import { ackHeartbeats } from './height-acks.js';
import { escrowHints, shouldEmitAnchor, signedAnchor, type HeightSyncSection } from './height-section.js';
import { hasOracle, headerStamp, hostStamp, readOracle } from './host-stamps.js';
import { hostRules } from './host-versions.js';
import { erroredOutput, plannedOutput, responseHash } from './output.js';
import { signReceipt, type ReceiptOutcome } from './receipt.js';
import type { HostSession } from './session.js';
import { bindOwnerSession, existingSession, existingSessionForOwner } from './session-access.js';
import { signStampedReceipt, type StampedReceiptOutcome } from './stamped-receipt.js';
import { decideTimeout, recoveryTxsFor, signTimeoutVote, timeoutReason } from './timeout.js';
import { sendHttpError } from './http-answers.js';
import { v5Routes } from './v5-routes.js';
import { decodeTimeoutDiffs, HostHttpError, parseInferenceRequest, parseVerifyTimeout, type ParsedInferenceRequest } from './wire.js';

/** v2's route, the host API's in-process prefix at 8a35022 (served only with the legacy route on). */
export const HOST_ROUTE_PREFIX = LEGACY_ROUTE_PREFIX;

/** Where versiond is mounted on a real host (nginx `location /devshard/`, 59b1ee7e proxy/entrypoint.sh). */
export const VERSIONED_ROUTE_ROOT = '/devshard';

export { sendHttpError } from './http-answers.js';

export type { ProtocolRouteContext } from './route-context.js';
import type { ProtocolRouteContext } from './route-context.js';

/** Longest a stall fault holds a connection whose client never leaves. */
const MAX_STALL_MS = 10 * 60_000;

const b64 = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64');


const bodyOf = (request: FastifyRequest): Uint8Array => (Buffer.isBuffer(request.body) ? new Uint8Array(request.body) : new Uint8Array(0));

function closedPromise(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    if (res.destroyed) resolve();
    else res.once('close', () => resolve());
  });
}

export function protocolRoutes(app: FastifyInstance, ctx: ProtocolRouteContext): void {
  const nowSeconds = (): bigint => BigInt(Math.floor(ctx.now() / 1000));
  const rules: RuleSet = hostRules(ctx.version);
  // Any content type: gonka reads the body as bytes whatever the header says.
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: ctx.bodyLimit }, (_req, body, done) => done(null, body));
  if (rules === 'v5') v5Routes(app, ctx);

  app.post<{ Params: { escrowId: string } }>('/sessions/:escrowId/chat/completions', async (request, reply) => {
    const { escrowId } = request.params;
    let session: HostSession;
    let outcome: StampedReceiptOutcome;
    let state: ReturnType<HostSession['signState']>;
    let fault: HostFaults | undefined;
    let section: HeightSyncSection | undefined;
    try {
      const body = bodyOf(request);
      if (rules === 'v5') session = bindOwnerSession(ctx, request.headers, escrowId, body, nowSeconds());
      else {
        session = ctx.sessions.get(ctx.host, escrowId, ctx.version);
        requireOwner(recoverRequestSigner(request.headers, escrowId, body, nowSeconds()), session.escrow.creator, session.groupAddresses);
      }
      fault = faultFor(ctx.faults, ctx.host.index);
      if (fault?.latencyMs) await sleep(fault.latencyMs);
      if (fault?.hold) {
        fault.onHold?.();
        await fault.hold;
      }
      if (fault?.failStatus !== undefined) throw new HostHttpError(fault.failStatus, fault.failMessage ?? 'simulated host fault');
      if (rules === 'v5') {
        const req = unwrapInferenceRequest(body);
        ({ outcome, section } = handleV5Request(ctx, session, req, fault, nowSeconds()));
      } else {
        const req: ParsedInferenceRequest = parseInferenceRequest(body);
        session.applyDiffs(req.diffs);
        outcome = signReceipt(session, req.diffs, req.nonce, req.payload, nowSeconds());
      }
      state = session.signState(fault?.withholdSignature === true);
    } catch (e) {
      return sendHttpError(reply, e);
    }

    reply.hijack();
    const res = reply.raw;
    ctx.open.add(res);
    const closed = closedPromise(res);
    const write = (data: string): boolean => !res.destroyed && res.write(`data: ${data}\n\n`);
    try {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
      res.flushHeaders();
      const r: Record<string, unknown> = {};
      if (state.stateSig) r.state_sig = b64(state.stateSig);
      r.state_hash = b64(state.root);
      r.nonce = Number(state.nonce);
      if (outcome.receipt) r.receipt = b64(outcome.receipt);
      if (outcome.confirmedAt) r.confirmed_at = Number(outcome.confirmedAt);
      if (outcome.stamp && outcome.stamp.height !== 0n) r.observed_height = Number(outcome.stamp.height);
      if (outcome.stamp && outcome.stamp.hash.length > 0) r.observed_block_hash = b64(outcome.stamp.hash);
      // A Go map: keys sorted, so the section follows the receipt.
      write(JSON.stringify(section ? { devshard_receipt: r, height_sync: section } : { devshard_receipt: r }));
      if (outcome.cached !== undefined) {
        write(outcome.cached);
        write('[DONE]');
      } else if (outcome.execute) {
        const ok = await execute(ctx, session, outcome.execute, fault, res, closed);
        if (!ok) {
          if (!res.destroyed) res.destroy();
          return;
        }
      }
      const mempool = session.mempoolWire();
      write(JSON.stringify({ devshard_meta: mempool.length > 0 ? { mempool } : {} }));
      res.end();
    } finally {
      ctx.open.delete(res);
    }
  });

  app.post<{ Params: { escrowId: string } }>('/sessions/:escrowId/verify-timeout', async (request, reply) => {
    const { escrowId } = request.params;
    try {
      const body = bodyOf(request);
      let session: HostSession;
      if (rules === 'v5') session = existingSessionForOwner(ctx, request.headers, escrowId, body, nowSeconds());
      else {
        session = ctx.sessions.get(ctx.host, escrowId, ctx.version);
        requireOwner(recoverRequestSigner(request.headers, escrowId, body, nowSeconds()), session.escrow.creator, session.groupAddresses);
      }
      const req = parseVerifyTimeout(body);
      const reason = timeoutReason(req.reason);
      session.applyCatchUp(decodeTimeoutDiffs(req.rawDiffs));
      const n = BigInt(session.groupAddresses.length);
      const executorAddress = session.groupAddresses[Number(req.inferenceId % n)];
      const executorHost = ctx.hosts.find((h) => h.address === executorAddress);
      const accept = decideTimeout(session, {
        inferenceId: req.inferenceId,
        reason,
        ...(req.payload ? { payload: req.payload } : {}),
        nowSeconds: nowSeconds(),
        executorMempool: () => (executorHost ? ctx.sessions.peek(executorHost.index, escrowId, ctx.version)?.mempoolTxs() : undefined),
      });
      if (!accept) {
        // Z5 also answers the recovery txs it holds for the inference (ConfirmStart, Finish).
        const recovery = rules === 'v5' ? recoveryTxsFor(session.mempoolTxs(), req.inferenceId).map((tx) => b64(toBinary(DevshardTxSchema, tx))) : [];
        return reply.type('application/json').send(recovery.length > 0 ? JSON.stringify({ accept: false, voter_slot: 0, mempool: recovery }) : '{"accept":false,"voter_slot":0}');
      }
      const vote = signTimeoutVote(session, req.inferenceId, reason);
      return reply.type('application/json').send(JSON.stringify({ accept: true, signature: b64(vote.signature), voter_slot: vote.voterSlot }));
    } catch (e) {
      return sendHttpError(reply, e);
    }
  });

  for (const kind of SESSION_GETS) {
    app.get<{ Params: { escrowId: string }; Querystring: Record<string, string | undefined> }>(`/sessions/:escrowId/${kind}`, async (request, reply) => {
      try {
        const session = rules === 'v5' ? existingSession(ctx, request.params.escrowId) : ctx.sessions.get(ctx.host, request.params.escrowId, ctx.version);
        return reply.type('application/json').send(sessionGet(kind, session, request.query));
      } catch (e) {
        return sendHttpError(reply, e);
      }
    });
  }
}

/**
 * Z5 `HandleRequest` once the body is read: the new diffs applied, the oracle read once, this
 * host's heartbeats acked into its mempool, the executor's stamped receipt, and the response-leg
 * Anchor when the cadence (or the request's force flag) calls for one.
 */
function handleV5Request(
  ctx: ProtocolRouteContext,
  session: HostSession,
  req: ReturnType<typeof unwrapInferenceRequest>,
  fault: HostFaults | undefined,
  nowSeconds: bigint,
): { outcome: StampedReceiptOutcome; section?: HeightSyncSection } {
  const { applied } = session.applyDiffs(req.diffs);
  const read = readOracle(ctx.chain);
  const belowFloor = fault?.subFloorStamps === true;
  ackHeartbeats(session, applied, { chain: ctx.chain, read, nowMs: ctx.now(), belowFloor });
  const outcome = signStampedReceipt(session, req.diffs, req.nonce, req.payload, { nowSeconds, read, chain: ctx.chain, belowFloor });
  if (!hasOracle(ctx.chain)) return { outcome };
  const escrow = escrowHints(session.replica.heightSync());
  const due = shouldEmitAnchor({ nonce: req.nonce, sessionStart: req.nonce === 1n, forceAnchor: req.forceAnchor && escrow === undefined, ...(escrow ? { escrow } : {}) });
  const section = due ? signedAnchor(read.header, { address: ctx.host.address, privateKey: ctx.host.privateKey, nowMs: ctx.now() }) : undefined;
  return section ? { outcome, section } : { outcome };
}

/** The unauthenticated session GETs (also served versionless under `/devshard`: versiond.ts). */
export const SESSION_GETS = ['diffs', 'mempool', 'signatures'] as const;
export type SessionGet = (typeof SESSION_GETS)[number];

/** The JSON body of GET diffs / mempool / signatures of `session` (HostHttpError for a bad query). */
export function sessionGet(kind: SessionGet, session: HostSession, query: Record<string, string | undefined>): string {
  if (kind === 'diffs') {
    const from = parseUint(query.from, "invalid 'from' parameter");
    const to = parseUint(query.to, "invalid 'to' parameter");
    const out: string[] = [];
    for (const [nonce, rec] of [...session.applied].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
      if (nonce < from || nonce > to) continue;
      out.push(`{"diff":${JSON.stringify(rec.diff.json)},"state_hash":"${b64(rec.stateHash)}"}`);
    }
    return `[${out.join(',')}]`;
  }
  if (kind === 'mempool') return JSON.stringify({ txs: session.mempoolWire() });
  const text = query.nonce;
  if (text === undefined || text === '') throw new HostHttpError(400, "missing 'nonce' parameter");
  const nonce = parseUint(text, "invalid 'nonce' parameter");
  const sigs = session.signatures.get(nonce) ?? new Map<number, Uint8Array>();
  // encoding/json writes map keys as strings, sorted.
  const entries = [...sigs].map(([slot, sig]) => [String(slot), b64(sig)] as const).sort((a, b) => (a[0] < b[0] ? -1 : 1));
  return JSON.stringify({ signatures: Object.fromEntries(entries) });
}

/** strconv.ParseUint(s, 10, 64). */
function parseUint(text: string | undefined, message: string): bigint {
  if (text === undefined || !/^\d+$/.test(text)) throw new HostHttpError(400, message);
  const v = BigInt(text);
  if (v >= 1n << 64n) throw new HostHttpError(400, message);
  return v;
}

/**
 * `RunExecution`: runs the simulated model on the prompt, writes its output, and on success puts
 * MsgFinishInference (proposer_sig over the message with proposer_sig cleared) into the mempool.
 * False when the stream ended early (fault, client gone, bad prompt): no Finish, no meta.
 */
async function execute(
  ctx: ProtocolRouteContext,
  session: HostSession,
  job: NonNullable<ReceiptOutcome['execute']>,
  fault: HostFaults | undefined,
  res: ServerResponse,
  closed: Promise<void>,
): Promise<boolean> {
  const id = job.start.inferenceId;
  try {
    let body: Record<string, unknown>;
    let plan;
    try {
      body = JSON.parse(Buffer.from(job.prompt).toString('utf8')) as Record<string, unknown>;
      plan = planCompletion(body);
    } catch (e) {
      if (e instanceof SyntaxError || e instanceof PlanError) return false;
      throw e;
    }
    const stream = body.stream === true;
    let out = plannedOutput(plan, { escrowId: session.escrowId, inferenceId: id, model: job.start.model, created: Math.floor(ctx.now() / 1000), stream });
    let outputTokens = plan.completionTokens;
    if (fault?.errorAnswerAfterChunks !== undefined) ({ out, outputTokens } = erroredOutput(out, fault.errorAnswerAfterChunks, stream, plan.completionTokens));
    let gone = false;
    void closed.then(() => {
      gone = true;
    });
    for (let k = 0; k < out.events.length; k++) {
      if (fault?.stallAfterChunks !== undefined && k >= fault.stallAfterChunks) {
        await Promise.race([closed, sleep(MAX_STALL_MS)]);
        return false;
      }
      if (fault?.truncateAfterChunks !== undefined && k >= fault.truncateAfterChunks) return false;
      if (stream && k > 0 && ctx.tokenDelayMs > 0) await Promise.race([sleep(ctx.tokenDelayMs), closed]);
      if (gone || res.destroyed) return false;
      if (!res.write(`data: ${out.events[k]}\n\n`)) await Promise.race([new Promise((r) => res.once('drain', r)), closed]);
    }
    // v5: the oracle's tip when the answer is done, lifted to F(id) (Z5 RunExecution).
    const stamp = session.rules === 'v5' ? hostStamp(session, id, headerStamp(readOracle(ctx.chain)), { chain: ctx.chain, belowFloor: fault?.subFloorStamps === true }) : undefined;
    const finish = create(MsgFinishInferenceSchema, {
      inferenceId: id,
      responseHash: responseHash(out),
      inputTokens: BigInt(plan.promptTokens),
      outputTokens: BigInt(outputTokens),
      executorSlot: job.executorSlot,
      escrowId: session.escrowId,
      ...(stamp ? { observedHeight: stamp.height, observedBlockHash: stamp.hash } : {}),
    });
    finish.proposerSig = signMessage(finishProposerBytes(finish), session.host.privateKey);
    const tx: DevshardTx = create(DevshardTxSchema, { tx: { case: 'finishInference', value: finish } });
    session.addToMempool(tx, session.latestNonce);
    session.completed.set(id, out.cached);
    return true;
  } finally {
    session.executing.delete(id);
  }
}
