/**
 * One HTTP exchange whose answer is read whole (a non-streamed chat completion), over undici's
 * `dispatch` with a plain handler instead of `request()`.
 *
 * Why: `request()` wraps every answer in a Readable stream, a promise per consumption step and a
 * signal adapter. For a whole answer none of that is needed; on a zero-delay host this handler
 * costs ~20–30 µs less main-thread CPU per request than `request()` + `body.text()`
 * (docs/lab/benchmarks-notebook.md, session 7). Streamed answers keep `request()`: their body is consumed as a
 * stream.
 */
import type { Dispatcher } from 'undici';
import type { CancelSignal } from './call-signal.js';

export interface WholeAnswer {
  statusCode: number;
  /** The body as UTF-8 text; of a non-2xx answer at most `errorBodyLimit` bytes of it. */
  text: string;
}

/** Rejection of `fetchWhole`: the transport's error, and whether the answer had begun. */
export class WholeAnswerError extends Error {
  constructor(
    override readonly cause: unknown,
    /** True when the status line and headers had arrived (the body broke, not the connection). */
    readonly afterHeaders: boolean,
  ) {
    super(String((cause as Error | null)?.message ?? cause));
  }
}

/** Ends a non-2xx body read once the limit is reached (the message is in its start). */
const ENOUGH = new Error('error body limit reached');

/**
 * Sends `opts` on `dispatcher` and resolves with the whole answer. `signal` aborting closes the
 * connection (the server sees the request cancelled) and rejects. Rejects with WholeAnswerError.
 */
export function fetchWhole(dispatcher: Dispatcher, opts: Dispatcher.DispatchOptions, signal: CancelSignal, errorBodyLimit: number): Promise<WholeAnswer> {
  return new Promise<WholeAnswer>((resolve, reject) => {
    let statusCode = 0;
    let headers = false;
    let size = 0;
    let first: Buffer | undefined;
    let parts: Buffer[] | undefined;
    let abortConnection: ((reason: Error) => void) | undefined;
    let settled = false;
    const onAbort = (): void => abortConnection?.(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    const text = (): string => (parts ? Buffer.concat(parts, size).toString('utf8') : first ? first.toString('utf8') : '');
    const settle = (): void => {
      settled = true;
      signal.removeEventListener('abort', onAbort);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    dispatcher.dispatch(opts, {
      onConnect(abort) {
        abortConnection = abort as (reason: Error) => void;
        if (signal.aborted) onAbort();
      },
      onHeaders(status) {
        statusCode = status;
        headers = true;
        return true;
      },
      onData(chunk) {
        if (statusCode >= 300 || statusCode < 200) {
          if (size >= errorBodyLimit) return true;
          if (size + chunk.length > errorBodyLimit) chunk = chunk.subarray(0, errorBodyLimit - size);
        }
        size += chunk.length;
        if (first === undefined) first = chunk;
        else (parts ??= [first]).push(chunk);
        if ((statusCode >= 300 || statusCode < 200) && size >= errorBodyLimit) abortConnection?.(ENOUGH);
        return true;
      },
      onComplete() {
        if (settled) return;
        settle();
        resolve({ statusCode, text: text() });
      },
      onError(err) {
        if (settled) return;
        settle();
        // An error answer's message is best effort: what came before the break is enough.
        if (err === ENOUGH || (headers && (statusCode < 200 || statusCode >= 300))) resolve({ statusCode, text: text() });
        else reject(new WholeAnswerError(err, headers));
      },
    });
  });
}
