/**
 * What a group commit tells after a batch is on disk: the counters, the commit listeners and live
 * subscriptions (in position order), then each appender's promise.
 */
import { Subject, type Observable } from 'rxjs';
import type { RecordedEvent } from '../envelope.js';
import type { AppendResult, CommitListener, StoreStats } from '../store.js';
import type { PendingAppend } from './prepare.js';

export class CommitNotifier {
  private readonly listeners = new Set<CommitListener>();
  private readonly committed$ = new Subject<RecordedEvent[]>();
  private readonly counters: StoreStats = { commits: 0, appends: 0, events: 0, conflicts: 0 };
  private notifyingFlag = false;

  constructor(private readonly onListenerError: (error: unknown) => void) {}

  /** True while commit listeners and subscribers run (a synchronous append then would reorder batches). */
  get notifying(): boolean {
    return this.notifyingFlag;
  }

  /** Batches of committed records, in position order (what live subscriptions follow). */
  get commits(): Observable<RecordedEvent[]> {
    return this.committed$;
  }

  stats(): StoreStats {
    return { ...this.counters };
  }

  onCommit(listener: CommitListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Counts the commit and hands its records to the listeners, then the subscriptions. */
  publish(committed: RecordedEvent[]): void {
    this.counters.commits++;
    this.counters.events += committed.length;
    if (committed.length === 0) return;
    this.notifyingFlag = true;
    try {
      for (const listener of this.listeners) {
        try {
          listener(committed);
        } catch (error) {
          this.onListenerError(error);
        }
      }
      this.committed$.next(committed);
    } finally {
      this.notifyingFlag = false;
    }
  }

  /** Settles each append of the batch with its outcome (a version conflict rejects that one only). */
  settle(batch: PendingAppend[], outcomes: (AppendResult | Error)[]): void {
    for (let i = 0; i < batch.length; i++) {
      const outcome = outcomes[i]!;
      if (outcome instanceof Error) {
        this.counters.conflicts++;
        batch[i]!.reject(outcome);
      } else {
        this.counters.appends++;
        batch[i]!.resolve(outcome);
      }
    }
  }

  /** The log closed: live subscriptions end. */
  complete(): void {
    this.committed$.complete();
  }
}
