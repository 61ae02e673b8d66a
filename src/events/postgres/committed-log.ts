/**
 * What this instance knows of the shared log, in memory: how far it has heard (its tail), each
 * stream's head, and whom to tell. Everything reaches it through `deliver`, from this instance's
 * own commits (writer.ts) and from following the others' (follower.ts), always as a contiguous
 * run of positions; what was heard already is skipped. So `onCommit` listeners and live
 * subscriptions hear every event of the shared log once, in position order, whichever instance
 * wrote it, and `lastPosition` / `streamVersion` answer without a query.
 */
import { Subject, type Observable } from 'rxjs';
import type { RecordedEvent } from '../envelope.js';
import type { CommitListener } from '../store.js';

export class CommittedLog {
  private heard: number;
  private readonly versions: Map<string, number>;
  private readonly listeners = new Set<CommitListener>();
  private readonly delivered$ = new Subject<RecordedEvent[]>();

  constructor(
    position: number,
    versions: Map<string, number>,
    private readonly onListenerError: (error: unknown) => void,
  ) {
    this.heard = position;
    this.versions = versions;
  }

  /** Last position heard (own commits and followed ones). */
  get position(): number {
    return this.heard;
  }

  /** A stream's head as heard, -1 when absent. */
  versionOf(streamId: string): number {
    return this.versions.get(streamId) ?? -1;
  }

  /** Runs of records as delivered, in position order (what live subscriptions follow). */
  get commits(): Observable<RecordedEvent[]> {
    return this.delivered$;
  }

  onCommit(listener: CommitListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Takes a run of committed records in position order (contiguous), skips what was heard already,
   * and tells the listeners and subscribers synchronously. Returns what was new.
   */
  deliver(records: readonly RecordedEvent[]): RecordedEvent[] {
    let i = 0;
    while (i < records.length && records[i]!.position <= this.heard) i++;
    if (i === records.length) return [];
    const fresh = i === 0 ? [...records] : records.slice(i);
    if (fresh[0]!.position !== this.heard + 1) {
      // Cannot happen while positions commit in order (writer.ts); refuse rather than skip.
      throw new Error(`event log followed out of order: heard up to ${this.heard}, then position ${fresh[0]!.position}`);
    }
    for (const r of fresh) this.versions.set(r.streamId, r.streamVersion);
    this.heard = fresh[fresh.length - 1]!.position;
    for (const listener of this.listeners) {
      try {
        listener(fresh);
      } catch (error) {
        this.onListenerError(error);
      }
    }
    this.delivered$.next(fresh);
    return fresh;
  }

  /** No more deliveries: live subscriptions complete. */
  close(): void {
    this.delivered$.complete();
  }
}
