/**
 * GET /v1/status (no auth; the container health check) and GET /metrics (admin), both served from
 * in-memory projections.
 */
import type { FastifyInstance } from 'fastify';
import type { GatewayPort } from '../../gateway/port.js';
import type { Authenticator } from '../auth.js';
import { PROMETHEUS_CONTENT_TYPE, type GatewayMetrics } from '../metrics.js';
import { doc } from '../openapi.js';

export function registerStatusRoutes(app: FastifyInstance, gateway: GatewayPort, metrics: GatewayMetrics, auth: Authenticator): void {
  app.get('/v1/status', { config: { auth: 'none' as const }, schema: doc({ summary: 'Gateway status (health check)', answers: { ok: { 200: { description: "devshardctl's status with ours beside it", body: 'Status' } } } }) }, async () => gateway.status());

  metrics.registry.onCollect(() => {
    // From scratch each scrape: an escrow removed since the last one leaves no stale series.
    metrics.escrowBalance.reset();
    metrics.escrowNonce.reset();
    metrics.escrowInFlight.reset();
    for (const e of gateway.liveEscrows()) {
      const labels = { escrow_id: e.escrowId, model: e.model };
      metrics.escrowBalance.set(labels, Number(BigInt(e.balance) - BigInt(e.reserved)));
      metrics.escrowNonce.set(labels, e.nonce);
      metrics.escrowInFlight.set(labels, e.inFlight);
    }
    const l = gateway.admission();
    metrics.activeRequests.set({}, l.active_requests);
    metrics.inputTokensInFlight.set({}, l.input_tokens_in_flight);
  });

  app.get('/metrics', { onRequest: auth.requireAdmin, config: { auth: 'admin' as const }, schema: doc({ summary: 'Prometheus metrics', answers: { ok: { 200: { description: 'Prometheus text exposition (0.0.4)', body: { 'text/plain': { type: 'string', description: 'Prometheus text format 0.0.4' } } } } } }) }, async (_request, reply) =>
    reply.type(PROMETHEUS_CONTENT_TYPE).send(await metrics.registry.render()),
  );
}
