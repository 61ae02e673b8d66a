/**
 * Cancellation for one chat call: the part of AbortController/AbortSignal the request path uses,
 * on an EventEmitter. Why not AbortController: on Node 20 the first listener on an AbortSignal
 * (undici adds one per request) costs ~5 µs (EventTarget set-up); this costs ~0.1 µs. undici takes
 * either as `signal` ("an EventEmitter or EventTarget"); it prefers addEventListener, provided here.
 */
import { EventEmitter } from 'node:events';

/** What the transports read from a call's signal; an AbortSignal is one too. */
export interface CancelSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** Who can cancel a call; an AbortController is one too. */
export interface CancelController {
  readonly signal: CancelSignal;
  abort(reason?: unknown): void;
}

export class CallSignal extends EventEmitter implements CancelSignal {
  aborted = false;
  reason: unknown = undefined;

  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void {
    if (options?.once) this.once(type, listener);
    else this.on(type, listener);
  }

  removeEventListener(type: 'abort', listener: () => void): void {
    this.off(type, listener);
  }
}

export class CallController implements CancelController {
  readonly signal = new CallSignal();

  abort(reason?: unknown): void {
    const s = this.signal;
    if (s.aborted) return;
    s.aborted = true;
    s.reason = reason ?? new DOMException('This operation was aborted', 'AbortError');
    s.emit('abort');
  }
}
