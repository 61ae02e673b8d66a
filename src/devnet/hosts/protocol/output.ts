/**
 * The model's output as the executor host writes it between the receipt and the meta event, and
 * what its MsgFinishInference commits to (gonka 8a35022 decentralized-api/completionapi
 * responseprocessor.go, internal/devshard/shared_runtime.go):
 * - the completion `id` is replaced by `devshard-{escrow_id}-{inference_id}`; Go re-marshals each
 *   answer through a map, so keys come out sorted;
 * - the host rewrites the prompt with `stream_options.include_usage` for streams, so a streamed
 *   answer always ends with a usage chunk (the gateway strips it when the client did not ask);
 * - non-streamed: the whole `chat.completion` as one data event, then `[DONE]`;
 *   response_hash = sha256(the body bytes);
 * - streamed: the chunks, then `[DONE]`; response_hash = sha256(JSON `{"events":[…lines…]}`), the
 *   lines being `data: …` as written.
 * Token counts are the simulated model's (completion-plan.ts).
 */
import { sha256, utf8 } from '../../../protocol/bytes.js';
import { goStoredStreamForm } from '../../../protocol/error-answer.js';
import { completionBody } from '../answer.js';
import type { CompletionPlan } from '../completion-plan.js';

/** JSON with object keys sorted (Go's map marshalling). */
export function sortedJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(sortedJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${sortedJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

export const devshardCompletionId = (escrowId: string, inferenceId: bigint): string => `devshard-${escrowId}-${inferenceId}`;

export interface PlannedOutput {
  /** SSE data payloads, `[DONE]` last. */
  events: string[];
  /** The bytes response_hash covers. */
  hashed: string;
  /** What a retried request gets replayed (one data event). */
  cached: string;
}

export function plannedOutput(plan: CompletionPlan, o: { escrowId: string; inferenceId: bigint; model: string; created: number; stream: boolean }): PlannedOutput {
  const id = devshardCompletionId(o.escrowId, o.inferenceId);
  if (!o.stream) {
    const body = sortedJson(completionBody(plan, { id, model: o.model, created: o.created }));
    return { events: [body, '[DONE]'], hashed: body, cached: body };
  }
  const chunk = (choices: unknown[], usage: unknown = null) =>
    sortedJson({ id, object: 'chat.completion.chunk', created: o.created, model: o.model, system_fingerprint: 'fp_simulated', choices, usage });
  const choice = (delta: unknown, finish: string | null) => [{ index: 0, delta, logprobs: null, finish_reason: finish }];
  const events: string[] = [];
  if (plan.toolCall) {
    events.push(chunk(choice({ role: 'assistant', content: null, refusal: null }, null)));
    events.push(chunk(choice({ tool_calls: [{ index: 0, id: plan.toolCall.id, type: 'function', function: { name: plan.toolCall.name, arguments: '' } }] }, null)));
    for (const piece of plan.pieces) events.push(chunk(choice({ tool_calls: [{ index: 0, function: { arguments: piece } }] }, null)));
  } else {
    events.push(chunk(choice({ role: 'assistant', content: '', refusal: null }, null)));
    for (const piece of plan.pieces) events.push(chunk(choice({ content: piece }, null)));
  }
  events.push(chunk(choice({}, plan.finishReason)));
  events.push(chunk([], { prompt_tokens: plan.promptTokens, completion_tokens: plan.completionTokens, total_tokens: plan.promptTokens + plan.completionTokens }));
  events.push('[DONE]');
  // As a real host stores it: Go's json.Marshal, which escapes <, >, & (error-answer.ts).
  const hashed = goStoredStreamForm(events.map((e) => `data: ${e}`));
  return { events, hashed, cached: hashed };
}

export const responseHash = (out: PlannedOutput): Uint8Array => sha256(utf8(out.hashed));

/** The error a failing model ends its answer with (the OpenAI `{"error":{code,message,type}}` shape). */
export const SIMULATED_MODEL_ERROR = Object.freeze({ code: 'model_error', message: 'simulated model failure', type: 'server_error' });

/**
 * The fault `errorAnswerAfterChunks`: the answer as a failing model leaves it. Streamed: the first
 * `after` events, then an error event and `[DONE]`, hashed as any stream is. Whole: the error object
 * is the body. `outputTokens` counts the content events kept (the role chunk is not one).
 */
export function erroredOutput(out: PlannedOutput, after: number, stream: boolean, completionTokens: number): { out: PlannedOutput; outputTokens: number } {
  const error = sortedJson({ error: SIMULATED_MODEL_ERROR });
  if (!stream) return { out: { events: [error, '[DONE]'], hashed: error, cached: error }, outputTokens: 0 };
  const kept = out.events.slice(0, Math.max(0, Math.min(after, out.events.length - 2)));
  const events = [...kept, error, '[DONE]'];
  // As a real host stores it: Go's json.Marshal, which escapes <, >, & (error-answer.ts).
  const hashed = goStoredStreamForm(events.map((e) => `data: ${e}`));
  return { out: { events, hashed, cached: hashed }, outputTokens: Math.min(completionTokens, Math.max(0, kept.length - 1)) };
}
