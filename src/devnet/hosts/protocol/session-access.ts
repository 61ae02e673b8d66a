/**
 * How a v5 host finds the session a request names (zpoken/gonka@86cff503 devshard/server/routes.go
 * `RegisterLazySessionRoutes`, `withOwnerChat`, `withSessionAuth`, `withSession`,
 * `sessionHTTPError`; the host manager's `BindOwnerChat`, `SessionServerExisting`):
 * - chat/completions and height-sync bind: the request signature is checked (auth.ts's 401s), then
 *   the session is the bound one or a new one from the chain's escrow; a signer other than the
 *   escrow's creator is 403 `restricted to escrow owner` (members included);
 * - every other route resolves only a session already bound on this host: none is
 *   404 `session not found`, before any signature check; POSTs then need a group member or the
 *   creator (403 `sender not in group`), and the handlers the creator.
 * Older versions keep their own lookup (a session is opened by any route).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { HostIdentity } from '../chain-view.js';
import { recoverRequestSigner, requireOwner } from './auth.js';
import type { HostSession, HostSessions } from './session.js';
import { HostHttpError } from './wire.js';

export interface AccessContext {
  host: HostIdentity;
  sessions: HostSessions;
  version: string;
}

/** `BindOwnerChat`: the owner's session, bound now if it was not. */
export function bindOwnerSession(ctx: AccessContext, headers: IncomingHttpHeaders, escrowId: string, body: Uint8Array, nowSeconds: bigint): HostSession {
  const signer = recoverRequestSigner(headers, escrowId, body, nowSeconds);
  const bound = ctx.sessions.existing(ctx.host, escrowId, ctx.version);
  if (bound) {
    if (signer !== bound.escrow.creator) throw new HostHttpError(403, 'restricted to escrow owner');
    return bound;
  }
  const escrow = ctx.sessions.escrowOf(escrowId);
  if (escrow && signer !== escrow.creator) throw new HostHttpError(403, 'restricted to escrow owner');
  return ctx.sessions.get(ctx.host, escrowId, ctx.version);
}

/** `SessionServerExisting`, as `sessionHTTPError` answers its absence. */
export function existingSession(ctx: AccessContext, escrowId: string): HostSession {
  const s = ctx.sessions.existing(ctx.host, escrowId, ctx.version);
  if (!s) throw new HostHttpError(404, 'session not found');
  return s;
}

/** `withSessionAuth` then the handler's owner check: the bound session, for its creator only. */
export function existingSessionForOwner(ctx: AccessContext, headers: IncomingHttpHeaders, escrowId: string, body: Uint8Array, nowSeconds: bigint): HostSession {
  const session = existingSession(ctx, escrowId);
  requireOwner(recoverRequestSigner(headers, escrowId, body, nowSeconds), session.escrow.creator, session.groupAddresses);
  return session;
}
