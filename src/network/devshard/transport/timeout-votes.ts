/**
 * The timeout sweep (ProtocolTransport.sweepTimeouts): the other hosts vote on each inference of
 * ours past its refusal or execution timeout (POST verify-timeout); with enough accepting votes a
 * MsgTimeoutInference is queued for the escrow's next diff.
 */
import type { DevshardSession } from '../session.js';
import { verifyTimeoutJson } from '../request-body.js';
import type { TransportContext } from './context.js';
import { postSessionRoute } from './host-requests.js';

/** One host's vote on a timeout, or undefined (refused, unreachable, rejected). */
async function vote(ctx: TransportContext, s: DevshardSession, url: string, nonce: bigint, reason: 'refused' | 'execution', payload: Parameters<typeof verifyTimeoutJson>[3]) {
  const body = Buffer.from(verifyTimeoutJson(s.catchUp(url), nonce, reason, reason === 'refused' ? payload : undefined), 'utf8');
  try {
    const { status, text } = await postSessionRoute(ctx, s, url, 'verify-timeout', body);
    if (status !== 200) return undefined;
    const v = JSON.parse(text) as { accept?: unknown; signature?: unknown; voter_slot?: unknown };
    if (v.accept !== true || typeof v.signature !== 'string' || typeof v.voter_slot !== 'number') return undefined;
    return { voterSlot: v.voter_slot, signature: new Uint8Array(Buffer.from(v.signature, 'base64')) };
  } catch {
    return undefined;
  }
}

/** One round over every open session; answers how many timeouts were queued. */
export async function sweepTimeoutVotes(ctx: TransportContext): Promise<number> {
  let queued = 0;
  const nowS = BigInt(Math.floor(ctx.now() / 1000));
  for (const s of ctx.sessions.values()) {
    for (const c of s.timeoutCandidates(nowS)) {
      const voters = s.hosts().filter((u) => u !== c.executorUrl);
      const votes = (await Promise.all(voters.map((u) => vote(ctx, s, u, c.nonce, c.reason, c.payload)))).filter((v) => v !== undefined);
      if (s.enoughVotes(votes.length)) {
        s.addTimeout(c.nonce, c.reason, votes);
        queued++;
      }
    }
  }
  return queued;
}
