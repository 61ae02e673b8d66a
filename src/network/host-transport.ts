/**
 * The devshard host transport: the InferencePort the gateway uses against network hosts (and the
 * devnet's simulated hosts). Per call it serialises the body once, signs the exact bytes with the
 * creator's RequestSigner, and POSTs `{hostUrl}/devshard/v1/sessions/{escrowId}/chat/completions`
 * with the X-Devshard-* headers (see signature.ts). Streamed calls always ask the host for
 * `stream_options.include_usage` so the bill is the host's own count; the usage-only chunk is passed
 * through like any other and the gateway decides whether its client sees it.
 */
import type { Agent } from 'undici';
import { sendChatRequest } from './chat-request.js';
import { createHttpAgent, splitBaseUrl, type AgentOptions } from './http-agent.js';
import type { ChatCall, ChatResult, InferencePort } from './port.js';
import { NONCE_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER } from './signature.js';

export interface HostTransportOptions extends AgentOptions {
  /** A stream with no SSE data event for this long fails with HostError 'stalled'. Default 30 s. */
  stallTimeoutMs?: number;
  /** A non-stream call without its whole answer after this long fails with 'timeout'. Default 300 s. */
  timeoutMs?: number;
  /** Clock in ms (tests); default Date.now. */
  now?: () => number;
  /** Share an Agent (and its keep-alive sockets) with other ports; default: one per transport. */
  agent?: Agent;
}

export interface HostTransport extends InferencePort {
  /** Closes idle keep-alive connections (at shutdown). */
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

export function createHostTransport(opts: HostTransportOptions = {}): HostTransport {
  const agent = opts.agent ?? createHttpAgent(opts);
  const ownsAgent = !opts.agent;
  const stallTimeoutMs = opts.stallTimeoutMs ?? 30_000;
  const timeoutMs = opts.timeoutMs ?? 300_000;
  const now = opts.now ?? Date.now;
  // Host base URLs are few and long-lived: parse each once. Bounded anyway (issue 7: no unbounded maps).
  const bases = new Map<string, { origin: string; prefix: string }>();
  const baseOf = (url: string): { origin: string; prefix: string } => {
    let b = bases.get(url);
    if (!b) {
      b = splitBaseUrl(url);
      if (bases.size >= 4096) bases.clear();
      bases.set(url, b);
    }
    return b;
  };

  return {
    async chat(call: ChatCall): Promise<ChatResult> {
      const { origin, prefix } = baseOf(call.hostUrl);
      const stream = call.body.stream === true;
      const body = withUsageRequested(call.body);
      const payload = Buffer.from(JSON.stringify(body), 'utf8');
      const ts = Math.floor(now() / 1000);
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        accept: stream ? 'text/event-stream' : 'application/json',
        [SIGNATURE_HEADER]: call.signer.sign(call.escrowId, payload, ts),
        [TIMESTAMP_HEADER]: String(ts),
        [NONCE_HEADER]: String(call.nonce),
      };
      return sendChatRequest({
        dispatcher: agent,
        origin,
        path: `${prefix}/devshard/v1/sessions/${encodeURIComponent(call.escrowId)}/chat/completions`,
        headers,
        payload,
        body,
        stream,
        signal: call.signal,
        ...(call.controller ? { controller: call.controller } : {}),
        stallTimeoutMs,
        timeoutMs,
        label: `host ${call.hostUrl}`,
      });
    },
    async close() {
      if (ownsAgent) await agent.close();
    },
  };
}
