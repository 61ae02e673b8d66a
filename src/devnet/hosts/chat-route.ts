/**
 * `POST {prefix}/devshard/v1/sessions/{escrow_id}/chat/completions` of one simulated host.
 *
 * Checks, in order (each failure is an OpenAI-style error body):
 * 1. the escrow exists (404 escrow_not_found) and is not settled (409 escrow_settled);
 * 2. this host holds one of its slots (403 not_a_slot_holder);
 * 3. signature headers present and well-formed (401 missing_signature), timestamp within 30 s of the
 *    host clock (401 stale_timestamp), creator key known (401 unknown_creator_key), signature valid
 *    over sha256(escrow_id || raw body || timestamp u64 BE) (401 invalid_signature);
 * 4. X-Devshard-Nonce present (400 missing_nonce) and this host is the executor, the holder of
 *    slot[nonce % slots] in the escrow's slot order (421 wrong_executor: "Misdirected Request",
 *    the request is fine but was sent to the wrong host; the message names the right slot);
 * 5. the body is a chat request for the escrow's model (400 invalid_json / invalid_request /
 *    model_mismatch).
 * Then the deterministic answer (completion-plan.ts) is written, and what was written is recorded
 * in the host's ledger under the executor slot.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { MAX_TIMESTAMP_DRIFT_SECONDS, NONCE_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, createSignatureVerifier } from '../../network/signature.js';
import { completionId, planOrRefuse, sendCompletion, sendFaultStatus, sendStream } from './answer.js';
import type { DevnetChainView, HostIdentity } from './chain-view.js';
import { faultFor, type HostFaults } from './faults.js';
import type { HostLedger } from './ledger.js';
import { sendError } from './openai-error.js';

export interface ChatRouteContext {
  chain: DevnetChainView;
  host: HostIdentity;
  ledger: HostLedger;
  tokenDelayMs: number;
  faults: HostFaults;
  now: () => number;
  verifier: ReturnType<typeof createSignatureVerifier>;
  open: Set<ServerResponse>;
}

const header = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);

export function chatRoute(app: FastifyInstance, ctx: ChatRouteContext): void {
  app.post<{ Params: { escrowId: string } }>('/devshard/v1/sessions/:escrowId/chat/completions', async (request, reply) => {
    const { escrowId } = request.params;
    const escrow = ctx.chain.escrow(escrowId);
    if (!escrow) return sendError(reply, 404, `escrow ${escrowId} not found`, 'escrow_not_found');
    if (escrow.settled) return sendError(reply, 409, `escrow ${escrowId} is settled`, 'escrow_settled');
    if (!escrow.slots.some((s) => s.host === ctx.host.address)) {
      return sendError(reply, 403, `host ${ctx.host.address} holds no slot of escrow ${escrowId}`, 'not_a_slot_holder');
    }

    const sig = header(request.headers[SIGNATURE_HEADER]);
    const tsText = header(request.headers[TIMESTAMP_HEADER]);
    if (!sig || !tsText || !/^\d{1,15}$/.test(tsText)) {
      return sendError(reply, 401, 'missing or malformed X-Devshard-Signature / X-Devshard-Timestamp headers', 'missing_signature');
    }
    const ts = Number(tsText);
    const drift = Math.abs(Math.floor(ctx.now() / 1000) - ts);
    if (drift > MAX_TIMESTAMP_DRIFT_SECONDS) {
      return sendError(reply, 401, `request timestamp is ${drift} s away from the host clock (max ${MAX_TIMESTAMP_DRIFT_SECONDS} s)`, 'stale_timestamp');
    }
    const pubKey = ctx.chain.pubKeyOf(escrow.creator);
    if (!pubKey) return sendError(reply, 401, `public key of creator ${escrow.creator} is not known`, 'unknown_creator_key');
    const raw = request.body as Buffer;
    if (!ctx.verifier.verify(pubKey, escrowId, raw, ts, sig)) {
      return sendError(reply, 401, "signature does not match the escrow creator's key", 'invalid_signature');
    }

    const nonceText = header(request.headers[NONCE_HEADER]);
    if (!nonceText || !/^\d{1,15}$/.test(nonceText)) return sendError(reply, 400, 'missing or malformed X-Devshard-Nonce header', 'missing_nonce');
    const nonce = Number(nonceText);
    const executor = escrow.slots[nonce % escrow.slots.length]!;
    if (executor.host !== ctx.host.address) {
      return sendError(reply, 421, `nonce ${nonce} is executed by slot ${executor.slotId} (${executor.url}), not by this host`, 'wrong_executor');
    }

    let body: Record<string, unknown>;
    try {
      body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
    } catch {
      return sendError(reply, 400, 'request body is not valid JSON', 'invalid_json');
    }
    if (!body || typeof body !== 'object' || Array.isArray(body)) return sendError(reply, 400, 'request body must be a JSON object', 'invalid_request');
    if (body.model !== escrow.modelId) {
      return sendError(reply, 400, `escrow ${escrowId} serves model ${escrow.modelId}, not ${String(body.model)}`, 'model_mismatch', 'model');
    }
    const plan = planOrRefuse(reply, body);
    if (!plan) return reply;

    const fault = faultFor(ctx.faults, ctx.host.index);
    if (fault?.failStatus !== undefined) return sendFaultStatus(reply, fault);
    const tokenPrice = ctx.chain.tokenPrice();
    const answer = {
      id: completionId(),
      model: escrow.modelId,
      created: Math.floor(ctx.now() / 1000),
      includeUsage: (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true,
      tokenDelayMs: ctx.tokenDelayMs,
      ...(fault ? { fault } : {}),
      open: ctx.open,
      onDone: (w: { completionTokens: number; complete: boolean }) =>
        ctx.ledger.record(escrowId, executor.slotId, { promptTokens: plan.promptTokens, completionTokens: w.completionTokens, complete: w.complete, tokenPrice }),
    };
    if (body.stream === true) await sendStream(reply, plan, answer);
    else await sendCompletion(reply, plan, answer);
    return reply;
  });
}
