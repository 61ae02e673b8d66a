/**
 * The client leaving does not close the host's stream: it is read on (bounded) so the meta event's
 * Finish reaches a later diff, as devshardctl does.
 */
import { readHostEvent } from '../host-events.js';
import type { DevshardSession } from '../session.js';
import type { AnswerLines } from '../error-miss.js';
import type { TransportContext } from './context.js';
import type { EventPump } from './event-pump.js';

/** Reads the rest of a host stream for its meta (bounded); never throws. */
export function drain(ctx: TransportContext, s: DevshardSession, url: string, pump: EventPump, deadline: number, done: () => void, answer?: AnswerLines, ended?: () => void): Promise<void> {
  const { now, drains } = ctx;
  const p = (async () => {
    try {
      for (;;) {
        const left = deadline - now();
        if (left <= 0) break;
        const data = await pump.next(left);
        if (data === undefined) break;
        const ev = readHostEvent(data);
        if (ev.kind === 'meta') s.onMempool(ev.mempool, url);
        else answer?.add(data);
      }
    } catch {
      /* best effort: the Finish stays in the host's mempool for a later answer */
    } finally {
      pump.close();
      done();
      ended?.();
    }
  })();
  drains.add(p);
  void p.finally(() => drains.delete(p));
  return p;
}
