/**
 * When a whole (non-stream) answer has left the process. A chat's concurrency slot is given back
 * then, not when the host finished (issue 39, item 1): an answer a client does not take stays in
 * the gateway's buffers, so it must keep counting against the limits. A client that leaves the
 * answer unsent for `slowClientTimeoutMs` has its connection ended.
 */
import type { ServerResponse } from 'node:http';

export interface DeliveryOptions {
  /** How long the unsent answer may wait on the client before the connection is ended; 0 disables. */
  slowClientTimeoutMs: number;
  /** Called just before a too-slow client's connection is ended. */
  onSlowClient?: () => void;
}

/**
 * Call before sending the answer. Resolves true once every byte was handed to the OS, false when
 * the connection closed first (the client left, or was ended as too slow).
 */
export function awaitDelivery(res: ServerResponse, opts: DeliveryOptions): Promise<boolean> {
  if (res.writableFinished) return Promise.resolve(!res.socket?.destroyed);
  if (res.destroyed) return Promise.resolve(false);
  // Node emits 'finish' also when the socket is destroyed with bytes unsent: only a finish on a
  // live socket means the bytes left the process.
  const socket = res.socket;
  return new Promise<boolean>((resolve) => {
    let watchdog: NodeJS.Timeout | undefined;
    const settle = (ok: boolean) => {
      if (watchdog) clearTimeout(watchdog);
      res.off('finish', onFinish);
      res.off('close', onClose);
      resolve(ok);
    };
    const onFinish = () => settle(!socket?.destroyed);
    const onClose = () => settle(res.writableFinished && !socket?.destroyed);
    res.once('finish', onFinish);
    res.once('close', onClose);
    if (opts.slowClientTimeoutMs > 0) {
      watchdog = setTimeout(() => {
        if (res.writableFinished || res.destroyed) return;
        opts.onSlowClient?.();
        res.destroy();
      }, opts.slowClientTimeoutMs);
      watchdog.unref();
    }
  });
}
