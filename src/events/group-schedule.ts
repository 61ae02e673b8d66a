/**
 * When a group commit forms its next batch, for both logs (sqlite/group-commit.ts,
 * postgres/writer.ts): appends queue; an append nobody may wait for (`withinMs`) waits at most
 * that long for a batch, any other goes at the next event-loop turn, so every append of one turn
 * shares a transaction; staged callbacks run right before a batch is formed, so what they append
 * joins it; a batch holds at most `maxBatchEvents` events, and what a full batch left behind goes
 * next. How a batch is written stays with each log.
 */
export interface GroupScheduleHooks {
  maxBatchEvents: number;
  /** No batch is formed now (closed, or one is being written; the writer calls `next` after it). */
  held: () => boolean;
  /** Forms and writes a batch from the queue (staged callbacks already ran). */
  flush: () => void;
}

export class GroupSchedule<T extends { events: readonly unknown[] }> {
  /** Appends waiting for a batch, in call order. */
  readonly queue: T[] = [];
  /** Callbacks to run right before the next batch is formed. */
  private readonly stagers = new Set<() => void>();
  private flushHandle: NodeJS.Immediate | undefined;
  /** The deadline of deferred work while no flush is scheduled. */
  private deferTimer: NodeJS.Timeout | undefined;
  /** The queue holds an append that was not deferred (or a leftover of a full batch): it goes next. */
  private urgent = false;

  constructor(private readonly hooks: GroupScheduleHooks) {}

  /** Queues an append: for the next turn's batch, or (withinMs > 0) at most that many ms later. */
  add(item: T, withinMs = 0): void {
    this.queue.push(item);
    if (withinMs > 0) this.defer(withinMs);
    else {
      this.urgent = true;
      this.soon();
    }
  }

  /** Runs `take` once right before the next batch is formed, however often it is staged before. */
  stage(take: () => void, withinMs = 0): void {
    this.stagers.add(take);
    if (withinMs > 0) this.defer(withinMs);
    else this.soon();
  }

  /** Appends put back at the head of the queue (the rest of a batch one append failed): next batch. */
  retry(items: T[]): void {
    this.queue.unshift(...items);
    this.urgent = true;
    this.soon();
  }

  /** A batch is formed at the next event-loop turn (unless one is already scheduled). */
  soon(): void {
    this.flushHandle ??= setImmediate(() => this.flush());
  }

  /** Runs the staged callbacks now (their appends queue up) and ends any deferral. */
  takeStaged(): void {
    if (this.deferTimer) {
      clearTimeout(this.deferTimer);
      this.deferTimer = undefined;
    }
    if (this.stagers.size === 0) return;
    const takes = [...this.stagers];
    this.stagers.clear();
    for (const take of takes) take();
  }

  /** The queue's head, up to `maxBatchEvents` events (at least one append). */
  takeBatch(): T[] {
    let events = 0;
    let n = 0;
    while (n < this.queue.length) {
      events += this.queue[n]!.events.length;
      n++;
      if (events >= this.hooks.maxBatchEvents) break;
    }
    const batch = this.queue.splice(0, n);
    this.urgent = this.queue.length > 0;
    return batch;
  }

  /** After a batch was written: the next one now if anything is due (`alsoDue`: the writer's own work). */
  next(alsoDue = false): void {
    // Deferred work still inside its withinMs waits for its timer; anything else goes now.
    const deferredDue = (this.queue.length > 0 || this.stagers.size > 0) && !this.deferTimer;
    if (((this.urgent && this.queue.length > 0) || deferredDue || alsoDue) && !this.hooks.held()) this.soon();
  }

  /** Drops the scheduled flush and deferral (closing, or the caller drains the queue itself). */
  cancel(): void {
    if (this.flushHandle) clearImmediate(this.flushHandle);
    if (this.deferTimer) clearTimeout(this.deferTimer);
    this.flushHandle = this.deferTimer = undefined;
  }

  private defer(ms: number): void {
    if (!this.flushHandle) this.deferTimer ??= setTimeout(() => this.deferDue(), ms);
  }

  /** The deferred work's deadline passed: form a batch (or, while one is being written, right after it). */
  private deferDue(): void {
    this.deferTimer = undefined;
    this.soon();
  }

  private flush(): void {
    this.flushHandle = undefined;
    if (this.hooks.held()) return; // what queues meanwhile is the next batch
    this.takeStaged();
    if (this.flushHandle) {
      // The staged appends scheduled a flush of their own: this one takes them.
      clearImmediate(this.flushHandle);
      this.flushHandle = undefined;
    }
    this.hooks.flush();
  }
}
