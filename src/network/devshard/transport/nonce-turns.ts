/**
 * Calls of one escrow are composed in nonce order: a call whose nonce is ahead waits (bounded) for
 * the nonces before it to be composed; after the wait it goes on (its gap is filled with empty diffs).
 */
import type { DevshardSession } from '../session.js';

interface Turns {
  waiters: { nonce: bigint; resolve: () => void }[];
}

export class NonceTurns {
  private readonly turns = new Map<string, Turns>();

  constructor(private readonly orderWaitMs: number) {}

  /** Waits (bounded) until `nonce` is the session's next one. */
  async turn(escrowId: string, s: DevshardSession, nonce: bigint): Promise<void> {
    if (nonce <= s.latestNonce + 1n) return;
    const turns = this.turns;
    const orderWaitMs = this.orderWaitMs;
    let t = turns.get(escrowId);
    if (!t) turns.set(escrowId, (t = { waiters: [] }));
    const turns_ = t;
    await new Promise<void>((resolve) => {
      const w = { nonce, resolve };
      const timer = setTimeout(() => {
        turns_.waiters = turns_.waiters.filter((x) => x !== w);
        resolve();
      }, orderWaitMs);
      w.resolve = () => {
        clearTimeout(timer);
        resolve();
      };
      turns_.waiters.push(w);
    });
  }

  /** Wakes the calls whose nonce is now the session's next (or behind it). */
  wake(escrowId: string, s: DevshardSession): void {
    const t = this.turns.get(escrowId);
    if (!t) return;
    const next = s.latestNonce + 1n;
    const ready = t.waiters.filter((w) => w.nonce <= next);
    if (ready.length === 0) return;
    t.waiters = t.waiters.filter((w) => w.nonce > next);
    if (t.waiters.length === 0) this.turns.delete(escrowId);
    for (const w of ready) w.resolve();
  }
}
