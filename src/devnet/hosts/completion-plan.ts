/**
 * The deterministic "model" of the simulated hosts: from an OpenAI chat request, the answer it gets.
 *
 * - Seed: sha256 of the request's sorted-key JSON restricted to what shapes an answer (model,
 *   messages, tools, tool_choice, temperature, top_p, seed, penalties, response_format). max_tokens,
 *   stop and stream are left out on purpose: a smaller max_tokens or a stop sequence yields a prefix
 *   of the same text, and streamed and non-streamed answers are the same text.
 * - Text: a natural length of 5..60 pieces drawn from the seed; every piece is exactly 4 characters
 *   (a 3-letter word + space, a 2-letter word + ". " closing a sentence, and a final word + "."),
 *   so by the shared rule (tokens.ts) each piece is one token.
 * - max_tokens (or max_completion_tokens): the text is cut to max_tokens pieces, finish_reason
 *   `length`. Then stop sequences: the text is cut before the first occurrence of any of them,
 *   finish_reason `stop`.
 * - Tools: when tools are offered and tool_choice is not `none`, the answer is one tool call
 *   (finish_reason `tool_calls`): the named tool for `{type:'function',function:{name}}`, otherwise a
 *   tool drawn from the seed; its arguments are JSON valid for the tool's parameters schema. With
 *   `auto` (or no tool_choice) a conversation whose last message is a tool result gets a text answer
 *   instead, like a real model closing a tool loop. Tool-call tokens are ceil((name + arguments)/4);
 *   if that exceeds max_tokens the arguments are cut and finish_reason is `length`.
 * - response_format: `json_object` makes the text answer a JSON object (`{"answer":"<text>"}`),
 *   `json_schema` a JSON value valid for `json_schema.schema` (as tool arguments are made), like a
 *   model in JSON mode. It is sent in 4-character pieces; max_tokens cuts it (then it is not valid
 *   JSON, finish_reason `length`, as with a real model).
 */
import { countCompletionTokens, countPromptTokens } from '../../network/tokens.js';
import { Prng, stableJson } from './prng.js';
import { generateFromSchema } from './schema-args.js';

export type FinishReason = 'stop' | 'length' | 'tool_calls';

export interface PlannedToolCall {
  id: string;
  name: string;
  arguments: string;
}

export interface CompletionPlan {
  /** Text pieces in order (each a token; the last may be shorter after a stop sequence). */
  pieces: string[];
  content: string;
  toolCall?: PlannedToolCall;
  finishReason: FinishReason;
  promptTokens: number;
  completionTokens: number;
  /** Seed-derived id suffix (stable for the same request). */
}

/** Bad input the plan cannot be made from; answered as 400 invalid_request_error. */
export class PlanError extends Error {
  constructor(
    message: string,
    readonly param?: string,
  ) {
    super(message);
    this.name = 'PlanError';
  }
}

const WORDS3 = ['sun', 'sky', 'sea', 'owl', 'map', 'ink', 'fog', 'oak', 'elm', 'bay', 'ray', 'dew', 'fir', 'ivy', 'jay', 'kit', 'log', 'mud', 'net', 'orb', 'pod', 'rim', 'sap', 'tin', 'urn', 'van', 'web', 'yak', 'zip', 'arc', 'bee', 'cog'];
const WORDS2 = ['go', 'up', 'on', 'in', 'so', 'at', 'by', 'to', 'me', 'we', 'do', 'no'];
const CHUNK_CHARS = 4;

const capitalise = (w: string): string => w[0]!.toUpperCase() + w.slice(1);

function textPieces(rng: Prng, n: number): string[] {
  const pieces: string[] = [];
  let capital = true;
  let sentenceLeft = rng.int(4, 10);
  for (let i = 0; i < n; i++) {
    if (i === n - 1) {
      const w = rng.pick(WORDS3);
      pieces.push((capital ? capitalise(w) : w) + '.');
    } else if (sentenceLeft === 1) {
      pieces.push(rng.pick(WORDS2) + '. ');
      capital = true;
      sentenceLeft = rng.int(4, 10);
    } else {
      const w = rng.pick(WORDS3);
      pieces.push((capital ? capitalise(w) : w) + ' ');
      capital = false;
      sentenceLeft--;
    }
  }
  return pieces;
}

function maxTokensOf(body: Record<string, unknown>): number {
  const v = body.max_tokens ?? body.max_completion_tokens;
  if (v === undefined || v === null) return Number.POSITIVE_INFINITY;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new PlanError('max_tokens must be a non-negative integer', 'max_tokens');
  return v;
}

function stopsOf(body: Record<string, unknown>): string[] {
  const s = body.stop;
  if (s === undefined || s === null) return [];
  if (typeof s === 'string') return s ? [s] : [];
  if (Array.isArray(s) && s.every((x) => typeof x === 'string')) return (s as string[]).filter((x) => x.length > 0);
  throw new PlanError('stop must be a string or an array of strings', 'stop');
}

interface ToolDef {
  name: string;
  parameters: unknown;
}

function toolsOf(body: Record<string, unknown>): ToolDef[] {
  if (body.tools === undefined || body.tools === null) return [];
  if (!Array.isArray(body.tools)) throw new PlanError('tools must be an array', 'tools');
  return body.tools.map((t, i) => {
    const fn = (t as { type?: unknown; function?: { name?: unknown; parameters?: unknown } } | null)?.function;
    if ((t as { type?: unknown })?.type !== 'function' || !fn || typeof fn.name !== 'string') {
      throw new PlanError(`tools[${i}] must be {type:"function", function:{name, parameters}}`, `tools[${i}]`);
    }
    return { name: fn.name, parameters: fn.parameters ?? { type: 'object', properties: {} } };
  });
}

/** The tool to call, or undefined for a text answer. */
function chooseTool(body: Record<string, unknown>, tools: ToolDef[], rng: Prng): ToolDef | undefined {
  if (tools.length === 0) return undefined;
  const choice = body.tool_choice;
  if (choice === 'none') return undefined;
  if (choice && typeof choice === 'object') {
    const name = (choice as { function?: { name?: unknown } }).function?.name;
    const tool = tools.find((t) => t.name === name);
    if (!tool) throw new PlanError(`tool_choice names a tool that is not offered: ${String(name)}`, 'tool_choice');
    return tool;
  }
  if (choice !== undefined && choice !== 'auto' && choice !== 'required') {
    throw new PlanError('tool_choice must be "auto", "none", "required" or a function choice', 'tool_choice');
  }
  const messages = body.messages as { role?: unknown }[];
  if (choice !== 'required' && messages.length > 0 && messages[messages.length - 1]?.role === 'tool') return undefined;
  return rng.pick(tools);
}

function chunked(text: string): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += CHUNK_CHARS) pieces.push(text.slice(i, i + CHUNK_CHARS));
  return pieces;
}

/** The JSON text a JSON-mode answer is, or undefined for a plain text answer. */
function jsonAnswer(format: unknown, rng: Prng): string | undefined {
  if (format === undefined || format === null) return undefined;
  const type = (format as { type?: unknown }).type;
  if (type === 'json_object') return JSON.stringify({ answer: textPieces(rng, rng.int(3, 20)).join('') });
  if (type === 'json_schema') {
    const schema = (format as { json_schema?: { schema?: unknown } }).json_schema?.schema;
    return JSON.stringify(generateFromSchema(schema ?? { type: 'object', properties: {} }, rng));
  }
  return undefined;
}

export function planCompletion(body: Record<string, unknown>): CompletionPlan {
  if (!Array.isArray(body.messages)) throw new PlanError('messages must be an array', 'messages');
  const maxTokens = maxTokensOf(body);
  const stops = stopsOf(body);
  const tools = toolsOf(body);
  const rng = new Prng(
    stableJson({
      model: body.model,
      messages: body.messages,
      tools: body.tools,
      tool_choice: body.tool_choice,
      temperature: body.temperature,
      top_p: body.top_p,
      seed: body.seed,
      presence_penalty: body.presence_penalty,
      frequency_penalty: body.frequency_penalty,
      response_format: body.response_format,
    }),
  );
  // Once the answer id's draw (ids are now per answer, answer.ts completionId): kept so every
  // request still gets the text it always got.
  rng.hex(24);
  const promptTokens = countPromptTokens(body);
  const tool = chooseTool(body, tools, rng);

  if (tool) {
    let args = JSON.stringify(generateFromSchema(tool.parameters, rng));
    let finishReason: FinishReason = 'tool_calls';
    if (countCompletionTokens(0, [{ nameChars: tool.name.length, argChars: args.length }]) > maxTokens) {
      args = args.slice(0, Math.max(0, maxTokens * CHUNK_CHARS - tool.name.length));
      finishReason = 'length';
    }
    return {
      pieces: chunked(args),
      content: '',
      toolCall: { id: `call_${rng.hex(24)}`, name: tool.name, arguments: args },
      finishReason,
      promptTokens,
      completionTokens: countCompletionTokens(0, [{ nameChars: tool.name.length, argChars: args.length }]),
    };
  }

  const json = jsonAnswer(body.response_format, rng);
  let pieces = json === undefined ? textPieces(rng, rng.int(5, 60)) : chunked(json);
  let finishReason: FinishReason = 'stop';
  if (pieces.length > maxTokens) {
    pieces = pieces.slice(0, maxTokens);
    finishReason = 'length';
  }
  let content = pieces.join('');
  let cut = -1;
  for (const s of stops) {
    const at = content.indexOf(s);
    if (at !== -1 && (cut === -1 || at < cut)) cut = at;
  }
  if (cut !== -1) {
    content = content.slice(0, cut);
    finishReason = 'stop';
    const kept: string[] = [];
    let used = 0;
    for (const p of pieces) {
      if (used >= cut) break;
      kept.push(used + p.length <= cut ? p : p.slice(0, cut - used));
      used += p.length;
    }
    pieces = kept;
  }
  return { pieces, content, finishReason, promptTokens, completionTokens: countCompletionTokens(content.length) };
}
