/**
 * ChatCompletionRequest as the spec defines it, as a fastify (ajv) JSON schema, plus
 * `normalizeChatRequest`: the cross-field rules a schema expresses badly, max_tokens defaulting and
 * clamping, and the input-token estimate the limiter and the cost check use.
 *
 * Accepted beyond the spec's table (OpenAI clients send them): `n` (only 1), `user`, `seed`,
 * `stream_options.include_usage`, `max_completion_tokens` (newer SDK name of max_tokens),
 * `response_format`, `parallel_tool_calls`, `logprobs`/`top_logprobs`, `tool_choice` in OpenAI's
 * object form `{"type":"function","function":{"name":...}}`, content as an array of text parts,
 * and `null` for optional scalar fields (treated as absent). Other unknown top-level fields are
 * accepted and NOT forwarded to hosts (OpenAI SDKs add fields over time; refusing them would
 * break clients, forwarding them could break hosts).
 */
import { countPromptTokens } from '../../network/tokens.js';
import type { ChatRequest } from '../../gateway/chat/chat.js';
import { ApiError } from '../api-error.js';

const nullableNumber = (minimum: number, maximum: number) => ({ type: ['number', 'null'], minimum, maximum }) as const;

/**
 * An object whose `type` is checked before its other members, so `{"type":"code_interpreter"}`
 * is refused as a bad `type` (the real mistake), not as a missing `function`.
 */
const typed = (type: string, required: readonly string[], properties: Record<string, unknown>) =>
  ({
    type: 'object',
    allOf: [
      { required: ['type'], properties: { type: { type: 'string', const: type } } },
      { required, properties },
    ],
  }) as const;

const toolCallSchema = typed('function', ['id', 'function'], {
  id: { type: 'string' },
  function: {
    type: 'object',
    required: ['name', 'arguments'],
    properties: { name: { type: 'string' }, arguments: { type: 'string' } },
  },
});

const contentPartSchema = typed('text', ['text'], { text: { type: 'string' } });

export const messageSchema = {
  type: 'object',
  required: ['role'],
  properties: {
    role: { type: 'string', enum: ['system', 'user', 'assistant', 'tool'] },
    // An empty parts array says nothing: OpenAI refuses it (minimum length 1), so do we.
    content: { type: ['string', 'null', 'array'], items: contentPartSchema, minItems: 1 },
    name: { type: 'string' },
    tool_calls: { type: 'array', items: toolCallSchema },
    tool_call_id: { type: 'string' },
  },
} as const;

export const toolSchema = typed('function', ['function'], {
  function: {
    type: 'object',
    required: ['name'],
    properties: {
      name: { type: 'string', pattern: '^[a-zA-Z0-9_-]{1,64}$' },
      description: { type: 'string' },
      parameters: { type: 'object' },
      strict: { type: ['boolean', 'null'] },
    },
  },
});

export const chatCompletionRequestSchema = {
  type: 'object',
  required: ['model', 'messages'],
  properties: {
    model: { type: 'string', minLength: 1 },
    messages: { type: 'array', minItems: 1, items: messageSchema },
    temperature: nullableNumber(0, 2),
    top_p: nullableNumber(0, 1),
    max_tokens: { type: ['integer', 'null'], minimum: 1 },
    max_completion_tokens: { type: ['integer', 'null'], minimum: 1 },
    stream: { type: ['boolean', 'null'] },
    stream_options: {
      type: ['object', 'null'],
      properties: { include_usage: { type: 'boolean' } },
    },
    tools: { type: ['array', 'null'], items: toolSchema },
    tool_choice: {
      anyOf: [
        { type: 'string', enum: ['auto', 'none', 'required'] },
        {
          type: 'object',
          required: ['type', 'function'],
          properties: {
            type: { type: 'string', const: 'function' },
            function: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } },
          },
        },
        { type: 'null' },
      ],
    },
    parallel_tool_calls: { type: ['boolean', 'null'] },
    stop: { type: ['string', 'array', 'null'], items: { type: 'string' }, maxItems: 4 },
    presence_penalty: nullableNumber(-2, 2),
    frequency_penalty: nullableNumber(-2, 2),
    n: { type: ['integer', 'null'], minimum: 1, maximum: 1 },
    user: { type: ['string', 'null'] },
    seed: { type: ['integer', 'null'] },
    logprobs: { type: ['boolean', 'null'] },
    top_logprobs: { type: ['integer', 'null'], minimum: 0, maximum: 20 },
    response_format: {
      type: ['object', 'null'],
      required: ['type'],
      properties: { type: { type: 'string', enum: ['text', 'json_object', 'json_schema'] } },
    },
  },
} as const;

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content?: string | null | { type: 'text'; text: string }[];
  name?: string;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

/** A request body after schema validation (fields the schema checked, typed loosely for the rest). */
export interface ChatCompletionRequest {
  model: string;
  messages: ChatMessage[];
  temperature?: number | null;
  top_p?: number | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  tools?: { type: 'function'; function: { name: string; description?: string; parameters?: Record<string, unknown> } }[] | null;
  tool_choice?: 'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } } | null;
  stop?: string | string[] | null;
  [key: string]: unknown;
}

/** The settings normalization depends on (the gateway settings' snake_case names). */
export interface MaxTokensSettings {
  default_request_max_tokens: number;
  request_max_tokens_cap: number;
}

export interface NormalizedChatRequest extends ChatRequest {
  /** The body to forward: known fields only, `max_tokens` set, nulls dropped. */
  body: ChatRequest['body'] & { messages: ChatMessage[] };
  includeUsage: boolean;
  /** True when the client asked for more than the cap and got the cap. */
  maxTokensClamped: boolean;
}

/** Fields forwarded to hosts when present and not null. */
const FORWARDED = [
  'temperature', 'top_p', 'tools', 'tool_choice', 'parallel_tool_calls', 'stop', 'presence_penalty',
  'frequency_penalty', 'n', 'user', 'seed', 'logprobs', 'top_logprobs', 'response_format',
] as const;

/** Text of a message's content (string or text parts); null/absent is ''. */
export function messageText(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => p.text).join('');
  return '';
}

/**
 * The prompt-token estimate: the network's own counting rule (src/network/tokens.ts: ceil(chars/4)
 * per text, +3 per message, names, tool calls and offered tools included, +3 for the reply), so the
 * limiter, the worst-case cost check and the hosts' billing agree.
 */
export function estimateInputTokens(body: { messages: readonly ChatMessage[]; tools?: unknown }): number {
  return countPromptTokens(body);
}

/**
 * How deep a chat request's JSON may nest: the body is level 1, each array or object inside it one
 * more (`tools[0].function.parameters` is level 5, so a tool's parameter schema has 59 levels left).
 * Deeper data is refused with a 400 before anything walks it: forwarding or counting a body nested
 * thousands deep would exhaust the stack (issue 39). OpenAI's own limit on a structured-output
 * schema is far lower (5 levels of nesting).
 */
export const MAX_JSON_DEPTH = 64;

/**
 * The param (its first three named members, e.g. `tools[0].function.parameters`) under which `value`
 * nests deeper than `max` levels, or undefined. Iterative, and it never looks below level max + 1.
 */
export function tooDeepParam(value: unknown, max = MAX_JSON_DEPTH): string | undefined {
  type Entry = { v: unknown; depth: number; param: string; named: number };
  const stack: Entry[] = [{ v: value, depth: 1, param: '', named: 0 }];
  while (stack.length > 0) {
    const { v, depth, param, named } = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return param || '(body)';
    const entries: [string, unknown][] = Array.isArray(v) ? v.map((x, i) => [String(i), x]) : Object.entries(v);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [k, x] = entries[i]!;
      if (x === null || typeof x !== 'object') continue;
      const index = Array.isArray(v);
      const keep = named >= 3;
      const childParam = keep ? param : index ? `${param}[${k}]` : param === '' ? k : `${param}.${k}`;
      stack.push({ v: x, depth: depth + 1, param: childParam, named: keep || index ? named : named + 1 });
    }
  }
  return undefined;
}

/** Cross-field rules of the spec/OpenAI that JSON schema states poorly. Throws a 400 ApiError. */
export function checkChatRequest(req: ChatCompletionRequest): void {
  const deep = tooDeepParam(req);
  if (deep !== undefined) {
    throw new ApiError(
      400,
      `Invalid value for '${deep}': JSON nested deeper than ${MAX_JSON_DEPTH} levels (the request body is level 1). Flatten it (for a JSON schema, use $defs and $ref instead of nesting) to at most ${MAX_JSON_DEPTH} levels.`,
      { param: deep, code: 'nesting_too_deep' },
    );
  }
  req.messages.forEach((m, i) => {
    const hasToolCalls = Array.isArray(m.tool_calls) && m.tool_calls.length > 0;
    if (m.content === undefined && !hasToolCalls) {
      throw new ApiError(400, `Missing required parameter: 'messages[${i}].content'.`, { param: `messages[${i}].content`, code: 'missing_required_parameter' });
    }
    if (m.content === null && !hasToolCalls) {
      throw new ApiError(400, `Invalid value for 'messages[${i}].content': null is only allowed on assistant messages with tool_calls.`, { param: `messages[${i}].content`, code: 'invalid_value' });
    }
    if (hasToolCalls && m.role !== 'assistant') {
      throw new ApiError(400, `Invalid parameter: 'messages[${i}].tool_calls' is only allowed on messages with role 'assistant'.`, { param: `messages[${i}].tool_calls`, code: 'invalid_value' });
    }
    if (m.role === 'tool' && (typeof m.tool_call_id !== 'string' || m.tool_call_id === '')) {
      throw new ApiError(400, `Missing required parameter: 'messages[${i}].tool_call_id' (required for messages with role 'tool').`, { param: `messages[${i}].tool_call_id`, code: 'missing_required_parameter' });
    }
  });
  const tools = req.tools ?? [];
  const choice = req.tool_choice;
  if (choice === 'required' && tools.length === 0) {
    throw new ApiError(400, "Invalid value for 'tool_choice': 'required' needs at least one entry in 'tools'.", { param: 'tool_choice', code: 'invalid_value' });
  }
  if (choice && typeof choice === 'object' && !tools.some((t) => t.function.name === choice.function.name)) {
    throw new ApiError(400, `Invalid value for 'tool_choice': no tool named '${choice.function.name.slice(0, 64)}' in 'tools'.`, { param: 'tool_choice', code: 'invalid_value' });
  }
}

/**
 * Validated body -> what the gateway forwards and accounts. max_tokens (or max_completion_tokens)
 * defaults to settings.default_request_max_tokens and is clamped to settings.request_max_tokens_cap
 * (a larger request is served with the cap, not refused, so clients written for other providers
 * keep working).
 */
export function normalizeChatRequest(raw: unknown, settings: MaxTokensSettings): NormalizedChatRequest {
  const req = raw as ChatCompletionRequest;
  checkChatRequest(req);
  const cap = Math.max(1, settings.request_max_tokens_cap);
  const asked = req.max_tokens ?? req.max_completion_tokens ?? settings.default_request_max_tokens;
  const maxTokens = Math.max(1, Math.min(asked, cap));
  const stream = req.stream === true;
  const body: NormalizedChatRequest['body'] = { model: req.model, messages: req.messages, max_tokens: maxTokens, stream };
  for (const key of FORWARDED) {
    const v = req[key];
    if (v !== undefined && v !== null) body[key] = v;
  }
  const includeUsage = stream && req.stream_options?.include_usage === true;
  if (includeUsage) body.stream_options = { include_usage: true };
  return {
    body,
    model: req.model,
    stream,
    includeUsage,
    maxTokens,
    inputTokens: estimateInputTokens(body),
    maxTokensClamped: asked > cap,
  };
}
