/**
 * What a real host answers around its versioned protocol routes, beside them on the same prefix:
 *
 * - `/devshard/…` reaches versiond (nginx `location /devshard/` proxies to it with the prefix
 *   stripped: gonka 59b1ee7e proxy/entrypoint.sh), which takes the first segment as the version
 *   and forwards the rest to that version's devshardd, mounted at the root (59b1ee7e
 *   versioned/internal/proxy/proxy.go `Handler`, decentralized-api/cmd/devshardd/main.go):
 *     `/devshard/`            400 `version prefix required` (Go http.Error: text/plain, a newline)
 *     `/devshard/<unserved>…` 404 `version "<name>" not found`
 *     `/devshard/healthz`     versiond's own status, `[{"name","port","status"}]` (versioned/internal/
 *                             health/health.go; ports from BasePort 5000 in order, status "running")
 *     `/devshard/<v>/healthz` the devshardd's `ok`; any other path of a served version it does not
 *                             route: echo's 404 `{"message":"Not Found"}`
 *   and the versionless observability GETs `/devshard/sessions/{id}/diffs|mempool|signatures`
 *   (Z5 devshard/paths.go; zpoken/gonka@89ff8bdb versioned/internal/proxy/proxy.go
 *   `isVersionlessObsPath`, `serveVersionlessObs` with a session-version lookup): answered by the
 *   version the escrow's session is bound to on this host (the newest, if several), or Go's
 *   `404 page not found` when none is. Not simulated: `/devshard/stats/…`, `/devshard/metrics`.
 * - `/v1/devshard` and `/v1/devshard/*`, the host API's removed embedded devshard, answer 410 with
 *   the host API's exact answer (`legacyRouteGone`), unless the legacy route is kept.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { LEGACY_ROUTE_PREFIX } from '../../../protocol/versions.js';
import type { HostIdentity } from '../chain-view.js';
import { sendHttpError, sessionGet, SESSION_GETS } from './routes.js';
import type { HostSessions } from './session.js';

/**
 * The host API's answer to the retired prefix, from gonka 59b1ee7e
 * decentralized-api/internal/server/public/server.go `legacyDevshardDeprecated` (registered with
 * `e.Any` on "/v1/devshard" and "/v1/devshard/*"), pinned by its devshard_deprecation_test.go:
 * `c.JSON(http.StatusGone, map…)`, which echo v4.15.1 writes as `application/json` with Go's
 * encoding/json (keys sorted, a trailing newline; indented by two spaces with `?pretty`).
 */
export const LEGACY_GONE = Object.freeze({
  status: 410,
  deprecation: 'true',
  link: '</devshard/{version}>; rel="successor-version"',
  error: 'deprecated',
  message: '/v1/devshard is deprecated; use /devshard/{version}',
});

/** versiond's first child port (59b1ee7e versioned/internal/config/config.go BasePort). */
const VERSIOND_BASE_PORT = 5000;

/** Go's `%q` of a string (strconv.Quote), for the printable text a path segment is. */
export function goQuote(s: string): string {
  const named: Record<string, string> = { '\x07': '\\a', '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\v': '\\v', '"': '\\"', '\\': '\\\\' };
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (named[ch]) out += named[ch];
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

/** Go's `http.Error`: text/plain, nosniff, the text and a newline. */
function goHttpError(reply: FastifyReply, status: number, text: string): FastifyReply {
  return reply.code(status).header('content-type', 'text/plain; charset=utf-8').header('x-content-type-options', 'nosniff').send(`${text}\n`);
}

/** echo's `c.JSON`: Go's encoding of `value`, a newline; indented with `?pretty`. */
function echoJson(reply: FastifyReply, request: FastifyRequest, status: number, value: unknown): FastifyReply {
  const pretty = new URLSearchParams(request.url.split('?')[1] ?? '').has('pretty');
  return sendJsonText(reply.code(status), `${pretty ? JSON.stringify(value, null, 2) : JSON.stringify(value)}\n`);
}

/** `application/json` exactly, as Go writes it (fastify would add a charset to a string body). */
function sendJsonText(reply: FastifyReply, text: string): FastifyReply {
  return reply.header('content-type', 'application/json').send(Buffer.from(text, 'utf8'));
}

/** A parser for any body the handlers here never read (versiond and echo answer these without reading it). */
function ignoreBodies(app: FastifyInstance, bodyLimit: number): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, (_req, _body, done) => done(null, undefined));
}

/** `/v1/devshard` and `/v1/devshard/*`, any method: 410 with the host API's headers and body. */
export function legacyRouteGone(app: FastifyInstance, bodyLimit: number): void {
  ignoreBodies(app, bodyLimit);
  const gone = async (request: FastifyRequest, reply: FastifyReply) =>
    echoJson(reply.header('deprecation', LEGACY_GONE.deprecation).header('link', LEGACY_GONE.link), request, LEGACY_GONE.status, { error: LEGACY_GONE.error, message: LEGACY_GONE.message });
  app.all(LEGACY_ROUTE_PREFIX, gone);
  app.all(`${LEGACY_ROUTE_PREFIX}/*`, gone);
}

export interface VersiondContext {
  host: HostIdentity;
  sessions: HostSessions;
  /** The versions this host serves, as versiond's route table has them. */
  versions: readonly string[];
  bodyLimit: number;
}

/** versiond's answers under `/devshard` that no served version's routes take (register with prefix `/devshard`). */
export function versiondRoutes(app: FastifyInstance, ctx: VersiondContext): void {
  ignoreBodies(app, ctx.bodyLimit);

  for (const kind of SESSION_GETS) {
    app.get<{ Params: { escrowId: string }; Querystring: Record<string, string | undefined> }>(`/sessions/:escrowId/${kind}`, async (request, reply) => {
      const { escrowId } = request.params;
      const bound = ctx.sessions.versionsOf(ctx.host.index, escrowId).find((v) => ctx.versions.includes(v));
      if (bound === undefined) return goHttpError(reply, 404, '404 page not found');
      try {
        return reply.type('application/json').send(sessionGet(kind, ctx.sessions.get(ctx.host, escrowId, bound), request.query));
      } catch (e) {
        return sendHttpError(reply, e);
      }
    });
  }

  app.all('/*', async (request, reply) => {
    const path = (request.params as { '*': string })['*'];
    if (path === '') return goHttpError(reply, 400, 'version prefix required');
    if (path === 'healthz') {
      const status = ctx.versions.map((name, i) => ({ name, port: VERSIOND_BASE_PORT + i, status: 'running' }));
      return sendJsonText(reply, `${JSON.stringify(status)}\n`);
    }
    const slash = path.indexOf('/');
    const version = slash < 0 ? path : path.slice(0, slash);
    const rest = slash < 0 ? '/' : path.slice(slash);
    if (!ctx.versions.includes(version)) return goHttpError(reply, 404, `version ${goQuote(version)} not found`);
    if (rest === '/healthz' && (request.method === 'GET' || request.method === 'HEAD')) return reply.header('content-type', 'text/plain; charset=UTF-8').send('ok');
    return echoJson(reply, request, 404, { message: 'Not Found' });
  });
}
