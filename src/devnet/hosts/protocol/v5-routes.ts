/**
 * The routes v5 adds to a host's protocol surface (zpoken/gonka@86cff503 devshard/server/routes.go
 * `RegisterLazySessionRoutes`; transport/server_heightsync.go `HandleHeightSync`; transport/server.go
 * `HandleVerifyErrorMiss`; transport/types.go `VerifyErrorMissRequest`, `VerifyErrorMissResponse`):
 *
 *   POST sessions/:id/height-sync        owner only (binds the session); the body is not read.
 *     200 `{"height_sync":{…}}` (height-section.ts), `{}` when the oracle gives no Anchor;
 *     404 `height-sync seed RPC disabled` on a host without an oracle (or the fault `seedRpcOff`).
 *     No nonce is spent and nothing is applied.
 *   POST sessions/:id/verify-error-miss  owner only, a bound session (else 404 `session not found`);
 *     body {inference_id, diffs?, finish_tx (base64 DevshardTx), response_payload (base64)};
 *     400 `invalid json` · 400 `decode diff i: …`; the diffs applied as catch-up (refusals ignored);
 *     200 {"accept":true,"signature":…,"voter_slot":N} or
 *     {"accept":false,"voter_slot":0,"mempool":[recovery txs],"reject_cause":"…"} (error-miss-vote.ts).
 * JSON answers are Go's writeJSON: `application/json`, no trailing newline.
 */
import { toBinary } from '@bufbuild/protobuf';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { DevshardTxSchema } from '../../../protocol/gen/devshard/v1/diff_pb.js';
import { faultFor } from '../faults.js';
import { signErrorMissAccept, verifyErrorMiss } from './error-miss-vote.js';
import { signedAnchor } from './height-section.js';
import { hasOracle, readOracle } from './host-stamps.js';
import { sendGoJson, sendHttpError } from './http-answers.js';
import type { ProtocolRouteContext } from './route-context.js';
import { bindOwnerSession, existingSessionForOwner } from './session-access.js';
import { recoveryTxsFor } from './timeout.js';
import { decodeTimeoutDiffs, HostHttpError, parseVerifyErrorMiss } from './wire.js';

const b64 = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64');
const bodyOf = (request: FastifyRequest): Uint8Array => (Buffer.isBuffer(request.body) ? new Uint8Array(request.body) : new Uint8Array(0));

export function v5Routes(app: FastifyInstance, ctx: ProtocolRouteContext): void {
  const nowSeconds = (): bigint => BigInt(Math.floor(ctx.now() / 1000));

  app.post<{ Params: { escrowId: string } }>('/sessions/:escrowId/height-sync', async (request, reply) => {
    try {
      bindOwnerSession(ctx, request.headers, request.params.escrowId, bodyOf(request), nowSeconds());
      if (!hasOracle(ctx.chain) || faultFor(ctx.faults, ctx.host.index)?.seedRpcOff === true) throw new HostHttpError(404, 'height-sync seed RPC disabled');
      const section = signedAnchor(readOracle(ctx.chain).header, { address: ctx.host.address, privateKey: ctx.host.privateKey, nowMs: ctx.now() });
      return sendGoJson(reply, section ? JSON.stringify({ height_sync: section }) : '{}');
    } catch (e) {
      return sendHttpError(reply, e);
    }
  });

  app.post<{ Params: { escrowId: string } }>('/sessions/:escrowId/verify-error-miss', async (request, reply) => {
    try {
      const body = bodyOf(request);
      const session = existingSessionForOwner(ctx, request.headers, request.params.escrowId, body, nowSeconds());
      const req = parseVerifyErrorMiss(body);
      if (req.rawDiffs.length > 0) session.applyCatchUp(decodeTimeoutDiffs(req.rawDiffs));
      const verdict = verifyErrorMiss(session, req.inferenceId, req.finishTx, req.responsePayload);
      if (verdict.accept) {
        const vote = signErrorMissAccept(session, req.inferenceId, verdict.responseHash);
        return sendGoJson(reply, JSON.stringify({ accept: true, signature: b64(vote.signature), voter_slot: vote.voterSlot }));
      }
      const mempool = recoveryTxsFor(session.mempoolTxs(), req.inferenceId).map((tx) => b64(toBinary(DevshardTxSchema, tx)));
      return sendGoJson(reply, JSON.stringify({ accept: false, voter_slot: 0, ...(mempool.length > 0 ? { mempool } : {}), reject_cause: verdict.cause }));
    } catch (e) {
      return sendHttpError(reply, e);
    }
  });
}
