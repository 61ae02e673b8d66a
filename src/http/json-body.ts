/**
 * Reading a JSON request body within its limit, and answering a body that is too large so that the
 * client can read the answer (issue 41, item 8).
 *
 * fastify's own reader (`parseAs`) refused a body over the limit at once, and its error answer
 * carries `Connection: close`; Node's server then closes the socket as soon as the answer is
 * written, with the client still sending. Closing a socket with unread bytes makes the kernel
 * reset the connection, and a client that had not read the answer yet lost it: `fetch` failed with
 * EPIPE, curl with exit 55. Here the rest of the body is read and discarded (up to a bound), and
 * the connection closes once the client has sent it all.
 */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { errorCodes, type FastifyRequest } from 'fastify';
import { clip } from '../gateway/errors.js';
import { ApiError } from './api-error.js';
import { formatByteLimit } from './errors.js';

export interface JsonBodyOptions {
  /** The server-wide limit (GATEWAY_MAX_BODY_BYTES); a route may set its own (`bodyLimit`). */
  serverLimit: number;
  /** Routes (`METHOD url`) declared with their own bodyLimit: their 413 does not name the variable. */
  ownLimitRoutes: ReadonlySet<string>;
  /** Bytes of a refused body read and discarded before the connection is cut. */
  discardBytes: number;
  /** Parses the whole body, once read (fastify's content-type parser callback). */
  parse: (request: FastifyRequest, text: string, done: (err: Error | null, body?: unknown) => void) => void;
}

/** The 413 a body over `limit` gets: the limit, and the variable that raises it when it applies. */
export function bodyTooLarge(request: FastifyRequest, limit: number, opts: Pick<JsonBodyOptions, 'serverLimit' | 'ownLimitRoutes'>): ApiError {
  const route = request.routeOptions.url ?? 'this route';
  const own = opts.ownLimitRoutes.has(`${request.method} ${route}`) || limit !== opts.serverLimit;
  const raise = own ? '' : '; the gateway operator can raise the limit with GATEWAY_MAX_BODY_BYTES';
  return new ApiError(413, `Request body is too large: ${route} accepts at most ${formatByteLimit(limit)}${raise}.`, { code: 'request_too_large' });
}

/**
 * A fastify content-type parser (stream form) reading the body as fastify's `parseAs: 'string'`
 * does, with the route's limit. A refusal before the body ended reads the rest of it (see
 * drainThenClose). The caller's `parse` gets the text; an empty body is "no body".
 */
export function jsonBodyReader(opts: JsonBodyOptions) {
  return (request: FastifyRequest, payload: Readable, done: (err: Error | null, body?: unknown) => void): void => {
    const refuse = (err: Error): void => {
      drainThenClose(request.raw, opts.discardBytes);
      done(err, undefined);
    };
    // A compressed body would be parsed as text and refused as invalid JSON, which misleads: say what is wrong.
    const encoding = request.headers['content-encoding'];
    if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
      return refuse(new ApiError(415, `Content-Encoding '${clip(encoding, 64)}' is not supported; send the JSON body uncompressed.`, { code: 'unsupported_content_encoding' }));
    }
    const limit = request.routeOptions.bodyLimit;
    const contentLength = Number(request.headers['content-length']);
    if (contentLength > limit) return refuse(bodyTooLarge(request, limit, opts));

    const chunks: Buffer[] = [];
    let received = 0;
    const stop = (): void => {
      payload.removeListener('data', onData);
      payload.removeListener('end', onEnd);
      payload.removeListener('error', onError);
    };
    function onData(chunk: Buffer): void {
      received += chunk.length;
      if (received > limit) {
        stop();
        chunks.length = 0;
        refuse(bodyTooLarge(request, limit, opts));
        return;
      }
      chunks.push(chunk);
    }
    function onEnd(): void {
      stop();
      // As fastify's reader: only a transformed payload can differ (Node's parser reads Content-Length bytes).
      if (!Number.isNaN(contentLength) && received !== contentLength) return done(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH(), undefined);
      const text = chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks, received).toString('utf8');
      if (text.trim() === '') return done(null, undefined);
      opts.parse(request, text, done);
    }
    function onError(err: Error & { statusCode?: number }): void {
      stop();
      // The client left mid-body ('aborted'): a client error, as fastify's reader says.
      if (!(typeof err.statusCode === 'number' && err.statusCode >= 400)) err.statusCode = 400;
      done(err, undefined);
    }
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onError);
    payload.resume();
  };
}

/**
 * Called when a request is answered before its body has all arrived (the answer carries
 * `Connection: close`): reads and discards the rest, up to `boundBytes`, and closes the connection
 * once the client has sent it all, so the client, still writing, gets to read the answer. Beyond
 * the bound the connection is cut at once (a client sending without end gets no more of our time;
 * GATEWAY_REQUEST_RECEIVE_TIMEOUT_MS bounds a slow one).
 *
 * Node's server ends a `Connection: close` answer with `socket.destroySoon()`: FIN, then destroy as
 * soon as the answer is flushed. The destroy is what resets a connection with unread bytes, so for
 * this socket it waits for the end of the body. (Node offers no option for it.)
 */
export function drainThenClose(req: IncomingMessage, boundBytes: number): void {
  const socket = req.socket;
  if (req.complete || socket.destroyed) return;
  let discarded = 0;
  req.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > boundBytes) socket.destroy();
  });
  req.resume();
  const destroySoon = socket.destroySoon;
  socket.destroySoon = function lingeringDestroySoon(this: typeof socket) {
    this.destroySoon = destroySoon;
    // The answer is complete: FIN now, so the client sees its end (Connection: close), and keep
    // reading (Node's server sockets are half-open).
    if (this.writable) this.end();
    if (req.complete) destroySoon.call(this);
    else req.once('end', () => destroySoon.call(this));
  };
}
