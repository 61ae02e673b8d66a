/**
 * OpenAI-style server-sent events on a raw Node response: `data: <json>\n\n` frames, `: keep-alive`
 * comments while the upstream is silent (so proxies and clients do not time out a slow host), and
 * `data: [DONE]\n\n` at the end. The writer's `signal` aborts when the client goes away, so the
 * handler can cancel the host request and still account the usage delivered so far.
 *
 * Slow clients: a frame is written only while the response's unsent bytes are under its high-water
 * mark (the server's GATEWAY_SLOW_CLIENT_MAX_UNSENT_BYTES); beyond it `send` waits for 'drain'. A
 * client that leaves the gateway waiting (a full buffer, or a complete answer not all taken) for
 * `slowClientTimeoutMs` has its connection ended, so an unread stream holds neither memory nor its
 * concurrency slot without bound. `delivered()` says when the answer left the process (issue 39).
 */
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';

export interface SseOptions {
  /** Comment sent after this many ms without a write; 0 disables. Default 15000. */
  keepAliveMs?: number;
  /** Extra response headers (e.g. x-request-id). */
  headers?: Record<string, string | number | string[]>;
  status?: number;
  /**
   * How long the writer may wait on the client (unsent bytes over the high-water mark, or the ended
   * answer not yet all taken) before the connection is ended; 0 disables. Default 30000.
   */
  slowClientTimeoutMs?: number;
  /** Called just before a too-slow client's connection is ended. */
  onSlowClient?: () => void;
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
  /**
   * After `done()`/`end()`: resolves true once every byte was handed to the OS ('finish'), false
   * when the connection closed first (client left, or ended as too slow; see `slowClientCut`).
   */
  delivered(): Promise<boolean>;
  /** True when the writer ended the connection because the client did not take its bytes in time. */
  readonly slowClientCut: boolean;
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
  const slowClientTimeoutMs = options.slowClientTimeoutMs ?? 30_000;
  let finished = false;
  let slowClientCut = false;
  let finishing = false;

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
        // A client that does not read needs no keep-alive: it would only pile up unsent bytes.
        if (!res.writableNeedDrain) res.write(': keep-alive\n\n');
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

  // The slow-client watchdog runs while the writer waits on the client: a drain wait, or the ended
  // answer's last bytes still in the gateway. It is cleared by 'drain', 'finish' and 'close'.
  let watchdog: NodeJS.Timeout | undefined;
  const waitOnClient = () => {
    if (slowClientTimeoutMs <= 0 || watchdog || res.destroyed) return;
    watchdog = setTimeout(() => {
      watchdog = undefined;
      if (finished || res.destroyed) return;
      slowClientCut = true;
      options.onSlowClient?.();
      res.destroy();
    }, slowClientTimeoutMs);
    watchdog.unref();
  };
  const clientTook = () => {
    if (watchdog) clearTimeout(watchdog);
    watchdog = undefined;
  };
  res.on('drain', () => {
    if (!finishing) clientTook();
  });
  // Node emits 'finish' also when the socket is destroyed with bytes unsent (their write callbacks
  // fail): only a finish on a live socket means the bytes left the process.
  const socket = res.socket;
  res.on('finish', () => {
    finished = !socket?.destroyed;
    clientTook();
  });
  const clientLeft = () => {
    stop();
    clientTook();
    if (!ended) {
      ended = true;
      controller.abort(new Error('client disconnected'));
    }
  };
  res.on('close', clientLeft);
  // The client may have left before the stream opened (while the request was being routed): its
  // 'close' has been emitted already and will not come again, so nothing would ever wake a writer
  // waiting on it (a request that held its concurrency slot forever).
  if (res.destroyed || res.closed || res.socket?.destroyed === true) clientLeft();
  arm();

  const finish = (tail: string) => {
    if (ended) return;
    ended = true;
    finishing = true;
    stop();
    res.end(tail);
    if (!finished && !res.destroyed) waitOnClient();
  };
  let deliveredP: Promise<boolean> | undefined;

  return {
    signal: controller.signal,
    get closed() {
      return ended;
    },
    async send(data) {
      if (ended) return false;
      arm();
      const ok = res.write(`data: ${JSON.stringify(data)}\n\n`);
      if (!ok && !ended && (res.destroyed || res.socket?.destroyed === true)) clientLeft();
      if (!ok && !ended) {
        waitOnClient();
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
    get slowClientCut() {
      return slowClientCut;
    },
    delivered() {
      return (deliveredP ??= finished
        ? Promise.resolve(true)
        : res.destroyed || res.closed
          ? Promise.resolve(false)
          : new Promise<boolean>((resolve) => {
              const onFinish = () => {
                res.off('close', onClose);
                resolve(finished);
              };
              const onClose = () => {
                res.off('finish', onFinish);
                resolve(finished);
              };
              res.once('finish', onFinish);
              res.once('close', onClose);
            }));
    },
  };
}
