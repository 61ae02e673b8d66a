/**
 * Upstream mode: the InferencePort for any OpenAI-compatible server (NETWORK_UPSTREAM_URL, e.g.
 * `http://127.0.0.1:8000/v1`, and NETWORK_UPSTREAM_KEY sent as `Authorization: Bearer`). POSTs
 * `{url}/chat/completions`; the escrow, nonce, host URL and signer of the call are not used. The
 * answer is handled exactly like a host's (same errors, same stall/truncation rules), and usage is
 * the server's usage chunk (always requested) or, when it sends none, the shared token rule.
 */
import type { Agent } from 'undici';
import { sendChatRequest } from './chat-request.js';
import { createHttpAgent, splitBaseUrl, type AgentOptions } from './http-agent.js';
import type { ChatCall, ChatResult, InferencePort } from './port.js';

export interface UpstreamOptions extends AgentOptions {
  /** Base URL of the OpenAI-compatible API, up to and including its `/v1` (NETWORK_UPSTREAM_URL). */
  url: string;
  /** Bearer key (NETWORK_UPSTREAM_KEY); omitted when absent. */
  apiKey?: string;
  stallTimeoutMs?: number;
  timeoutMs?: number;
  agent?: Agent;
}

export interface UpstreamPort extends InferencePort {
  close(): Promise<void>;
}

/** Adds `stream_options.include_usage` to a streamed body, drops stray stream_options otherwise (the caller's object is not modified). */
export function withUsageRequested(body: Record<string, unknown>): Record<string, unknown> {
  if (body.stream !== true) {
    // OpenAI refuses stream_options without stream; a client may still have sent them.
    if (body.stream_options === undefined) return body;
    const { stream_options: _ignored, ...rest } = body;
    return rest;
  }
  const so = body.stream_options;
  if (so && typeof so === 'object' && (so as { include_usage?: unknown }).include_usage === true) return body;
  return { ...body, stream_options: { ...(so && typeof so === 'object' ? so : {}), include_usage: true } };
}

export function createUpstreamPort(opts: UpstreamOptions): UpstreamPort {
  const { origin, prefix } = splitBaseUrl(opts.url);
  const path = `${prefix}/chat/completions`;
  const agent = opts.agent ?? createHttpAgent(opts);
  const ownsAgent = !opts.agent;
  const stallTimeoutMs = opts.stallTimeoutMs ?? 30_000;
  const timeoutMs = opts.timeoutMs ?? 300_000;
  // The key lives in this closure; it is never part of an error message (labels carry the URL only).
  const authorization = opts.apiKey ? `Bearer ${opts.apiKey}` : undefined;
  const label = `upstream ${origin}${prefix}`;

  return {
    async chat(call: ChatCall): Promise<ChatResult> {
      const stream = call.body.stream === true;
      const body = withUsageRequested(call.body);
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        accept: stream ? 'text/event-stream' : 'application/json',
      };
      if (authorization) headers.authorization = authorization;
      return sendChatRequest({
        dispatcher: agent,
        origin,
        path,
        headers,
        payload: Buffer.from(JSON.stringify(body), 'utf8'),
        body,
        stream,
        signal: call.signal,
        ...(call.controller ? { controller: call.controller } : {}),
        stallTimeoutMs,
        timeoutMs,
        label,
      });
    },
    async close() {
      if (ownsAgent) await agent.close();
    },
  };
}
