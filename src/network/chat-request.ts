/**
 * One OpenAI-style chat request over undici, turned into a ChatResult: shared by the host transport
 * (signed devshard requests) and the upstream mode (Bearer-authenticated OpenAI-compatible server).
 *
 * Failure mapping (HostError.kind):
 * - connection refused / reset before an answer -> 'unreachable';
 * - non-2xx answer -> 'rejected' with the status and the server's error message;
 * - a 2xx body that is not a chat completion -> 'bad_response';
 * - non-stream answer not complete within `timeoutMs` -> 'timeout';
 * - stream silent (no SSE data event) for `stallTimeoutMs` -> 'stalled' with usageSoFar;
 * - stream ended or broken without `data: [DONE]` -> 'truncated' with usageSoFar;
 * - `call.signal` aborted -> 'aborted' with usageSoFar (the connection is closed, so the server sees it).
 */
import type { Dispatcher } from 'undici';
import { CallController, type CancelController, type CancelSignal } from './call-signal.js';
import { HostError, type ChatChunk, type ChatCompletion, type ChatResult, type Usage } from './port.js';
import { SseParser, type SseEvent } from './sse.js';
import { fetchWhole, WholeAnswerError, type WholeAnswer } from './whole-answer.js';
import { countCompletionTokens, countPromptTokens } from './tokens.js';

export interface ChatRequest {
  dispatcher: Dispatcher;
  origin: string;
  path: string;
  headers: Record<string, string>;
  /** The exact bytes sent (and, for hosts, signed). */
  payload: Buffer;
  /** The request body object (for the prompt-token count when the server reports no usage). */
  body: Record<string, unknown>;
  stream: boolean;
  signal: CancelSignal;
  /** The controller of `signal`, if the caller lends it (see ChatCall.controller). */
  controller?: CancelController;
  stallTimeoutMs: number;
  timeoutMs: number;
  /** Who answers, for error messages: "host http://..." or "upstream http://...". */
  label: string;
}

const MAX_ERROR_BODY = 64 * 1024;

/** Reads at most MAX_ERROR_BODY bytes of an error answer and extracts its message. */
async function errorMessage(body: Dispatcher.ResponseData['body']): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      parts.push(chunk as Buffer);
      size += (chunk as Buffer).length;
      if (size >= MAX_ERROR_BODY) break;
    }
  } catch {
    /* the message is best effort */
  }
  return messageOf(Buffer.concat(parts).toString('utf8'));
}

/** The message of an error answer's text: its JSON error message, or the text itself. */
function messageOf(body: string): string {
  const text = body.slice(0, MAX_ERROR_BODY);
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    if (typeof parsed.error === 'string') return parsed.error;
    if (parsed.error && typeof parsed.error.message === 'string') return parsed.error.message;
    if (typeof parsed.message === 'string') return parsed.message;
  } catch {
    /* not JSON: use the text */
  }
  return text.trim() || '(empty body)';
}

function usageOf(prompt: number, completion: number): Usage {
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

function isUsage(u: unknown): u is Usage {
  const x = u as Usage | null | undefined;
  return !!x && Number.isInteger(x.prompt_tokens) && Number.isInteger(x.completion_tokens) && Number.isInteger(x.total_tokens);
}

/** Counts what a completion delivered by the shared token rule (for servers that omit usage). */
function countedUsage(body: Record<string, unknown>, completion: ChatCompletion): Usage {
  const msg = completion.choices[0]?.message as { content?: unknown; tool_calls?: unknown } | undefined;
  const content = typeof msg?.content === 'string' ? msg.content.length : 0;
  const calls = Array.isArray(msg?.tool_calls)
    ? (msg.tool_calls as { function?: { name?: string; arguments?: string } }[]).map((c) => ({
        nameChars: c.function?.name?.length ?? 0,
        argChars: c.function?.arguments?.length ?? 0,
      }))
    : undefined;
  return usageOf(countPromptTokens(body), countCompletionTokens(content, calls));
}

export async function sendChatRequest(req: ChatRequest): Promise<ChatResult> {
  const { signal } = req;
  if (signal.aborted) throw new HostError('aborted', `request to ${req.label} aborted before it was sent`);
  // One controller owns the connection: the caller's abort and our timers both go through it (the
  // caller's own when it lends it, else one of ours that follows the caller's signal).
  const lent = req.controller !== undefined && req.controller.signal === signal;
  const ac = lent ? req.controller! : new CallController();
  let timedOut = false;
  const onAbort = (): void => ac.abort();
  if (!lent) signal.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(
    () => {
      timedOut = true;
      ac.abort();
    },
    req.stream ? req.stallTimeoutMs : req.timeoutMs,
  );
  const release = (): void => {
    clearTimeout(timer);
    if (!lent) signal.removeEventListener('abort', onAbort);
  };

  const failure = (err: unknown, usageSoFar?: Usage, midStream = false): HostError => {
    if (err instanceof HostError) return err;
    // Our timer first: with a lent controller it is what aborted the caller's signal.
    if (!timedOut && signal.aborted) return new HostError('aborted', `request to ${req.label} aborted by the caller`, undefined, usageSoFar);
    if (timedOut) {
      return req.stream
        ? new HostError('stalled', `${req.label} sent nothing for ${req.stallTimeoutMs} ms`, undefined, usageSoFar)
        : new HostError('timeout', `${req.label} did not answer within ${req.timeoutMs} ms`);
    }
    const code = (err as { code?: string } | null)?.code;
    const why = code ? `${code}: ${(err as Error).message}` : String((err as Error)?.message ?? err);
    if (midStream) return new HostError('truncated', `${req.label} broke the stream: ${why}`, undefined, usageSoFar);
    return new HostError('unreachable', `${req.label} unreachable: ${why}`);
  };

  if (!req.stream) return whole(req, ac.signal, release, failure);

  let res: Dispatcher.ResponseData;
  try {
    res = await req.dispatcher.request({
      origin: req.origin,
      path: req.path,
      method: 'POST',
      headers: req.headers,
      body: req.payload,
      signal: ac.signal as Dispatcher.RequestOptions['signal'],
    });
  } catch (err) {
    release();
    throw failure(err);
  }

  if (res.statusCode < 200 || res.statusCode >= 300) {
    const message = await errorMessage(res.body);
    release();
    throw new HostError('rejected', `${req.label} answered ${res.statusCode}: ${message}`, res.statusCode);
  }

  const contentType = String(res.headers['content-type'] ?? '');
  if (contentType.includes('application/json')) {
    // Some servers ignore `stream: true`; a JSON body here is not a stream we can pass on as one.
    await res.body.dump().catch(() => undefined);
    release();
    throw new HostError('bad_response', `${req.label} answered a stream request with JSON instead of SSE`, res.statusCode);
  }

  // Streaming: usage is the server's final usage chunk when it sends one, else what we counted.
  let reported: Usage | undefined;
  let contentChars = 0;
  const toolCalls: { nameChars: number; argChars: number }[] = [];
  let promptTokens = -1;
  const usage = (): Usage => {
    if (reported) return reported;
    if (promptTokens < 0) promptTokens = countPromptTokens(req.body);
    return usageOf(promptTokens, countCompletionTokens(contentChars, toolCalls));
  };
  const track = (chunk: ChatChunk): void => {
    if (isUsage(chunk.usage)) reported = chunk.usage;
    const choices = chunk.choices;
    if (!Array.isArray(choices)) return;
    for (let i = 0; i < choices.length; i++) {
      const delta = choices[i]!.delta as { content?: unknown; tool_calls?: unknown } | undefined;
      if (!delta) continue;
      if (typeof delta.content === 'string') contentChars += delta.content.length;
      if (Array.isArray(delta.tool_calls)) {
        for (const tc of delta.tool_calls as { index?: number; function?: { name?: unknown; arguments?: unknown } }[]) {
          const idx = typeof tc.index === 'number' ? tc.index : 0;
          const slot = (toolCalls[idx] ??= { nameChars: 0, argChars: 0 });
          if (typeof tc.function?.name === 'string') slot.nameChars += tc.function.name.length;
          if (typeof tc.function?.arguments === 'string') slot.argChars += tc.function.arguments.length;
        }
      }
    }
  };

  const body = res.body;
  const label = req.label;
  async function* chunks(): AsyncGenerator<ChatChunk> {
    const parser = new SseParser();
    const events: SseEvent[] = [];
    let done = false;
    let finished = false;
    try {
      for await (const raw of body) {
        if (done) continue; // drain to the end so the keep-alive connection can be reused
        parser.push(raw as Buffer, events);
        for (let i = 0; i < events.length && !done; i++) {
          const data = events[i]!.data;
          timer.refresh();
          if (data === '[DONE]') {
            done = true;
            break;
          }
          let chunk: ChatChunk & { error?: { message?: string } };
          try {
            chunk = JSON.parse(data) as ChatChunk & { error?: { message?: string } };
          } catch {
            throw new HostError('bad_response', `${label} streamed an event that is not JSON`, undefined, usage());
          }
          if (chunk && chunk.error) {
            throw new HostError('rejected', `${label} failed mid-stream: ${chunk.error.message ?? 'unknown error'}`, undefined, usage());
          }
          track(chunk);
          yield chunk;
          timer.refresh(); // time spent by our consumer is not the server's silence
        }
        events.length = 0;
      }
      if (!done) {
        parser.end(events);
        done = events.some((e) => e.data === '[DONE]');
      }
      if (!done) throw new HostError('truncated', `${label} closed the stream without [DONE]`, undefined, usage());
      finished = true;
    } catch (err) {
      // A stall or abort after [DONE] only interrupts the drain: the answer was complete.
      if (done && !(err instanceof HostError)) {
        finished = true;
        return;
      }
      throw failure(err, usage(), true);
    } finally {
      release();
      // Stopped early (consumer broke out, or a failure): close the connection so the server stops.
      if (!finished) ac.abort();
    }
  }

  return { kind: 'stream', chunks: chunks(), usage };
}

/** A non-streamed request: the whole answer read over dispatch (whole-answer.ts), then checked. */
async function whole(req: ChatRequest, signal: CancelSignal, release: () => void, failure: (err: unknown) => HostError): Promise<ChatResult> {
  let answer: WholeAnswer;
  try {
    answer = await fetchWhole(req.dispatcher, { origin: req.origin, path: req.path, method: 'POST', headers: req.headers, body: req.payload }, signal, MAX_ERROR_BODY);
  } catch (err) {
    release();
    const cause = err instanceof WholeAnswerError ? err.cause : err;
    const e = failure(cause);
    // The answer had begun: the server broke it, it was not unreachable.
    if (err instanceof WholeAnswerError && err.afterHeaders && e.kind === 'unreachable') throw new HostError('truncated', e.message.replace('unreachable', 'broke its answer'));
    throw e;
  }
  release();
  const { statusCode, text } = answer;
  if (statusCode < 200 || statusCode >= 300) {
    throw new HostError('rejected', `${req.label} answered ${statusCode}: ${messageOf(text)}`, statusCode);
  }
  let completion: ChatCompletion;
  try {
    completion = JSON.parse(text) as ChatCompletion;
  } catch {
    throw new HostError('bad_response', `${req.label} answered ${statusCode} with a body that is not JSON`, statusCode);
  }
  if (!completion || !Array.isArray(completion.choices)) {
    throw new HostError('bad_response', `${req.label} answered without choices`, statusCode);
  }
  if (!isUsage(completion.usage)) {
    completion.usage = countedUsage(req.body, completion);
    return { kind: 'completion', completion };
  }
  return { kind: 'completion', completion, text };
}
