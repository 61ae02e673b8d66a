/**
 * Cancellation for one chat call: the part of AbortController/AbortSignal the request path uses.
 * Why not AbortController: on Node 20 the first listener on an AbortSignal (undici adds one per
 * request) costs ~5 µs (EventTarget set-up). Why not an EventEmitter either: undici registers with
 * `{ once: true }`, which costs an EventEmitter a wrapper per request. A call's signal has one or
 * two listeners and fires at most once, so a plain array does. undici takes any object with
 * addEventListener/removeEventListener as `signal`.
 */

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

export class CallSignal implements CancelSignal {
  aborted = false;
  reason: unknown = undefined;
  private listeners: (() => void)[] | undefined = undefined;

  /** Listeners run once, when the call is aborted (`once` or not: it is aborted once). */
  addEventListener(type: 'abort', listener: () => void, _options?: { once?: boolean }): void {
    if (type !== 'abort' || this.aborted) return;
    (this.listeners ??= []).push(listener);
  }

  removeEventListener(type: 'abort', listener: () => void): void {
    const list = this.listeners;
    if (type !== 'abort' || !list) return;
    const i = list.lastIndexOf(listener);
    if (i >= 0) list.splice(i, 1);
  }

  /** Marks the signal aborted and runs its listeners in the order they were added. */
  fire(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const list = this.listeners;
    this.listeners = undefined;
    if (list) for (const listener of list) listener();
  }
}

export class CallController implements CancelController {
  readonly signal = new CallSignal();

  abort(reason?: unknown): void {
    if (this.signal.aborted) return;
    this.signal.fire(reason ?? new DOMException('This operation was aborted', 'AbortError'));
  }
}
