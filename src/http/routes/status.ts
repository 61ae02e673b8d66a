/**
 * GET /v1/status (no auth; the container health check) and GET /metrics (admin), both served from
 * in-memory projections.
 */
import { doc } from '../openapi.js';
import type { FastifyInstance } from 'fastify';
import type { GatewayContext } from '../../gateway/context.js';
import type { Authenticator } from '../auth.js';
import { PROMETHEUS_CONTENT_TYPE } from '../metrics.js';

/**
 * devshardctl's two /v1/status shapes in one (gonka devshard/cmd/devshardctl): the pooled one
 * always (gateway.go handlePooledStatus: mode, devshards, limiter, capacity, runtimes), and, with
 * exactly one devshard loaded, also that runtime's own top-level fields (proxy.go handleStatus,
 * statusResponse: escrow_id, nonce, phase, balance, requests_blocked, block_reason, config), so
 * scripts written for either work. Ours beside them.
 */
export function statusDocument(ctx: GatewayContext) {
  const price = ctx.chainInfo.tokenPrice;
  const doc = ctx.projections.status.snapshot(price);
  const limiter = ctx.limiter.counts();
  const devshards = doc.devshards;
  const base = {
    ...doc,
    // The limiter counts every admitted chat request, including those still reserving a nonce.
    active_requests: Math.max(doc.active_requests, limiter.active_requests),
    instance: ctx.config.server.instanceName,
    chain_id: ctx.config.chain.chainId,
    mode: ctx.config.mode.kind,
    limiter,
  };
  const only = devshards.length === 1 ? devshards[0]! : undefined;
  const singleId = ctx.config.mode.kind === 'single' ? ctx.config.mode.escrowId : only?.id;
  if (!only || singleId !== only.id) return singleId === undefined ? base : { ...base, escrow_id: singleId };
  return {
    ...base,
    // proxy.go statusResponse: escrow_id is a string there.
    escrow_id: only.id,
    nonce: only.nonce,
    phase: only.phase ?? 'active',
    balance: only.balance,
    requests_blocked: only.requests_blocked,
    ...(only.block_reason ? { block_reason: only.block_reason } : {}),
    // statusSessionConfig: the session's chain parameters this gateway knows.
    config: { token_price: Number(price) },
  };
}

export function registerStatusRoutes(app: FastifyInstance, ctx: GatewayContext, auth: Authenticator): void {
  app.get('/v1/status', { config: { auth: 'none' as const }, schema: doc({ summary: 'Gateway status (health check)' }) }, async () => statusDocument(ctx));

  ctx.metrics.registry.onCollect(() => {
    // From scratch each scrape: an escrow removed since the last one leaves no stale series.
    ctx.metrics.escrowBalance.reset();
    ctx.metrics.escrowNonce.reset();
    ctx.metrics.escrowInFlight.reset();
    for (const e of ctx.projections.pool.all()) {
      if (e.state === 'removed') continue;
      const labels = { escrow_id: e.escrowId, model: e.model };
      ctx.metrics.escrowBalance.set(labels, Number(BigInt(e.balance) - BigInt(e.reserved)));
      ctx.metrics.escrowNonce.set(labels, e.nonce);
      ctx.metrics.escrowInFlight.set(labels, e.inFlight);
    }
    const l = ctx.limiter.counts();
    ctx.metrics.activeRequests.set({}, l.active_requests);
    ctx.metrics.inputTokensInFlight.set({}, l.input_tokens_in_flight);
  });

  app.get('/metrics', { onRequest: auth.requireAdmin, config: { auth: 'admin' as const }, schema: doc({ summary: 'Prometheus metrics' }) }, async (_request, reply) =>
    reply.type(PROMETHEUS_CONTENT_TYPE).send(await ctx.metrics.registry.render()),
  );
}
