/**
 * The host's model output made into what the OpenAI client asked for. A host rewrites the prompt for
 * its own needs (logprobs with top_logprobs ≥ 5, return_token_ids, a seed, include_usage on
 * streams; real-network.md §8), so its answer carries fields the client did not ask for. The
 * network's own gateway strips them (gonka-ai/gonka 8a35022 devshard/cmd/devshardctl/
 * stream_rewrite.go: logprob, logprobs, top_logprobs, token_ids, prompt_token_ids,
 * prompt_logprobs), and turns a whole `chat.completion` sent to a streaming client into chunks.
 *
 * We differ in one respect, for OpenAI fidelity: a client that asked for `logprobs` keeps them,
 * cut to the `top_logprobs` it asked for; and a usage chunk reaches a streaming client only when
 * it asked (`stream_options.include_usage`), as OpenAI does.
 *
 * The common case (nothing to change) returns the host's text as is: no parse, no copy.
 */

export interface ClientAsk {
  stream: boolean;
  includeUsage: boolean;
  logprobs: boolean;
  topLogprobs: number;
}

/** What the client's OpenAI body asked for, as far as the answer's shape goes. */
export function clientAsk(body: Record<string, unknown>): ClientAsk {
  const so = body.stream_options;
  const top = body.top_logprobs;
  return {
    stream: body.stream === true,
    includeUsage: typeof so === 'object' && so !== null && (so as Record<string, unknown>).include_usage === true,
    logprobs: body.logprobs === true,
    topLogprobs: typeof top === 'number' && Number.isInteger(top) && top > 0 ? top : 0,
  };
}

const ALWAYS_STRIPPED = ['token_ids', 'prompt_token_ids', 'prompt_logprobs'];
const LOGPROB_FIELDS = ['logprob', 'logprobs', 'top_logprobs'];

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Removes the host's own fields in place; true when anything changed. */
function strip(v: unknown, ask: ClientAsk, inLogprobs = false): boolean {
  if (Array.isArray(v)) {
    let changed = false;
    for (const x of v) changed = strip(x, ask, inLogprobs) || changed;
    return changed;
  }
  if (!isObject(v)) return false;
  let changed = false;
  for (const key of ALWAYS_STRIPPED) {
    if (key in v) {
      delete v[key];
      changed = true;
    }
  }
  if (!ask.logprobs) {
    for (const key of LOGPROB_FIELDS) {
      if (key in v) {
        delete v[key];
        changed = true;
      }
    }
  } else if (inLogprobs && Array.isArray(v.top_logprobs) && v.top_logprobs.length > ask.topLogprobs) {
    v.top_logprobs = v.top_logprobs.slice(0, ask.topLogprobs);
    changed = true;
  }
  for (const [key, child] of Object.entries(v)) {
    if (typeof child === 'object' && child !== null) changed = strip(child, ask, inLogprobs || key === 'logprobs') || changed;
  }
  return changed;
}

const mayNeedStrip = (data: string, ask: ClientAsk): boolean =>
  data.includes('token_ids"') || data.includes('"prompt_logprobs"') || (data.includes('"logprob') && (!ask.logprobs || data.includes('"top_logprobs"')));

/**
 * One streamed output event from the host → the data payloads to send the client (zero or more).
 * `value` is the host event parsed (readHostEvent), `data` its text.
 */
export function chunksForClient(data: string, value: unknown, ask: ClientAsk): string[] {
  if (!isObject(value)) return [data];
  if (value.object === 'chat.completion') return completionAsChunks(value, ask).map((c) => JSON.stringify(c));
  const usageOnly = Array.isArray(value.choices) && value.choices.length === 0 && value.usage != null;
  if (!ask.includeUsage && usageOnly) return [];
  const hasUsage = !ask.includeUsage && 'usage' in value;
  if (!hasUsage && !mayNeedStrip(data, ask)) return [data];
  const changed = strip(value, ask);
  if (hasUsage) delete value.usage;
  return changed || hasUsage ? [JSON.stringify(value)] : [data];
}

/** A whole (non-streamed) completion from the host → the text for a non-streaming client. */
export function completionForClient(data: string, value: unknown, ask: ClientAsk): string {
  if (!isObject(value) || !mayNeedStrip(data, ask)) return data;
  return strip(value, ask) ? JSON.stringify(value) : data;
}

/**
 * A `chat.completion` the host sent to a streaming client, as OpenAI chunks: per choice a role
 * chunk, the content (and tool calls) in one delta, a finish chunk; then usage when asked.
 */
export function completionAsChunks(c: Json, ask: ClientAsk): Json[] {
  strip(c, ask);
  const head = { id: c.id, object: 'chat.completion.chunk', created: c.created, model: c.model };
  const fp = c.system_fingerprint ? { system_fingerprint: c.system_fingerprint } : {};
  const out: Json[] = [];
  const choices = Array.isArray(c.choices) ? c.choices.filter(isObject) : [];
  for (const choice of choices) {
    const index = choice.index ?? 0;
    const msg = isObject(choice.message) ? choice.message : {};
    out.push({ ...head, ...fp, choices: [{ index, delta: { role: msg.role ?? 'assistant', content: '' }, finish_reason: null }] });
    const delta: Json = {};
    if (typeof msg.content === 'string' && msg.content !== '') delta.content = msg.content;
    if (Array.isArray(msg.tool_calls) && msg.tool_calls.length > 0) {
      delta.tool_calls = msg.tool_calls.map((t, i) => (isObject(t) ? { index: i, ...t } : t));
    }
    if (typeof msg.refusal === 'string') delta.refusal = msg.refusal;
    if (Object.keys(delta).length > 0) {
      const withLogprobs = ask.logprobs && choice.logprobs !== undefined ? { logprobs: choice.logprobs } : {};
      out.push({ ...head, ...fp, choices: [{ index, delta, ...withLogprobs, finish_reason: null }] });
    }
    out.push({ ...head, ...fp, choices: [{ index, delta: {}, finish_reason: choice.finish_reason ?? 'stop' }] });
  }
  if (ask.includeUsage && c.usage != null) out.push({ ...head, ...fp, choices: [], usage: c.usage });
  return out;
}
