import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GroupSchedule } from '../../src/events/group-schedule.js';

// The batching both logs share (SQLite's group commit, PostgreSQL's writer), on fake timers so the
// test decides when a turn or a deferral's deadline comes.
type Item = { name: string; events: unknown[] };
const item = (name: string, events = 1): Item => ({ name, events: Array.from({ length: events }, () => ({})) });

function harness(maxBatchEvents = 10) {
  const batches: string[][] = [];
  let held = false;
  const s: GroupSchedule<Item> = new GroupSchedule<Item>({
    maxBatchEvents,
    held: () => held,
    flush: () => {
      if (s.queue.length > 0) batches.push(s.takeBatch().map((i) => i.name));
    },
  });
  return { s, batches, hold: (h: boolean) => (held = h) };
}

describe('GroupSchedule', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('puts every append of one turn in one batch, at the next turn', () => {
    const { s, batches } = harness();
    s.add(item('a'));
    s.add(item('b'));
    expect(batches).toEqual([]);
    vi.advanceTimersToNextTimer();
    expect(batches).toEqual([['a', 'b']]);
  });

  it('keeps a deferred append until its deadline, unless another append forms a batch first', () => {
    const { s, batches } = harness();
    s.add(item('late'), 50);
    vi.advanceTimersByTime(49);
    expect(batches).toEqual([]);
    vi.advanceTimersByTime(1);
    vi.advanceTimersToNextTimer();
    expect(batches).toEqual([['late']]);

    s.add(item('deferred'), 50);
    s.add(item('now'));
    vi.advanceTimersToNextTimer();
    expect(batches[1]).toEqual(['deferred', 'now']);
  });

  it('runs a staged callback once, right before the batch it appends to', () => {
    const { s, batches } = harness();
    let runs = 0;
    const take = () => {
      runs++;
      s.add(item(`staged${runs}`));
    };
    s.stage(take);
    s.stage(take);
    s.add(item('a'));
    vi.advanceTimersToNextTimer();
    expect(runs).toBe(1);
    expect(batches).toEqual([['a', 'staged1']]);
  });

  it('caps a batch at maxBatchEvents; the rest goes next, deferred or not', () => {
    const { s, batches } = harness(3);
    s.add(item('a', 2));
    s.add(item('b', 2));
    s.add(item('c', 1), 1_000);
    vi.advanceTimersToNextTimer();
    expect(batches).toEqual([['a', 'b']]);
    s.next();
    vi.advanceTimersToNextTimer();
    expect(batches).toEqual([['a', 'b'], ['c']]);
  });

  it('forms no batch while held; the writer asks for the next one when it is done', () => {
    const { s, batches, hold } = harness();
    hold(true);
    s.add(item('a'));
    vi.runAllTimers();
    expect(batches).toEqual([]);
    hold(false);
    s.next();
    vi.advanceTimersToNextTimer();
    expect(batches).toEqual([['a']]);
  });

  it('puts retried appends first', () => {
    const { s, batches } = harness();
    s.add(item('b'), 1_000);
    s.retry([item('a')]);
    vi.advanceTimersToNextTimer();
    expect(batches).toEqual([['a', 'b']]);
  });
});
