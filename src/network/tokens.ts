/**
 * The token-counting rule shared by the simulated hosts (what they bill), the host transport and the
 * upstream mode (what they count when a stream ends without a usage chunk). One rule on both sides
 * is what makes the gateway's off-chain tally equal the hosts' tallies at settlement.
 *
 * Rule (characters = JavaScript string length, i.e. UTF-16 code units):
 * - a text costs ceil(chars / 4) tokens;
 * - prompt = sum over messages of (tokens(text content) + tokens(name) + tokens of each tool call's
 *   name + arguments + MESSAGE_OVERHEAD) + tokens(JSON of `tools`, when offered) + REPLY_OVERHEAD;
 * - completion = tokens(content) + sum over tool calls of tokens(name + arguments).
 * The simulated hosts generate text in 4-character pieces, one piece per token, so a completion of
 * n pieces counts exactly n tokens and `max_tokens` maps onto whole pieces.
 */

/** Tokens added per message (role and framing), as OpenAI's own accounting does. */
export const MESSAGE_OVERHEAD = 3;
/** Tokens added once per prompt for priming the assistant's reply. */
export const REPLY_OVERHEAD = 3;
export const CHARS_PER_TOKEN = 4;

export function textTokens(chars: number): number {
  return chars <= 0 ? 0 : Math.ceil(chars / CHARS_PER_TOKEN);
}

/** Length of the text in a message `content`: a string, or an array of parts whose text parts count. */
function contentChars(content: unknown): number {
  if (typeof content === 'string') return content.length;
  if (Array.isArray(content)) {
    let n = 0;
    for (const part of content) {
      if (part && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string') {
        n += (part as { text: string }).text.length;
      }
    }
    return n;
  }
  return 0;
}

function toolCallsTokens(toolCalls: unknown): number {
  if (!Array.isArray(toolCalls)) return 0;
  let n = 0;
  for (const call of toolCalls) {
    const fn = (call as { function?: { name?: unknown; arguments?: unknown } } | null)?.function;
    if (!fn) continue;
    const name = typeof fn.name === 'string' ? fn.name.length : 0;
    const args = typeof fn.arguments === 'string' ? fn.arguments.length : 0;
    n += textTokens(name + args);
  }
  return n;
}

/** Prompt tokens of an OpenAI request body (`messages`, optional `tools`). */
export function countPromptTokens(body: { messages?: unknown; tools?: unknown }): number {
  let n = REPLY_OVERHEAD;
  if (Array.isArray(body.messages)) {
    for (const m of body.messages) {
      if (!m || typeof m !== 'object') continue;
      const msg = m as { content?: unknown; name?: unknown; tool_calls?: unknown };
      n += MESSAGE_OVERHEAD + textTokens(contentChars(msg.content));
      if (typeof msg.name === 'string') n += textTokens(msg.name.length);
      n += toolCallsTokens(msg.tool_calls);
    }
  }
  if (Array.isArray(body.tools) && body.tools.length > 0) n += textTokens(jsonLength(body.tools));
  return n;
}

/**
 * `JSON.stringify(value).length` for JSON data (what a parsed request body holds), computed with an
 * explicit stack: JSON.stringify recurses and throws a RangeError on deeply nested data (a `tools`
 * schema nested thousands deep), and an estimate must never throw. A cycle counts as `null`.
 */
export function jsonLength(value: unknown): number {
  let n = 0;
  // Each frame: an array or object being written, its keys, and the next member's index.
  type Frame = { node: object; keys: string[] | null; i: number; wrote: boolean };
  const stack: Frame[] = [];
  const onPath = new Set<object>();
  /** Writes a scalar, or opens a container; answers whether the value was written (not skipped). */
  const visit = (v: unknown, inArray: boolean): boolean => {
    if (v === null) return (n += 4), true;
    switch (typeof v) {
      case 'string':
        n += JSON.stringify(v).length;
        return true;
      case 'number':
        n += Number.isFinite(v) ? String(v).length : 4;
        return true;
      case 'boolean':
        n += v ? 4 : 5;
        return true;
      case 'bigint':
        n += String(v).length; // JSON.stringify throws on a bigint; parsed JSON never holds one
        return true;
      case 'object': {
        if (onPath.has(v)) return (n += 4), true;
        onPath.add(v);
        n += 1; // [ or {
        stack.push({ node: v, keys: Array.isArray(v) ? null : Object.keys(v), i: 0, wrote: false });
        return true;
      }
      default: // undefined, function, symbol: null in an array, the member is left out in an object
        if (inArray) n += 4;
        return inArray;
    }
  };
  visit(value, false);
  while (stack.length > 0) {
    const f = stack[stack.length - 1]!;
    if (f.keys === null) {
      const arr = f.node as unknown[];
      if (f.i >= arr.length) {
        n += 1; // ]
        onPath.delete(f.node);
        stack.pop();
        continue;
      }
      if (f.i > 0) n += 1; // ,
      visit(arr[f.i++], true);
    } else {
      if (f.i >= f.keys.length) {
        n += 1; // }
        onPath.delete(f.node);
        stack.pop();
        continue;
      }
      const key = f.keys[f.i++]!;
      const v = (f.node as Record<string, unknown>)[key];
      if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue;
      if (f.wrote) n += 1; // ,
      f.wrote = true;
      n += JSON.stringify(key).length + 1; // "key":
      visit(v, false);
    }
  }
  return n;
}

/**
 * Completion tokens of what was delivered: `contentChars` characters of content plus, per tool call,
 * its name and the argument characters delivered so far.
 */
export function countCompletionTokens(contentChars: number, toolCalls?: readonly { nameChars: number; argChars: number }[]): number {
  let n = textTokens(contentChars);
  if (toolCalls) for (const t of toolCalls) n += textTokens(t.nameChars + t.argChars);
  return n;
}
