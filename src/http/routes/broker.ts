/**
 * The OpenAI-compatible surface: POST /v1/chat/completions (whole or streamed) and GET /v1/models.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { clip, GatewayError } from '../../gateway/errors.js';
import type { ChatSession, GatewayPort } from '../../gateway/port.js';
import { CallController } from '../../network/call-signal.js';
import type { ChatChunk } from '../../network/port.js';
import type { Authenticator } from '../auth.js';
import { answerFor } from '../gateway-answers.js';
import type { GatewayMetrics } from '../metrics.js';
import { doc } from '../openapi.js';
import { chatCompletionRequestSchema, normalizeChatRequest } from '../schemas/chat.js';
import { awaitDelivery } from '../delivery.js';
import { openSse } from '../sse.js';

const OWNED_BY = 'gonka';
const UNKNOWN_MODEL = '(unknown)';

export function registerBrokerRoutes(app: FastifyInstance, gateway: GatewayPort, metrics: GatewayMetrics, auth: Authenticator): void {
  const startedAt = Math.floor(Date.now() / 1000);

  app.get('/v1/models', { onRequest: auth.requireClientOrAdmin, config: { auth: 'client' as const }, schema: doc({ summary: 'List the models this gateway serves', answers: { ok: { 200: { description: 'The served models', body: 'ModelList' } } } }) }, async () => ({
    object: 'list',
    data: gateway.servedModels().map((id) => ({ id, object: 'model', created: startedAt, owned_by: OWNED_BY })),
  }));

  // Requests the handler counted itself; the others (refused before it ran, or by the request's own
  // rules: 401 key, 400 body, 413, 415) are counted when their answer is sent, so
  // shardgate_chat_requests_total holds every chat request's outcome.
  const counted = new WeakSet<object>();
  const countRefused = (request: FastifyRequest, reply: FastifyReply, done: () => void): void => {
    if (!counted.has(request) && reply.statusCode >= 400) {
      const body = request.body as { model?: unknown } | undefined;
      const model = typeof body?.model === 'string' && gateway.isServedModel(body.model) ? body.model : UNKNOWN_MODEL;
      metrics.chatRequests.inc({ model, status: reply.statusCode });
      metrics.errors.inc({ model, code: request.logFields?.error_code ?? String(reply.statusCode) });
    }
    done();
  };

  app.post(
    '/v1/chat/completions',
    {
      onRequest: auth.requireClientOrAdmin,
      onResponse: countRefused,
      config: { auth: 'client' as const },
      schema: doc({
        body: chatCompletionRequestSchema,
        summary: 'Create a chat completion',
        answers: {
          ok: {
            200: {
              description: 'The completion (application/json), or with `stream: true` server-sent events (text/event-stream), one chunk per `data:` frame, ending with `data: [DONE]`.',
              body: { 'application/json': 'ChatCompletion', 'text/event-stream': 'ChatCompletionChunk' },
              headers: { 'x-devshard-escrow-id': 'The escrow that served the request.', 'x-devshard-nonce': 'Its nonce for this request.' },
            },
          },
          errors: {
            401: 'No key or an unknown key (`invalid_api_key`), or a client key on an `admin_only` model (`model_admin_only`); `WWW-Authenticate: Bearer`.',
            404: 'The gateway does not serve this model (`model_not_found`).',
            429: 'Over the admission limit: concurrent requests or input tokens in flight (`Retry-After: 1`).',
            502: 'The host failed or answered badly.',
            503: 'No devshard can take the request now (none routable, balance too low, settle window closed, PoC).',
            504: 'The host did not answer in time.',
          },
        },
      }),
    },
    async (request, reply) => {
      const started = process.hrtime.bigint();
      const req = normalizeChatRequest(request.body, gateway.chatSettings());
      request.logFields.model = clip(req.model);
      request.logFields.stream = req.stream;
      const caller = request.auth?.kind === 'admin' ? { kind: 'admin' as const } : { kind: 'client' as const, keyId: request.auth?.keyId ?? 'unknown' };
      // The client leaving cancels the host request; usage delivered so far is still billed.
      const abort = new CallController();
      request.onClientGone = () => abort.abort(new Error('client disconnected'));
      // A metric label is a served model id or '(unknown)': a client's made-up model names must not
      // make series without bound.
      const model = gateway.isServedModel(req.model) ? req.model : UNKNOWN_MODEL;
      const observe = (status: number, usage?: { prompt_tokens: number; completion_tokens: number }) => {
        counted.add(request);
        metrics.chatRequests.inc({ model, status });
        metrics.chatLatency.observe({ model, stream: String(req.stream) }, Number(process.hrtime.bigint() - started) / 1e9);
        if (usage) {
          metrics.tokens.inc({ model, kind: 'prompt' }, usage.prompt_tokens);
          metrics.tokens.inc({ model, kind: 'completion' }, usage.completion_tokens);
          request.logFields.prompt_tokens = usage.prompt_tokens;
          request.logFields.completion_tokens = usage.completion_tokens;
        }
      };

      let session: ChatSession;
      try {
        session = await gateway.openChat({ req, caller, requestId: request.id, signal: abort.signal, controller: abort });
      } catch (err) {
        if (err instanceof GatewayError) {
          const answer = answerFor(err);
          metrics.errors.inc({ model, code: answer.code ?? String(answer.status) });
          observe(answer.status);
        }
        throw err;
      }
      request.logFields.escrow_id = session.escrowId;
      request.logFields.nonce = session.nonce;
      reply.header('x-devshard-escrow-id', session.escrowId);
      reply.header('x-devshard-nonce', String(session.nonce));

      const result = session.result;
      if (result.kind === 'completion') {
        const usage = result.completion.usage;
        // Durable before the body leaves: a client that got the whole answer finds it in the log.
        await session.record({ usage });
        // The slot is held until the answer left the process (a client that does not read keeps it).
        const delivered = awaitDelivery(reply.raw, { slowClientTimeoutMs: app.clientLimits.slowClientTimeoutMs, onSlowClient: () => (request.logFields.error_code = 'slow_client') });
        // The host's own text when it already names the model the client asked for (saves a serialization).
        if (result.text !== undefined && result.completion.model === req.model) reply.type('application/json; charset=utf-8').send(result.text);
        else reply.send({ ...result.completion, model: req.model });
        const ok = await delivered;
        // The host executed it whole: it ends finished (billed as its Finish says) whether or not the
        // client took the bytes; only the status says the client did not (499).
        session.end({ usage });
        observe(ok ? 200 : 499, usage);
        return reply;
      }

      // The request (and its concurrency slot) ends when the answer left the process, not when the
      // host finished: an unread stream holds its slot, and is cut after slowClientTimeoutMs.
      const sse = openSse(reply, { keepAliveMs: 10_000, slowClientTimeoutMs: app.clientLimits.slowClientTimeoutMs, onSlowClient: () => (request.logFields.error_code = 'slow_client') });
      // The request's log line is written at 'close', which can come before the outcome is recorded.
      const logUsage = (usage: { prompt_tokens: number; completion_tokens: number }) => {
        request.logFields.prompt_tokens = usage.prompt_tokens;
        request.logFields.completion_tokens = usage.completion_tokens;
      };
      sse.signal.addEventListener('abort', () => abort.abort(new Error('client disconnected')), { once: true });
      try {
        for await (const chunk of result.chunks) {
          if (isUsageOnly(chunk) && !req.includeUsage) continue;
          if (!(await sse.send({ ...chunk, model: req.model }))) break;
        }
      } catch (err) {
        const failure = gateway.streamFailure(err, result.usage());
        const usage = failure.usage;
        const apiError = answerFor(failure.error);
        metrics.errors.inc({ model, code: apiError.code ?? 'stream_error' });
        request.logFields.error_code = apiError.code ?? undefined;
        // Headers are gone already: the error travels as a last SSE frame, like OpenAI's; the
        // outcome is durable before it leaves.
        logUsage(usage);
        await session.record({ usage, error: err instanceof Error ? err.message : String(err) });
        await sse.send(apiError.toBody());
        sse.end();
        await sse.delivered();
        session.end({ usage, error: err instanceof Error ? err.message : String(err) });
        observe(apiError.status, usage);
        return reply;
      }
      const usage = result.usage();
      logUsage(usage);
      // The completion is durable before its last byte ([DONE]) leaves: a client that got the
      // whole answer always finds it in the log, even when the process dies right after.
      if (!sse.closed) {
        await session.record({ usage });
        sse.done();
      }
      if (!(await sse.delivered())) {
        session.end({ usage, error: sse.slowClientCut ? 'client too slow: unsent bytes not taken in time' : 'client disconnected' });
        observe(499, usage);
        return reply;
      }
      session.end({ usage });
      observe(200, usage);
      return reply;
    },
  );
}

function isUsageOnly(chunk: ChatChunk): boolean {
  return chunk.choices.length === 0 && !!chunk.usage;
}
