/**
 * The v5 max_tokens floor, as the network's gateway applies it. A v5 host refuses a
 * MsgStartInference whose max_tokens is below 64 (Z5 state/machine.go, ErrMaxTokensBelowFloor), so
 * devshardctl raises the budget instead of refusing the client (Z5 cmd/devshardctl/
 * request_filters.go `applyTokenBudgetFloor`): max_tokens (and max_completion_tokens when sent)
 * become at least 64, and `min_tokens` is set to min(max(min_tokens, 64), max_tokens).
 *
 * One thing we add: the client's own limit still holds on what it receives. devshardctl sends the
 * host's longer answer back as is; we cut it at the client's max_tokens (finish_reason "length"),
 * counting tokens by the host's logprobs (hosts always ask their backend for them, one entry per
 * token). The bill is still what the host charged for the tokens it generated.
 */

/** completionapi.MinTokensFloor in Z5. */
export const MIN_TOKENS_FLOOR = 64;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface FlooredBody {
  /** The body the host is sent. */
  body: Json;
  /** The client's own max_tokens when it was below the floor (its answer is cut there); else undefined. */
  clientLimit: number | undefined;
}

/** The host's copy of `body` with the floor applied (`body` itself is not changed). */
export function applyTokenFloor(body: Json, floor = MIN_TOKENS_FLOOR): FlooredBody {
  const asked = typeof body.max_tokens === 'number' ? body.max_tokens : undefined;
  const maxTokens = Math.max(asked ?? floor, floor);
  const out: Json = { ...body, max_tokens: maxTokens };
  if ('max_completion_tokens' in body) out.max_completion_tokens = maxTokens;
  const min = typeof body.min_tokens === 'number' ? body.min_tokens : 0;
  out.min_tokens = Math.min(Math.max(min, floor), maxTokens);
  return { body: out, clientLimit: asked !== undefined && asked < floor ? asked : undefined };
}

/** The logprob tokens of a choice (`logprobs.content[]`), or undefined when the host sent none. */
function logprobTokens(choice: Json): { token: string }[] | undefined {
  const lp = choice.logprobs;
  if (!isObject(lp) || !Array.isArray(lp.content)) return undefined;
  return lp.content.filter((t): t is { token: string } => isObject(t) && typeof t.token === 'string');
}

/**
 * Cuts a stream at `limit` tokens: `take` is given each host chunk (parsed, before the client's
 * view is made of it) and answers the chunk to pass on (possibly shortened, with finish_reason
 * "length"), or undefined to drop it. Chunks with no choices (usage) always pass.
 */
export class StreamCut {
  private used = 0;
  private ended = false;

  constructor(private readonly limit: number) {}

  take(chunk: Json): Json | undefined {
    const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
    if (choices.length === 0) return chunk;
    if (this.ended) return undefined;
    const choice = choices[0];
    if (!isObject(choice) || !isObject(choice.delta)) return chunk;
    const content = choice.delta.content;
    if (typeof content !== 'string' || content === '') return chunk;
    const tokens = logprobTokens(choice);
    const n = tokens ? tokens.length : 1;
    if (this.used + n < this.limit) {
      this.used += n;
      return chunk;
    }
    // This chunk reaches the limit: keep the tokens that fit, end the choice.
    const keep = this.limit - this.used;
    this.used = this.limit;
    this.ended = true;
    const text = tokens && keep < tokens.length ? tokens.slice(0, keep).map((t) => t.token).join('') : content;
    const lp = isObject(choice.logprobs) && tokens ? { logprobs: { ...choice.logprobs, content: (choice.logprobs.content as unknown[]).slice(0, keep) } } : {};
    return { ...chunk, choices: [{ ...choice, ...lp, delta: { ...choice.delta, content: text }, finish_reason: 'length' }] };
  }
}

/** A whole completion cut at `limit` tokens of its first choice (by its logprobs); unchanged when it fits or has none. */
export function cutCompletion(c: Json, limit: number): Json {
  const choices = Array.isArray(c.choices) ? c.choices : [];
  const choice = choices[0];
  if (!isObject(choice) || !isObject(choice.message) || typeof choice.message.content !== 'string') return c;
  const tokens = logprobTokens(choice);
  if (!tokens || tokens.length <= limit) return c;
  const kept = tokens.slice(0, limit);
  const lp = isObject(choice.logprobs) ? { logprobs: { ...choice.logprobs, content: (choice.logprobs.content as unknown[]).slice(0, limit) } } : {};
  return { ...c, choices: [{ ...choice, ...lp, message: { ...choice.message, content: kept.map((t) => t.token).join('') }, finish_reason: 'length' }, ...choices.slice(1)] };
}
