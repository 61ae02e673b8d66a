/**
 * The simulated model as a plain OpenAI-compatible server (no escrow, no signatures): POST
 * `{prefix}/chat/completions` and GET `{prefix}/models`. For the upstream mode's tests and for
 * benchmarks that need a canned OpenAI server. Same answers, streaming and faults as the hosts.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { completionId, planOrRefuse, sendCompletion, sendFaultStatus, sendStream } from './answer.js';
import { faultFor, type HostFaults } from './faults.js';
import { sendError } from './openai-error.js';

export interface SimulatedOpenAiOptions {
  /** Mount point; default `/v1`. */
  prefix?: string;
  tokenDelayMs?: number;
  /** When set, requests must carry `Authorization: Bearer <apiKey>` (401 otherwise). */
  apiKey?: string;
  /** Model ids served; default: any model is accepted and /models lists `simulated-model`. */
  models?: string[];
  faults?: HostFaults;
}

export function registerSimulatedOpenAi(app: FastifyInstance, opts: SimulatedOpenAiOptions = {}): { faults: HostFaults } {
  const faults = opts.faults ?? {};
  const open = new Set<ServerResponse>();
  void app.register(
    async (child) => {
      child.addHook('onClose', async () => {
        for (const res of open) res.destroy();
      });
      child.addHook('onRequest', async (request, reply) => {
        if (opts.apiKey && request.headers.authorization !== `Bearer ${opts.apiKey}`) {
          return sendError(reply, 401, 'Incorrect API key provided', 'invalid_api_key');
        }
      });
      child.get('/models', async () => ({
        object: 'list',
        data: (opts.models ?? ['simulated-model']).map((id) => ({ id, object: 'model', created: 0, owned_by: 'shardgate-devnet' })),
      }));
      child.post('/chat/completions', async (request, reply) => {
        const body = request.body as Record<string, unknown>;
        if (!body || typeof body !== 'object' || Array.isArray(body)) return sendError(reply, 400, 'request body must be a JSON object', 'invalid_request');
        if (typeof body.model !== 'string' || (opts.models && !opts.models.includes(body.model))) {
          return sendError(reply, 404, `The model ${String(body.model)} does not exist`, 'model_not_found', 'model');
        }
        const plan = planOrRefuse(reply, body);
        if (!plan) return reply;
        const fault = faultFor(faults, 0);
        if (fault?.failStatus !== undefined) return sendFaultStatus(reply, fault);
        const answer = {
          id: completionId(),
          model: body.model,
          created: Math.floor(Date.now() / 1000),
          includeUsage: (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true,
          tokenDelayMs: opts.tokenDelayMs ?? 0,
          ...(fault ? { fault } : {}),
          open,
          onDone: () => {},
        };
        if (body.stream === true) await sendStream(reply, plan, answer);
        else await sendCompletion(reply, plan, answer);
        return reply;
      });
    },
    { prefix: opts.prefix ?? '/v1' },
  );
  return { faults };
}
