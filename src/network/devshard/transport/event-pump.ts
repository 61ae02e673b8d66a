/** Reading a host's SSE answer event by event, each within a time limit. */
import type { Dispatcher } from 'undici';
import { SseParser, type SseEvent } from '../../sse.js';

/** No event came within the time limit. */
export class Stalled extends Error {}

/** Reads SSE data payloads one by one, each within a time limit; the body is destroyed on close. */
export class EventPump {
  private readonly it: AsyncIterator<unknown>;
  private readonly parser = new SseParser();
  private queue: SseEvent[] = [];
  private qi = 0;
  private ended = false;
  /** The stream's text as read (capture only). */
  text = '';

  constructor(
    private readonly body: Dispatcher.ResponseData['body'],
    private readonly keepText: boolean,
  ) {
    this.it = body[Symbol.asyncIterator]();
  }

  /** The next data payload, undefined at the end of the stream; throws Stalled after `timeoutMs` of silence. */
  async next(timeoutMs: number): Promise<string | undefined> {
    for (;;) {
      if (this.qi < this.queue.length) return this.queue[this.qi++]!.data;
      this.queue = [];
      this.qi = 0;
      if (this.ended) return undefined;
      let timer: NodeJS.Timeout | undefined;
      const r = await Promise.race([
        this.it.next(),
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Stalled()), Math.max(1, timeoutMs)))),
      ]).finally(() => clearTimeout(timer));
      if (r.done) {
        this.ended = true;
        this.parser.end(this.queue);
        continue;
      }
      const chunk = r.value as Buffer;
      if (this.keepText) this.text += chunk.toString('utf8');
      this.parser.push(chunk, this.queue);
    }
  }

  closed = false;

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.body.destroy();
  }
}
