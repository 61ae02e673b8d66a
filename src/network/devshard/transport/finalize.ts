/**
 * Finalizing an escrow's session over the protocol and collecting the slots' signatures of its
 * settlement (gonka user/session.go `Finalize`; ProtocolTransport.finalize).
 */
import type { FinalizedSession, RequestSigner } from '../../port.js';
import { HostError } from '../../port.js';
import { buildSettlement, settlementFileJson, settlementSignatureValid } from '../../../protocol/index.js';
import { sessionUrl } from '../request-body.js';
import type { TransportContext } from './context.js';
import type { SessionFor } from './session-opening.js';
import { syncHost } from './catch-up.js';
import { messageOf } from './host-requests.js';

export async function finalizeSession(ctx: TransportContext, sessionFor: SessionFor, escrowId: string, signer: RequestSigner, o: { signatureWaitMs?: number } = {}): Promise<FinalizedSession> {
  const { agent, now, stallTimeoutMs } = ctx;
  const s = await sessionFor({ escrowId, signer });
  const failures: string[] = [];
  for (let step = s.nextFinalizeDiff(); step; step = s.nextFinalizeDiff()) {
    await Promise.all(step.recorded);
    for (const url of s.hosts()) {
      try {
        await syncHost(ctx, s, url);
      } catch (err) {
        failures.push(`nonce ${step.diff.nonce}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  }
  // Finalize diffs composed before a restart (a crash between recording and sending them) need no
  // new step, but a host may never have received them: without them it has nothing to sign.
  for (const url of s.hosts()) {
    if (s.catchUpCount(url) === 0) continue;
    try {
      await syncHost(ctx, s, url);
    } catch (err) {
      failures.push(`nonce ${s.latestNonce}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  const settlement = buildSettlement(s.replica, s.latestNonce);
  const slots = s.escrow.slots;
  const quorum = Math.floor((2 * slots.length) / 3) + 1;
  const signed = new Map<number, Uint8Array>();
  /** Per host, why its last answer gave no valid signature (named if the wait ends short). */
  const answers = new Map<string, string>();
  const deadline = now() + (o.signatureWaitMs ?? 10_000);
  for (;;) {
    for (const url of s.hosts()) {
      try {
        const target = new URL(`${sessionUrl(url, escrowId, 'signatures', s.protocol.route)}?nonce=${settlement.nonce}`);
        const res = await agent.request({ origin: target.origin, path: target.pathname + target.search, method: 'GET', signal: AbortSignal.timeout(stallTimeoutMs) });
        const text = await res.body.text();
        if (res.statusCode !== 200) {
          answers.set(url, `${url} answered ${res.statusCode}: ${messageOf(text)}`);
          continue;
        }
        const got = (JSON.parse(text) as { signatures?: Record<string, string> }).signatures ?? {};
        if (Object.keys(got).length === 0) answers.set(url, `${url} had no signature yet`);
        for (const [slotText, b64] of Object.entries(got)) {
          const slot = Number(slotText);
          if (!Number.isInteger(slot) || slot < 0 || slot >= slots.length || signed.has(slot)) continue;
          const sig = new Uint8Array(Buffer.from(b64, 'base64'));
          if (settlementSignatureValid(settlement, slots[slot]!.host, sig)) signed.set(slot, sig);
          else answers.set(url, `${url}: slot ${slot}'s signature is not over this settlement`);
        }
      } catch (err) {
        answers.set(url, `${url}: ${err instanceof Error ? err.message : String(err)}`); // asked again on the next round
      }
    }
    if (signed.size === slots.length || (signed.size >= quorum && now() >= deadline)) break;
    if (now() >= deadline) {
      // Why hosts did not reach the settlement nonce, when a sync failed: the first few failures.
      const reasons = [...failures, ...answers.values()];
      const why = reasons.length > 0 ? `; ${reasons.slice(0, 4).join('; ')}${reasons.length > 4 ? ` (and ${reasons.length - 4} more)` : ''}` : '';
      throw new HostError('rejected', `settlement of escrow ${escrowId} at nonce ${settlement.nonce}: ${signed.size} of ${slots.length} slots signed, ${quorum} needed${why}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const signatures = [...signed].map(([slotId, signature]) => ({ slotId, signature })).sort((a, b) => a.slotId - b.slotId);
  return { settlement, signatures, file: settlementFileJson(settlement, signatures), failures };
}
