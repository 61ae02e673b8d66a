/**
 * Opening an escrow's session, once per escrow: its chain facts, what an earlier run recorded (the
 * log: reads that may go to a database server, so each callback may answer a promise), the
 * session's hooks, a v5 session's height seed, then `onSessionOpened`, all before the session is
 * handed out.
 */
import type { ChatCall } from '../../port.js';
import { HostError } from '../../port.js';
import { rulesOf } from '../../../protocol/index.js';
import { DevshardSession } from '../session.js';
import { HeightSeed, type HeightSeedStatus } from '../height-seed.js';
import type { TransportContext } from './context.js';
import { seedHost } from './height-seed-request.js';

export type SessionFor = (call: Pick<ChatCall, 'escrowId' | 'signer'>) => Promise<DevshardSession>;

/** The escrow's session, opened once even when several calls ask for it at the same time. */
export function sessionOpener(ctx: TransportContext): SessionFor {
  const { sessions } = ctx;
  /**
   * Escrow → its opening under way. Set synchronously by the first call (before any await), so a
   * second call finds it and waits on the same opening; deleted once it settled, after which the
   * session is in `sessions` (or, when it failed, the next call tries again).
   */
  const opening = new Map<string, Promise<DevshardSession>>();
  return async function sessionFor(call) {
    const s = sessions.get(call.escrowId);
    if (s) return s;
    let p = opening.get(call.escrowId);
    if (!p) {
      p = openSession(ctx, call).finally(() => opening.delete(call.escrowId));
      opening.set(call.escrowId, p);
    }
    return p;
  };
}

async function openSession(ctx: TransportContext, call: Pick<ChatCall, 'escrowId' | 'signer'>): Promise<DevshardSession> {
  const { opts, now, lastDiffAt, seeds, sessions } = ctx;
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
    const seed = new HeightSeed(s.hosts(), (url) => seedHost(ctx, s, url), {
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
