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
  if (Array.isArray(body.tools) && body.tools.length > 0) n += textTokens(JSON.stringify(body.tools).length);
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
