/**
 * Bearer-key authentication. A presented key is first looked up by its exact text among the
 * configured ones (the hot path: a valid key), else compared as a sha256 digest with every
 * configured key's, with crypto.timingSafeEqual; neither way leaks the content or the length of a
 * configured key through response timing (see `classify`). A client
 * is known to the rest of the system only by a key id (`key-` + 8 hex of sha256(key)): that is what
 * goes into events and logs, never the key.
 */
import { hash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, errors } from './api-error.js';
import { sendApiError } from './errors.js';

export type AuthContext =
  | { kind: 'admin'; keyId: 'admin' }
  | { kind: 'client'; keyId: string }
  | { kind: 'none'; keyId: null; reason: 'missing' | 'malformed' | 'unknown' };

export interface AuthKeys {
  /** DEVSHARD_ADMIN_API_KEY; undefined/empty: no admin access at all. */
  adminApiKey?: string | undefined;
  /** DEVSHARD_API_KEYS. */
  apiKeys: readonly string[];
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hooks (requireAdmin / requireClientOrAdmin / authenticate). */
    auth?: AuthContext;
  }
}

// One-shot hash: about half the cost of createHash().update().digest() per request.
const sha256 = (s: string): Buffer => hash('sha256', s, 'buffer') as unknown as Buffer;

/** Stable, non-secret id of a key for logs and events. */
export function keyId(key: string): string {
  return `key-${sha256(key).toString('hex').slice(0, 8)}`;
}

/** Constant-time equality of two strings (digests are compared, so lengths do not leak). */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(sha256(a), sha256(b));
}

/** The key of an `Authorization: Bearer <key>` header; null when missing, '' when malformed. */
export function bearerToken(header: string | string[] | undefined): string | null {
  if (header === undefined) return null;
  const value = Array.isArray(header) ? header[0] ?? '' : header;
  const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(value);
  return m?.[1] ?? '';
}

/**
 * A hook usable as `onRequest` (recommended: refuses before the body is read or validated, so a
 * stranger gets 401, never schema hints or a 413) or as `preHandler`.
 */
/** An onRequest hook in callback style (an async hook costs a promise and a microtask per request). */
export type AuthHook = (request: FastifyRequest, reply: FastifyReply, done: () => void) => void;

export interface Authenticator {
  /** Who sent this Authorization header. Every configured key is compared (no early exit). */
  classify(header: string | string[] | undefined): AuthContext;
  /** preHandler: admin key only (/v1/admin/*, /v1/debug/*, /devshard/*, /v1/finalize). */
  requireAdmin: AuthHook;
  /** preHandler: a client key or the admin key (chat, models). */
  requireClientOrAdmin: AuthHook;
  /** preHandler: classify only, never refuse (public routes that show more to admins). */
  authenticate: AuthHook;
}

export function createAuthenticator(keys: AuthKeys): Authenticator {
  // Digests computed once; comparisons then cost the same for every request.
  const admin = keys.adminApiKey ? sha256(keys.adminApiKey) : undefined;
  const clients = keys.apiKeys.filter((k) => k !== '').map((k) => ({ digest: sha256(k), id: keyId(k) }));
  // The configured keys by their text, admin last so it wins as in the digest path. A Map lookup
  // hashes the whole presented token and compares text only with an entry of the same 32-bit
  // hash, so a near miss (a right prefix, a right length) is never compared with a key. It spares
  // a valid key the sha256 (~3–5 µs per request under load); a miss still takes the digest path.
  const known = new Map<string, AuthContext>();
  for (const k of keys.apiKeys) if (k !== '') known.set(k, Object.freeze({ kind: 'client', keyId: keyId(k) }));
  if (keys.adminApiKey) known.set(keys.adminApiKey, Object.freeze({ kind: 'admin', keyId: 'admin' }));

  const classify = (header: string | string[] | undefined): AuthContext => {
    const token = bearerToken(header);
    if (token === null) return { kind: 'none', keyId: null, reason: 'missing' };
    if (token === '') return { kind: 'none', keyId: null, reason: 'malformed' };
    const hit = known.get(token);
    if (hit) return hit;
    const digest = sha256(token);
    const isAdmin = admin !== undefined && timingSafeEqual(digest, admin);
    let client: string | undefined;
    for (const c of clients) if (timingSafeEqual(digest, c.digest) && client === undefined) client = c.id;
    if (isAdmin) return { kind: 'admin', keyId: 'admin' };
    if (client !== undefined) return { kind: 'client', keyId: client };
    return { kind: 'none', keyId: null, reason: 'unknown' };
  };

  const refuse = (reply: FastifyReply, ctx: AuthContext, adminNeeded: boolean): FastifyReply => {
    let err: ApiError;
    if (ctx.kind === 'none' && ctx.reason === 'missing') {
      err = errors.unauthorized("You didn't provide an API key. Send it as `Authorization: Bearer <API_KEY>`.");
    } else if (ctx.kind === 'client' && adminNeeded) {
      err = errors.unauthorized('This route requires an admin API key (DEVSHARD_ADMIN_API_KEY).');
    } else {
      err = errors.unauthorized();
    }
    return sendApiError(reply, err);
  };

  const attach = (request: FastifyRequest): AuthContext => {
    const ctx = classify(request.headers.authorization);
    request.auth = ctx;
    if (ctx.keyId) request.logFields.key_id = ctx.keyId;
    return ctx;
  };

  return {
    classify,
    // A refusal sends the reply and does not call done (fastify's callback-style early answer).
    requireAdmin(request, reply, done) {
      const ctx = attach(request);
      if (ctx.kind !== 'admin') refuse(reply, ctx, true);
      else done();
    },
    requireClientOrAdmin(request, reply, done) {
      const ctx = attach(request);
      if (ctx.kind === 'none') refuse(reply, ctx, false);
      else done();
    },
    authenticate(request, _reply, done) {
      attach(request);
      done();
    },
  };
}
