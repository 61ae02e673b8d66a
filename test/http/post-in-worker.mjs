/**
 * Sends one chat body with fetch from a worker thread, so the client has an event loop of its own,
 * as a real client does: in the server's own loop, the client's writes and the server's reads take
 * turns, and a server closing on a client still sending did not show (large-bodies.test.ts).
 * workerData: { url, size, chunked, authorization }; posts back { status, connection, text } or { error }.
 */
import { parentPort, workerData } from 'node:worker_threads';

const { url, size, chunked, authorization } = workerData;
const head = '{"model":"m","messages":[{"role":"user","content":"';
const tail = '"}]}';
const body = Buffer.from(head + 'x'.repeat(size - head.length - tail.length) + tail);
const PIECE = 64 * 1024;

try {
  const init = chunked
    ? {
        // A stream body has no Content-Length: sent chunked, so the server finds it too large while reading.
        body: new ReadableStream({
          start(controller) {
            for (let i = 0; i < body.length; i += PIECE) controller.enqueue(body.subarray(i, i + PIECE));
            controller.close();
          },
        }),
        duplex: 'half',
      }
    : { body };
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization }, ...init });
  parentPort.postMessage({ status: res.status, connection: res.headers.get('connection'), text: await res.text() });
} catch (err) {
  parentPort.postMessage({ error: `${err.message} (${err.cause?.code ?? err.cause?.message ?? 'no cause'})` });
}
