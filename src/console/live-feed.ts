/**
 * The console's live feed: one subscription to the log (the store's commits, in memory: no query
 * per event) shared by every open page, fanned out to each page's bounded queue and written as
 * server-sent events. A page that falls more than `LIVE_QUEUE_LIMIT` events behind loses the
 * oldest ones and is told how many (`gap`); the subscription ends when the last page leaves.
 */
import type { FastifyReply } from 'fastify';
import type { Subscription } from 'rxjs';
import type { RecordedEvent } from '../events/envelope.js';
import { openSse, type SseWriter } from '../http/sse.js';
import { eventView, type EventView } from './event-view.js';
import type { ConsoleLog } from './log-source.js';

export const LIVE_QUEUE_LIMIT = 1_000;

type LiveFrame = { type: 'hello'; position: number } | { type: 'event'; event: Omit<EventView, 'details'> } | { type: 'gap'; dropped: number };

class LiveClient {
  private readonly queue: LiveFrame[] = [];
  private dropped = 0;
  private pumping = false;

  constructor(
    readonly writer: SseWriter,
    private readonly escrowId: string | undefined,
  ) {}

  offer(r: RecordedEvent): void {
    if (this.escrowId !== undefined && r.streamId !== `escrow-${this.escrowId}` && r.streamId !== `devshard-session-${this.escrowId}`) return;
    const { details: _details, ...event } = eventView(r);
    this.queue.push({ type: 'event', event });
    if (this.queue.length > LIVE_QUEUE_LIMIT) {
      this.queue.shift();
      this.dropped++;
    }
    void this.pump();
  }

  async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (!this.writer.closed) {
        if (this.dropped > 0) {
          const dropped = this.dropped;
          this.dropped = 0;
          await this.writer.send({ type: 'gap', dropped });
          continue;
        }
        const frame = this.queue.shift();
        if (!frame) break;
        await this.writer.send(frame);
      }
    } finally {
      this.pumping = false;
    }
  }
}

export class LiveFeed {
  private readonly clients = new Set<LiveClient>();
  private subscription: Subscription | undefined;

  constructor(private readonly log: ConsoleLog) {}

  /** Streams committed events to `reply` until the client leaves. */
  open(reply: FastifyReply, escrowId?: string): void {
    const writer = openSse(reply, { keepAliveMs: 15_000 });
    const client = new LiveClient(writer, escrowId);
    this.clients.add(client);
    const position = this.log.lastPosition();
    void writer.send({ type: 'hello', position });
    this.subscription ??= this.log.subscribe(position).subscribe({
      next: (r) => {
        for (const c of this.clients) c.offer(r);
      },
      error: () => this.closeAll(),
      complete: () => this.closeAll(),
    });
    writer.signal.addEventListener('abort', () => this.leave(client), { once: true });
  }

  /** Open pages (tests and metrics). */
  get size(): number {
    return this.clients.size;
  }

  private leave(client: LiveClient): void {
    this.clients.delete(client);
    if (this.clients.size === 0) {
      this.subscription?.unsubscribe();
      this.subscription = undefined;
    }
  }

  closeAll(): void {
    for (const c of this.clients) c.writer.end();
    this.clients.clear();
    this.subscription?.unsubscribe();
    this.subscription = undefined;
  }
}
