/**
 * Writes a planned completion as OpenAI does: one JSON `chat.completion`, or an SSE stream of
 * `chat.completion.chunk`s — role chunk first, content deltas (or tool-call deltas carrying
 * `index`, the first with id, type and name), a chunk with finish_reason and an empty delta, a
 * usage chunk (`choices: []`) when `stream_options.include_usage`, then `data: [DONE]`. Token
 * chunks are spaced by `tokenDelayMs`. Faults (faults.ts) are applied here. Reports how many
 * completion tokens were actually written, so the ledger bills what left the host.
 */
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyReply } from 'fastify';
import { countCompletionTokens } from '../../network/tokens.js';
import { PlanError, planCompletion, type CompletionPlan } from './completion-plan.js';
import type { HostFaults } from './faults.js';
import { errorBody, sendError } from './openai-error.js';

export interface AnswerContext {
  id: string;
  model: string;
  created: number;
  includeUsage: boolean;
  tokenDelayMs: number;
  fault?: HostFaults;
  /** Responses still open (so the server can end stalled ones when it closes). */
  open: Set<ServerResponse>;
  /** Called once, when the answer is over: completion tokens written, and whether all of it was. */
  onDone(written: { completionTokens: number; complete: boolean }): void;
}

/** Longest a stall fault holds a connection whose client never leaves. */
const MAX_STALL_MS = 10 * 60_000;

function usageOf(plan: CompletionPlan) {
  return {
    prompt_tokens: plan.promptTokens,
    completion_tokens: plan.completionTokens,
    total_tokens: plan.promptTokens + plan.completionTokens,
  };
}

export function completionBody(plan: CompletionPlan, ctx: Pick<AnswerContext, 'id' | 'model' | 'created'>) {
  const message: Record<string, unknown> = { role: 'assistant', content: plan.toolCall ? null : plan.content, refusal: null };
  if (plan.toolCall) {
    message.tool_calls = [{ id: plan.toolCall.id, type: 'function', function: { name: plan.toolCall.name, arguments: plan.toolCall.arguments } }];
  }
  return {
    id: ctx.id,
    object: 'chat.completion' as const,
    created: ctx.created,
    model: ctx.model,
    system_fingerprint: 'fp_simulated',
    choices: [{ index: 0, message, logprobs: null, finish_reason: plan.finishReason }],
    usage: usageOf(plan),
  };
}

/** Resolves when the response's connection is gone (or the server closes it). */
function closedPromise(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    if (res.destroyed) resolve();
    else res.once('close', () => resolve());
  });
}

async function applyLatency(res: ServerResponse, fault: HostFaults | undefined): Promise<boolean> {
  if (!fault?.latencyMs) return true;
  await Promise.race([sleep(fault.latencyMs), closedPromise(res)]);
  return !res.destroyed;
}

/** Answers with a fault status (no tokens served). */
/** The completion planned for `body`, or undefined after answering the request's 400. */
/**
 * A new completion id per answer, as OpenAI gives (clients use it to tell answers apart): the text
 * stays a function of the request (completion-plan.ts), the id does not.
 */
export function completionId(): string {
  return `chatcmpl-${randomBytes(12).toString('hex')}`;
}

export function planOrRefuse(reply: FastifyReply, body: Record<string, unknown>): CompletionPlan | undefined {
  try {
    return planCompletion(body);
  } catch (err) {
    if (!(err instanceof PlanError)) throw err;
    sendError(reply, 400, err.message, 'invalid_request', err.param ?? null);
    return undefined;
  }
}

export function sendFaultStatus(reply: FastifyReply, fault: HostFaults): void {
  const status = fault.failStatus!;
  void reply.code(status).type('application/json').send(errorBody(status, fault.failMessage ?? 'simulated host fault', 'simulated_fault'));
}

export async function sendCompletion(reply: FastifyReply, plan: CompletionPlan, ctx: AnswerContext): Promise<void> {
  const res = reply.raw;
  const fault = ctx.fault;
  if (fault?.stallAfterChunks !== undefined || fault?.truncateAfterChunks !== undefined || fault?.latencyMs) reply.hijack();
  if (!(await applyLatency(res, fault))) {
    ctx.onDone({ completionTokens: 0, complete: false });
    return;
  }
  if (fault?.stallAfterChunks !== undefined) {
    ctx.open.add(res);
    await Promise.race([closedPromise(res), sleep(MAX_STALL_MS)]);
    ctx.open.delete(res);
    if (!res.destroyed) res.destroy();
    ctx.onDone({ completionTokens: 0, complete: false });
    return;
  }
  const json = JSON.stringify(completionBody(plan, ctx));
  if (fault?.truncateAfterChunks !== undefined) {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(json) });
    res.write(json.slice(0, Math.floor(json.length / 2)), () => res.destroy());
    ctx.onDone({ completionTokens: 0, complete: false });
    return;
  }
  if (fault?.latencyMs) {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(json) });
    res.end(json);
  } else {
    void reply.type('application/json; charset=utf-8').send(json);
  }
  ctx.onDone({ completionTokens: plan.completionTokens, complete: true });
}

export async function sendStream(reply: FastifyReply, plan: CompletionPlan, ctx: AnswerContext): Promise<void> {
  reply.hijack();
  const res = reply.raw;
  const fault = ctx.fault;
  ctx.open.add(res);
  const closed = closedPromise(res);
  let gone = false;
  void closed.then(() => {
    gone = true;
  });
  let contentChars = 0;
  let nameChars = 0;
  let argChars = 0;
  let events = 0;
  let complete = false;
  const base = `{"id":${JSON.stringify(ctx.id)},"object":"chat.completion.chunk","created":${ctx.created},"model":${JSON.stringify(ctx.model)},"system_fingerprint":"fp_simulated",`;
  const usageTail = ctx.includeUsage ? ',"usage":null}' : '}';
  const choice = (delta: unknown, finish: string | null): string =>
    `${base}"choices":[{"index":0,"delta":${JSON.stringify(delta)},"logprobs":null,"finish_reason":${finish === null ? 'null' : JSON.stringify(finish)}}]${usageTail}`;

  /** Writes one SSE event; false when the stream is over for us (client gone, or a fault). */
  const emit = async (data: string): Promise<boolean> => {
    if (gone || res.destroyed) return false;
    if (fault?.stallAfterChunks !== undefined && events >= fault.stallAfterChunks) {
      await Promise.race([closed, sleep(MAX_STALL_MS)]);
      return false;
    }
    if (fault?.truncateAfterChunks !== undefined && events >= fault.truncateAfterChunks) {
      res.end(); // a clean end of the HTTP body, but no [DONE]: the stream is truncated
      return false;
    }
    events++;
    if (!res.write(`data: ${data}\n\n`)) await Promise.race([new Promise((r) => res.once('drain', r)), closed]);
    return !gone;
  };
  const pause = async (): Promise<boolean> => {
    if (ctx.tokenDelayMs > 0) await Promise.race([sleep(ctx.tokenDelayMs), closed]);
    return !gone;
  };

  try {
    if (!(await applyLatency(res, fault))) return;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    const role = plan.toolCall ? { role: 'assistant', content: null, refusal: null } : { role: 'assistant', content: '', refusal: null };
    if (!(await emit(choice(role, null)))) return;
    if (plan.toolCall) {
      const head = { tool_calls: [{ index: 0, id: plan.toolCall.id, type: 'function', function: { name: plan.toolCall.name, arguments: '' } }] };
      if (!(await pause()) || !(await emit(choice(head, null)))) return;
      nameChars = plan.toolCall.name.length;
      for (const piece of plan.pieces) {
        if (!(await pause()) || !(await emit(choice({ tool_calls: [{ index: 0, function: { arguments: piece } }] }, null)))) return;
        argChars += piece.length;
      }
    } else {
      for (const piece of plan.pieces) {
        if (!(await pause()) || !(await emit(choice({ content: piece }, null)))) return;
        contentChars += piece.length;
      }
    }
    if (!(await emit(choice({}, plan.finishReason)))) return;
    if (ctx.includeUsage) {
      const usage = JSON.stringify(usageOf(plan));
      if (!(await emit(`${base}"choices":[],"usage":${usage}}`))) return;
    }
    if (!(await emit('[DONE]'))) return;
    complete = true;
    res.end();
  } finally {
    ctx.open.delete(res);
    if (!complete && !res.writableEnded && !res.destroyed) res.destroy();
    ctx.onDone({
      completionTokens: countCompletionTokens(contentChars, plan.toolCall ? [{ nameChars, argChars }] : undefined),
      complete,
    });
  }
}
