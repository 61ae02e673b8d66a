/**
 * The console's data routes (admin key only, documented in /openapi.json): each answers one view
 * of the projections or of the log, read a page at a time where the log is long.
 */
import type { FastifyInstance } from 'fastify';
import type { GatewayPort } from '../gateway/port.js';
import { ApiError } from '../http/api-error.js';
import type { Authenticator } from '../http/auth.js';
import { doc } from '../http/openapi.js';
import { escrowIdParamsSchema } from '../http/schemas/admin.js';
import { escrowRows } from './escrow-rows.js';
import { LiveFeed } from './live-feed.js';
import type { ConsoleLog } from './log-source.js';
import { overview } from './overview.js';
import { explainRequestFromLog } from './request-explain.js';
import { rotationByModel } from './rotation-view.js';
import { balanceSeries } from './series.js';
import { escrowStateAt } from './state-at.js';
import { parseCursor, TIMELINE_MAX_LIMIT, timelinePage, timelineStreams } from './timeline-page.js';
import { verifyEscrow } from './verify-escrow.js';

export const CONSOLE_API = '/v1/admin/console';

const json = (description: string, properties: Record<string, unknown> = {}) => ({ 'application/json': { type: 'object', description, properties } });
const text = { type: 'string' } as const;
const digits = { type: 'string', pattern: '^[0-9]{1,12}$' } as const;

type Id = { id: string };

/** The log is what most views read: a gateway whose routes were given none answers 503. */
export type LogOf = () => ConsoleLog;

export function registerConsoleRoutes(app: FastifyInstance, gateway: GatewayPort, auth: Authenticator, logOf: LogOf): void {
  const admin = { onRequest: auth.requireAdmin, config: { auth: 'admin' as const } };
  let feed: LiveFeed | undefined;
  // Before the server waits for its connections to end: an open live page would hold it until the shutdown deadline.
  app.addHook('preClose', async () => feed?.closeAll());

  const streamsOr404 = async (id: string) => {
    const streams = await timelineStreams(logOf(), id);
    if (!streams) throw new ApiError(404, `No escrow ${id} in this gateway's log.`, { code: 'devshard_not_found', param: 'id' });
    return streams;
  };

  app.get(`${CONSOLE_API}/overview`, { ...admin, schema: doc({
    summary: 'Console: kill switch, access modes, limits, capacity, rotation per model',
    answers: { ok: { 200: { description: 'What the Overview page shows', body: json('kill_switch, models, settings (access modes, limits, rotation), admission counts, status (capacity), rotation debug', { kill_switch: { type: 'object' }, models: { type: 'array' }, settings: { type: 'object' }, admission: { type: 'object' }, status: { type: 'object' }, rotation: { type: 'object' } }) } } },
  }) }, async () => overview(gateway));

  app.get(`${CONSOLE_API}/escrows`, { ...admin, schema: doc({
    summary: 'Console: escrow rows (filter by model and state)',
    querystring: { type: 'object', properties: { model: text, state: text } },
    answers: { ok: { 200: { description: 'One row per escrow: id, model, protocol version, state, balance and usable balance, nonce, in flight, epoch, prune warning, hosts', body: json('{object: list, data: rows, models, states}', { data: { type: 'array' } }) } } },
  }) }, async (request) => {
    const q = request.query as { model?: string; state?: string };
    return escrowRows(gateway, { model: q.model || undefined, state: q.state || undefined });
  });

  app.get(`${CONSOLE_API}/escrows/:id/timeline`, { ...admin, schema: doc({
    params: escrowIdParamsSchema,
    querystring: { type: 'object', properties: { after: { type: 'string', pattern: '^[0-9]+(\\.[0-9]+){0,2}$' }, before: { type: 'string', pattern: '^(end|[0-9]+(\\.[0-9]+){0,2})$' }, limit: { type: 'string', pattern: '^[0-9]{1,4}$' } } },
    summary: "Console: an escrow's timeline, one page by position",
    description: `Lifecycle events, diffs (nonce, root, txs), host txs, finalize rounds, the settlement and its signatures, chain txs, each with its time and causation; merged from the escrow's intent, own and devshard session streams. Page forward with \`after\`, backward with \`before\` (\`end\`: the newest page); at most ${TIMELINE_MAX_LIMIT} events a page.`,
    answers: { ok: { 200: { description: 'One page', body: json('{escrow_id, streams, total, entries, before, after}', { entries: { type: 'array' }, total: { type: 'integer' }, before: { type: ['string', 'null'] }, after: { type: ['string', 'null'] } }) } } },
  }) }, async (request) => {
    const { id } = request.params as Id;
    const q = request.query as { after?: string; before?: string; limit?: string };
    const streams = await streamsOr404(id);
    const cursor = (name: 'after' | 'before', v: string | undefined) => {
      const c = parseCursor(v, streams.length);
      if (v !== undefined && !c) throw new ApiError(400, `Invalid value for '${name}': a cursor from a previous page of this escrow.`, { param: name, code: 'invalid_value' });
      return c;
    };
    const limit = q.limit === undefined ? undefined : Number(q.limit);
    if (q.before !== undefined) return timelinePage(logOf(), id, streams, { before: q.before === 'end' ? 'end' : cursor('before', q.before)!, ...(limit ? { limit } : {}) });
    return timelinePage(logOf(), id, streams, { ...(q.after !== undefined ? { after: cursor('after', q.after)! } : {}), ...(limit ? { limit } : {}) });
  });

  app.get(`${CONSOLE_API}/escrows/:id/series`, { ...admin, schema: doc({
    params: escrowIdParamsSchema,
    summary: "Console: an escrow's balance, reserved amount and nonce over time",
    answers: { ok: { 200: { description: 'Points (at most 1,000, thinned)', body: json('{escrow_id, deposit, points: [{position, t, balance, reserved, nonce, in_flight}], total}', { points: { type: 'array' } }) } } },
  }) }, async (request) => {
    const { id } = request.params as Id;
    await streamsOr404(id);
    return balanceSeries(logOf(), id);
  });

  app.get(`${CONSOLE_API}/escrows/:id/state`, { ...admin, schema: doc({
    params: escrowIdParamsSchema,
    querystring: { type: 'object', required: ['position'], properties: { position: digits } },
    summary: "Console: time travel, an escrow's state at a position (replay --until)",
    answers: { ok: { 200: { description: "The escrow's statechart state and money at that position, and the replay's last rows", body: json('{escrow_id, position, state, last, events}', { state: { type: ['object', 'null'] }, last: { type: 'array' } }) } } },
  }) }, async (request) => {
    const { id } = request.params as Id;
    const streams = await streamsOr404(id);
    return escrowStateAt(logOf(), id, streams, Number((request.query as { position: string }).position));
  });

  app.get(`${CONSOLE_API}/escrows/:id/verify`, { ...admin, schema: doc({
    params: escrowIdParamsSchema,
    summary: "Console: verify's verdict for one escrow",
    answers: { ok: { 200: { description: "Hashes and versions of its events, its devshard session replayed, its settlement's signatures", body: json('{escrow_id, ok, events, checked, failures, warnings, devshard}', { ok: { type: 'boolean' }, failures: { type: 'array' } }) } } },
  }) }, async (request) => {
    const { id } = request.params as Id;
    return verifyEscrow(logOf(), id, await streamsOr404(id));
  });

  app.get(`${CONSOLE_API}/rotation`, { ...admin, schema: doc({
    querystring: { type: 'object', properties: { model: text } },
    summary: 'Console: explain rotation, per model',
    answers: { ok: { 200: { description: 'Each model\'s rotation cycles and depletion replacements, failures with their log marker and what to do', body: json('{models: [{model, cycles, replacements, text}]}', { models: { type: 'array' } }) } } },
  }) }, async (request) => {
    const { model } = request.query as { model?: string };
    return rotationByModel(logOf(), model || undefined);
  });

  app.get(`${CONSOLE_API}/requests/:id`, { ...admin, schema: doc({
    params: { type: 'object', required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 200 } } },
    summary: 'Console: explain request, by request id or completion id',
    answers: { ok: { 200: { description: "The request's records, its diffs and what the settlement pays its executor", body: json('{request_id, completion_id, escrow_id, nonce, gateway, devshard, settlement, billing}', { request_id: text, completion_id: text, escrow_id: text, nonce: { type: 'integer' }, gateway: { type: 'array' }, devshard: { type: ['object', 'null'] }, settlement: { type: ['object', 'null'] }, billing: { type: 'object' } }) } }, errors: { 404: 'No such request in the log (`request_not_found`).' } },
  }) }, async (request) => {
    const { id } = request.params as Id;
    const x = await explainRequestFromLog(logOf(), id);
    if (!x) throw new ApiError(404, `No request ${id.slice(0, 200)} in this gateway's log: give an x-request-id or a completion id (devshard-<escrow>-<nonce>).`, { code: 'request_not_found', param: 'id' });
    return x;
  });

  app.get(`${CONSOLE_API}/live`, { ...admin, schema: doc({
    querystring: { type: 'object', properties: { escrow: { type: 'string', pattern: '^[0-9]{1,20}$' } } },
    summary: 'Console: live events (server-sent events)',
    description: 'Every event committed from now on, as `data: {"type":"event","event":{...}}` frames (first `{"type":"hello","position":N}`; `{"type":"gap","dropped":N}` when this client fell more than 1,000 events behind). Read it with fetch and the Authorization header (EventSource cannot send one).',
    answers: { ok: { 200: { description: 'The event stream', body: { 'text/event-stream': { type: 'string' } } } } },
  }) }, async (request, reply) => {
    feed ??= new LiveFeed(logOf());
    feed.open(reply, (request.query as { escrow?: string }).escrow);
  });

}
