/**
 * The heartbeat task's timer (gateway/workers/heartbeats.ts): a pass with nothing to do ends at once, and
 * the next tick must run a new pass. (A pass that ended synchronously used to leave its promise
 * set for good: every later tick returned it, and no span was ever sent by the timer; the e2e tests
 * drove tick() by hand after an awaited pass, so they did not see it.)
 */
import { describe, expect, it } from 'vitest';
import { startHeartbeats } from '../../src/gateway/workers/heartbeats.js';
import type { GatewayContext } from '../../src/gateway/context.js';

describe('startHeartbeats', () => {
  it('runs a new pass at each tick after an empty one', async () => {
    let passes = 0;
    const ctx = { projections: { pool: { all: () => (passes++, []) } } } as unknown as GatewayContext;
    const task = startHeartbeats(ctx, { idleMs: 0 });
    expect(await task.tick()).toBe(0);
    expect(await task.tick()).toBe(0);
    expect(await task.tick()).toBe(0);
    expect(passes).toBe(3);
    await task.stop();
  });
});
