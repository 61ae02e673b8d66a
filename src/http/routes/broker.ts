/**
 * The OpenAI-compatible surface: POST /v1/chat/completions (whole or streamed) and GET /v1/models.
 */
import { doc } from '../openapi.js';
import type { FastifyInstance } from 'fastify';
import type { GatewayContext } from '../../gateway/context.js';
import { openChat, hostFailure, type ChatSession } from '../../gateway/chat.js';
import { isServedModel, servedModels } from '../../gateway/models.js';
import { CallController } from '../../network/call-signal.js';
import { HostError, type ChatChunk } from '../../network/port.js';
import type { Authenticator } from '../auth.js';
import { ApiError, clip } from '../errors.js';
import { chatCompletionRequestSchema, normalizeChatRequest } from '../schemas/chat.js';
import { openSse } from '../sse.js';

const OWNED_BY = 'gonka';
const UNKNOWN_MODEL = '(unknown)';

export function registerBrokerRoutes(app: FastifyInstance, ctx: GatewayContext, auth: Authenticator): void {
  const startedAt = Math.floor(Date.now() / 1000);

  app.get('/v1/models', { onRequest: auth.requireClientOrAdmin, config: { auth: 'client' as const }, schema: doc({ summary: 'List the models this gateway serves' }) }, async () => ({
    object: 'list',
    data: servedModels(ctx).map((id) => ({ id, object: 'model', created: startedAt, owned_by: OWNED_BY })),
  }));

  app.post(
    '/v1/chat/completions',
    { onRequest: auth.requireClientOrAdmin, config: { auth: 'client' as const }, schema: doc({ body: chatCompletionRequestSchema, summary: 'Create a chat completion' }) },
    async (request, reply) => {
      const started = process.hrtime.bigint();
      const req = normalizeChatRequest(request.body, ctx.projections.settings.current());
      request.logFields.model = clip(req.model);
      request.logFields.stream = req.stream;
      const caller = request.auth?.kind === 'admin' ? { kind: 'admin' as const } : { kind: 'client' as const, keyId: request.auth?.keyId ?? 'unknown' };
      // The client leaving cancels the host request; usage delivered so far is still billed.
      const abort = new CallController();
      request.onClientGone = () => abort.abort(new Error('client disconnected'));
      // A metric label is a served model id or '(unknown)': a client's made-up model names must not
      // make series without bound.
      const model = isServedModel(ctx, req.model) ? req.model : UNKNOWN_MODEL;
      const observe = (status: number, usage?: { prompt_tokens: number; completion_tokens: number }) => {
        ctx.metrics.chatRequests.inc({ model, status });
        ctx.metrics.chatLatency.observe({ model, stream: String(req.stream) }, Number(process.hrtime.bigint() - started) / 1e9);
        if (usage) {
          ctx.metrics.tokens.inc({ model, kind: 'prompt' }, usage.prompt_tokens);
          ctx.metrics.tokens.inc({ model, kind: 'completion' }, usage.completion_tokens);
          request.logFields.prompt_tokens = usage.prompt_tokens;
          request.logFields.completion_tokens = usage.completion_tokens;
        }
      };

      let session: ChatSession;
      try {
        session = await openChat(ctx, { req, caller, requestId: request.id, signal: abort.signal, controller: abort });
      } catch (err) {
        if (err instanceof ApiError) {
          ctx.metrics.errors.inc({ model, code: err.code ?? String(err.status) });
          observe(err.status);
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
        session.end({ usage });
        observe(200, usage);
        // The host's own text when it already names the model the client asked for (saves a serialization).
        if (result.text !== undefined && result.completion.model === req.model) return reply.type('application/json; charset=utf-8').send(result.text);
        return { ...result.completion, model: req.model };
      }

      const sse = openSse(reply, { keepAliveMs: 10_000 });
      sse.signal.addEventListener('abort', () => abort.abort(new Error('client disconnected')), { once: true });
      try {
        for await (const chunk of result.chunks) {
          if (isUsageOnly(chunk) && !req.includeUsage) continue;
          if (!(await sse.send({ ...chunk, model: req.model }))) break;
        }
      } catch (err) {
        const usage = err instanceof HostError && err.usageSoFar ? err.usageSoFar : result.usage();
        session.end({ usage, error: err instanceof Error ? err.message : String(err) });
        const apiError = hostFailure(err);
        ctx.metrics.errors.inc({ model, code: apiError.code ?? 'stream_error' });
        observe(apiError.status, usage);
        request.logFields.error_code = apiError.code ?? undefined;
        // Headers are gone already: the error travels as a last SSE frame, like OpenAI's.
        await sse.send(apiError.toBody());
        sse.end();
        return reply;
      }
      const usage = result.usage();
      if (sse.closed) {
        session.end({ usage, error: 'client disconnected' });
        observe(499, usage);
        return reply;
      }
      session.end({ usage });
      observe(200, usage);
      sse.done();
      return reply;
    },
  );
}

function isUsageOnly(chunk: ChatChunk): boolean {
  return chunk.choices.length === 0 && !!chunk.usage;
}
