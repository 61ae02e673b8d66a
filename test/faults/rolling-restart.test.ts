/**
 * A rolling restart of three instances on one PostgreSQL log, under chat load sent as a reverse
 * proxy would (scale-out-cluster.ts: the next instance on a refused connection or a 503): each
 * instance in turn is stopped with SIGTERM (it stops accepting, drains its requests, hands its
 * escrows over at once) and started again (it takes its share back by hand-over). Every request
 * is answered; the hosts saw every nonce once; the log verifies and the money adds up.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ScaleOutCluster } from './scale-out-cluster.js';

describe('a rolling restart of every instance under load', () => {
  const c = new ScaleOutCluster(['r1', 'r2', 'r3'], 2_000);
  beforeAll(() => c.setUp(), 60_000);
  afterAll(() => c.tearDown());

  it('answers every request', { timeout: 240_000 }, async () => {
    for (const name of c.names) await c.start(name);
    const ids = await c.createEscrows('r1', 3, c.names);
    const stop = new AbortController();
    const running = c.load(6, stop.signal);
    await c.answersReach(10);
    for (const name of c.names) {
      expect(await c.terminate(name), c.logs()).toBe(0);
      await c.answersReach(c.answers.length + 5); // served by the others meanwhile
      await c.start(name);
      await c.until(`${name} holds an escrow again`, async () => Object.values(await c.owners()).includes(name), 30_000);
      await c.answersReach(c.answers.length + 5);
    }
    stop.abort();
    await running;
    expect(c.unanswered, c.logs()).toEqual([]);
    await c.quiet(c.names);
    await c.settleAll('r1', ids);
    for (const name of c.names) expect(await c.terminate(name)).toBe(0);
    await c.checkAll(ids);
    console.log(`rolling restart of 3 instances: ${c.answers.length} complete answers, none unanswered`);
  });
});
