/**
 * OpenAI-style server-sent events on a raw Node response: `data: <json>\n\n` frames, `: keep-alive`
 * comments while the upstream is silent (so proxies and clients do not time out a slow host), and
 * `data: [DONE]\n\n` at the end. The writer's `signal` aborts when the client goes away, so the
 * handler can cancel the host request and still account the usage delivered so far.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';

export interface SseOptions {
  /** Comment sent after this many ms without a write; 0 disables. Default 15000. */
  keepAliveMs?: number;
  /** Extra response headers (e.g. x-request-id). */
  headers?: Record<string, string | number | string[]>;
  status?: number;
}

export interface SseWriter {
  /** Aborted when the client disconnects before `end()`. */
  readonly signal: AbortSignal;
  /** True once the stream ended or the client left; writes are then ignored. */
  readonly closed: boolean;
  /** Writes one `data:` frame; resolves false when the client is gone. Awaits drain (backpressure). */
  send(data: unknown): Promise<boolean>;
  /** Writes a comment line (`: text`), ignored by SSE clients. */
  comment(text: string): boolean;
  /** Writes `data: [DONE]` and ends the response. */
  done(): void;
  /** Ends the response without [DONE] (e.g. after an error frame). */
  end(): void;
}

export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
} as const;

/**
 * Opens an SSE stream. Given a fastify reply, the reply is hijacked (fastify will not send
 * anything else) and the headers fastify had collected (request id, etc.) are kept.
 */
export function openSse(target: FastifyReply | ServerResponse, options: SseOptions = {}): SseWriter {
  let res: ServerResponse;
  let inherited: Record<string, unknown> = {};
  if ('raw' in target && 'hijack' in target) {
    inherited = { ...target.getHeaders() };
    delete inherited['content-type'];
    delete inherited['content-length'];
    target.hijack();
    res = target.raw;
  } else {
    res = target as ServerResponse;
  }
  const controller = new AbortController();
  let ended = false;
  const keepAliveMs = options.keepAliveMs ?? 15_000;

  res.writeHead(options.status ?? 200, { ...(inherited as Record<string, string>), ...SSE_HEADERS, ...options.headers });
  res.flushHeaders();
  // Small frames must leave at once.
  res.socket?.setNoDelay(true);

  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    if (keepAliveMs <= 0 || ended) return;
    if (timer) timer.refresh();
    else {
      timer = setTimeout(function tick() {
        if (ended) return;
        res.write(': keep-alive\n\n');
        timer = setTimeout(tick, keepAliveMs);
        timer.unref();
      }, keepAliveMs);
      timer.unref();
    }
  };
  const stop = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
  };

  res.on('close', () => {
    stop();
    if (!ended) {
      ended = true;
      controller.abort(new Error('client disconnected'));
    }
  });
  arm();

  const finish = (tail: string) => {
    if (ended) return;
    ended = true;
    stop();
    res.end(tail);
  };

  return {
    signal: controller.signal,
    get closed() {
      return ended;
    },
    async send(data) {
      if (ended) return false;
      arm();
      const ok = res.write(`data: ${JSON.stringify(data)}\n\n`);
      if (!ok && !ended) {
        await new Promise<void>((resolve) => {
          const done = () => {
            res.off('drain', done);
            res.off('close', done);
            resolve();
          };
          res.on('drain', done);
          res.on('close', done);
        });
      }
      return !ended;
    },
    comment(text) {
      if (ended) return false;
      arm();
      return res.write(`: ${text.replace(/[\r\n]+/g, ' ')}\n\n`);
    },
    done() {
      finish('data: [DONE]\n\n');
    },
    end() {
      finish('');
    },
  };
}
