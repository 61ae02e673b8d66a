import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { createHttpApp, type HttpAppOptions } from '../../src/http/app.js';
import { createAuthenticator } from '../../src/http/auth.js';
import { disabledGate, type DisabledState } from '../../src/http/disabled-gate.js';
import { createLogger } from '../../src/http/logger.js';
import { chatCompletionRequestSchema, normalizeChatRequest } from '../../src/http/schemas/chat.js';
import { createEscrowBodySchema, escrowIdParamsSchema, settingsBodySchema, settleBodySchema } from '../../src/http/schemas/admin.js';
import { sendEmptyNotFound } from '../../src/http/errors.js';

export const CLIENT_KEY = 'sk-' + 'c'.repeat(48);
export const ADMIN_KEY = 'sk-admin-' + 'a'.repeat(48);

/** Captures pino lines. */
export function captureLogs() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(...chunk.toString('utf8').split('\n').filter((l) => l !== ''));
      cb();
    },
  });
  return { lines, stream, parsed: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

/** An app with stand-in routes built from the building blocks, as the lead's routes will be. */
export function buildTestApp(opts: { disabled?: DisabledState; app?: HttpAppOptions } = {}) {
  const logs = captureLogs();
  const app: FastifyInstance = createHttpApp({ logger: createLogger({ level: 'info', stream: logs.stream }), ...opts.app });
  const auth = createAuthenticator({ adminApiKey: ADMIN_KEY, apiKeys: [CLIENT_KEY] });
  let disabled: DisabledState = opts.disabled ?? { enabled: false };
  app.addHook('onRequest', disabledGate(() => disabled));
  const settings = { default_request_max_tokens: 3072, request_max_tokens_cap: 4096 };

  app.post('/v1/chat/completions', { schema: { body: chatCompletionRequestSchema }, config: { auth: 'client' }, onRequest: auth.requireClientOrAdmin }, async (request) => {
    const n = normalizeChatRequest(request.body, settings);
    request.logFields.model = n.model;
    request.logFields.escrow_id = '7';
    request.logFields.nonce = 3;
    return { ok: true, max_tokens: n.maxTokens, input_tokens: n.inputTokens, auth: request.auth };
  });
  app.get('/v1/models', { onRequest: auth.requireClientOrAdmin }, async () => ({ object: 'list', data: [] }));
  app.get('/v1/status', async () => ({ runtimes: [], active_requests: 0 }));
  app.post('/v1/admin/escrows', { schema: { body: createEscrowBodySchema }, onRequest: auth.requireAdmin }, async (request) => {
    request.log.info({ body: request.body }, 'escrow requested');
    return { escrow_id: '1' };
  });
  app.post('/v1/admin/settings', { schema: { body: settingsBodySchema }, onRequest: auth.requireAdmin }, async (request) => {
    const body = request.body as { disabled?: DisabledState };
    if (body.disabled) disabled = { ...disabled, ...body.disabled };
    return { disabled };
  });
  app.post('/v1/admin/devshards/:id/settle', { schema: { params: escrowIdParamsSchema, body: settleBodySchema }, onRequest: auth.requireAdmin }, async (request) => ({ id: (request.params as { id: string }).id, body: request.body ?? null }));
  app.post('/devshard/:id/v1/finalize', { schema: { params: escrowIdParamsSchema }, onRequest: auth.requireAdmin }, async (request, reply) => {
    const { id } = request.params as { id: string };
    if (id === '') return sendEmptyNotFound(reply);
    return { escrow_id: id, version: 1, fees: '0' };
  });
  app.get('/boom', async () => {
    throw new Error('secret internal detail');
  });
  return { app, logs, setDisabled: (d: DisabledState) => (disabled = d) };
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
