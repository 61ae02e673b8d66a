/**
 * v5 idle heartbeats, as the network's gateway runs them (Z5 user/heartbeat.go): an escrow whose
 * session has composed no diff for GATEWAY_HEARTBEAT_IDLE_MS (12 s there), and has a floor, gets a
 * span: one payload-less diff per slot, each with a MsgHeartbeat, the first opening a forced turn.
 * The hosts answer with signed acks, which one more diff carries. Busy escrows need none (their
 * diffs carry the hosts' stamps), finalizing ones get none.
 *
 * The span's nonces are taken like a chat's: reserved (NonceLeases), then recorded as used by the
 * span (NoncesSkipped, reason "heartbeat span") before any diff is composed, so a crash mid-span
 * leaves no gap or reuse: the next run rebuilds the session from the recorded diffs and fills a
 * nonce that was recorded but never composed with an empty diff. A chat that took the nonce first
 * makes the statechart refuse the span, which waits for the next quiet period.
 */
import { newEvent } from '../../events/catalog.js';
import type { EventMetadata } from '../../events/envelope.js';
import { rulesOf } from '../../protocol/versions.js';
import type { GatewayContext } from '../context.js';
import { TransitionRefused } from '../write/engine.js';
import { escrowProtocol } from '../escrows/protocol.js';

const META: EventMetadata = { actor: { kind: 'heartbeat-task' } };

export interface HeartbeatTask {
  /** One pass over the escrows (tests drive it); answers the spans sent. */
  tick(): Promise<number>;
  stop(): Promise<void>;
}

/** Reserves `count` nonces after the escrow's last used one and records them as the span's; undefined when refused. */
async function takeNonces(ctx: GatewayContext, escrowId: string, count: number): Promise<{ from: number; upTo: number } | undefined> {
  const c = ctx.engine.escrow(escrowId)?.context;
  if (!c || c.inFlight > 0) return undefined;
  const from = c.nonce + 1;
  const upTo = from + count - 1;
  if (upTo >= c.routingStop) return undefined;
  const reserving = ctx.nonces.ensure(escrowId, upTo, META);
  if (reserving) await reserving;
  try {
    await ctx.engine.decideEscrow('escrow', escrowId, [newEvent('NoncesSkipped', { from, upTo, reason: 'heartbeat span' }, META)]);
  } catch (err) {
    if (err instanceof TransitionRefused) return undefined;
    throw err;
  }
  return { from, upTo };
}

/** One span on one escrow when it is due; true when sent. */
async function spanOnce(ctx: GatewayContext, escrowId: string, idleMs: number): Promise<boolean> {
  const net = ctx.network;
  if (!net.heartbeatDue || !net.heartbeatSpan || !net.flush) return false;
  const need = net.heartbeatDue(escrowId, idleMs);
  if (need === undefined) return false;
  const creator = ctx.engine.escrow(escrowId)?.context.creator;
  const signer = creator ? ctx.keyring.signerFor(creator) : undefined;
  if (!signer) return false;
  const span = await takeNonces(ctx, escrowId, need);
  if (!span) return false;
  const { acks } = await net.heartbeatSpan(escrowId, signer, BigInt(span.from), BigInt(span.upTo));
  if (acks > 0) {
    const flush = await takeNonces(ctx, escrowId, 1);
    if (flush) await net.flush(escrowId, signer, BigInt(flush.from));
  }
  return true;
}

export function startHeartbeats(ctx: GatewayContext, opts: { idleMs: number; intervalMs?: number }): HeartbeatTask {
  let running: Promise<number> | undefined;
  let stopped = false;
  const pass = async (): Promise<number> => {
    let sent = 0;
    for (const e of ctx.projections.pool.all()) {
      if (stopped) break;
      if (e.state !== 'active' || !ctx.ownership.owns(e.escrowId) || rulesOf(escrowProtocol(ctx.engine, e.escrowId)) !== 'v5') continue;
      try {
        if (await spanOnce(ctx, e.escrowId, opts.idleMs)) sent++;
      } catch (err) {
        ctx.logger.warn({ err, escrow_id: e.escrowId }, 'heartbeat span failed; the next quiet period tries again');
      }
    }
    return sent;
  };
  // One pass at a time. Cleared in a callback, never inside the pass: a pass with nothing to await
  // ends synchronously, and clearing there would run before `running` is set (it stayed set for good).
  const tick = (): Promise<number> => {
    if (running) return running;
    const p = pass();
    running = p;
    void p.finally(() => {
      if (running === p) running = undefined;
    });
    return p;
  };
  const timer = opts.idleMs > 0 ? setInterval(() => void tick(), opts.intervalMs ?? Math.max(1_000, Math.floor(opts.idleMs / 4))) : undefined;
  timer?.unref();
  return {
    tick,
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      await running;
    },
  };
}
