/**
 * `POST {prefix}/devshard/v1/sessions/{escrow_id}/sign` of one simulated host (our design):
 * body `{ state_root, nonce, slot_id?, host_stats: [{ slot_id, cost, ... }] }`, answer
 * `{ slot_id, signature }` — base64 64-byte r||s over sha256(state root bytes) with the host key.
 *
 * Rule: the host signs only a claim it can vouch for. The cost claimed for its slot must lie
 * between the cost of the requests it completed (`confirmedCost`) and the cost of everything it
 * wrote (`cost`, which adds requests cut short, whose delivered part only the gateway knows). With
 * no interrupted request the two are equal and the claim must match its tally exactly. Otherwise
 * 409 `cost_mismatch`, saying what it served. Also: 404 escrow_not_found, 403 not_a_slot_holder
 * (slot_id given but not this host's), 409 missing_host_stat, 400 for a malformed body.
 */
import type { FastifyInstance } from 'fastify';
import type { DevnetChainView, HostIdentity } from './chain-view.js';
import type { HostLedger } from './ledger.js';
import { sendError } from './openai-error.js';
import { signStateRoot } from '../../network/settlement-signature.js';

function toBigInt(v: unknown): bigint | undefined {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  if (typeof v === 'string' && /^\d{1,30}$/.test(v)) return BigInt(v);
  return undefined;
}

export function signRoute(app: FastifyInstance, ctx: { chain: DevnetChainView; host: HostIdentity; ledger: HostLedger }): void {
  app.post<{ Params: { escrowId: string } }>('/devshard/v1/sessions/:escrowId/sign', async (request, reply) => {
    const { escrowId } = request.params;
    let body: { state_root?: unknown; nonce?: unknown; slot_id?: unknown; host_stats?: unknown };
    try {
      body = JSON.parse((request.body as Buffer).toString('utf8')) as typeof body;
    } catch {
      return sendError(reply, 400, 'request body is not valid JSON', 'invalid_json');
    }
    if (!body || typeof body.state_root !== 'string' || !/^([0-9a-fA-F]{2})+$/.test(body.state_root)) {
      return sendError(reply, 400, 'state_root must be a hex string', 'invalid_request', 'state_root');
    }
    if (!Array.isArray(body.host_stats)) return sendError(reply, 400, 'host_stats must be an array', 'invalid_request', 'host_stats');
    const escrow = ctx.chain.escrow(escrowId);
    if (!escrow) return sendError(reply, 404, `escrow ${escrowId} not found`, 'escrow_not_found');
    const mine = escrow.slots.filter((s) => s.host === ctx.host.address);
    const slot = body.slot_id === undefined ? mine[0] : mine.find((s) => s.slotId === body.slot_id);
    if (!slot) {
      return sendError(reply, 403, `host ${ctx.host.address} does not hold slot ${String(body.slot_id ?? '(any)')} of escrow ${escrowId}`, 'not_a_slot_holder');
    }
    const stat = (body.host_stats as { slot_id?: unknown; cost?: unknown }[]).find((s) => s && s.slot_id === slot.slotId);
    if (!stat) return sendError(reply, 409, `host_stats has no entry for slot ${slot.slotId}`, 'missing_host_stat');
    const claimed = toBigInt(stat.cost);
    if (claimed === undefined) return sendError(reply, 400, `host_stats cost of slot ${slot.slotId} must be a non-negative integer`, 'invalid_request');
    const served = ctx.ledger.tally(escrowId, slot.slotId);
    if (claimed < served.confirmedCost || claimed > served.cost) {
      const range = served.confirmedCost === served.cost ? `${served.cost}` : `between ${served.confirmedCost} and ${served.cost}`;
      const how = claimed < served.confirmedCost ? 'under-states' : 'over-states';
      // The served amounts are also given as fields, so a gateway can reconcile (e.g. after its crash).
      return reply.code(409).send({
        error: {
          message: `claimed cost ${claimed} for slot ${slot.slotId} ${how} what this host served: ${range} (${served.requests} requests, ${served.interrupted} cut short)`,
          type: 'invalid_request_error',
          param: 'host_stats',
          code: 'cost_mismatch',
        },
        served: {
          slot_id: slot.slotId,
          cost: served.cost.toString(),
          confirmed_cost: served.confirmedCost.toString(),
          requests: served.requests,
          interrupted: served.interrupted,
        },
      });
    }
    return reply.send({ slot_id: slot.slotId, signature: signStateRoot(ctx.host.privateKey, body.state_root) });
  });
}
