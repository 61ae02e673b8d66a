/**
 * Large timelines page (issue 43): an escrow with 100,000 events opens in under a second, its first
 * page and its newest page alike, because a page reads `limit` events of each stream from a cursor
 * and folds nothing; paging forward and back returns every event once, in position order.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devshardSessionStream, escrowStream } from '../../src/events/catalog.js';
import { eventsFile, openSqliteEventStore, type SqliteEventStore } from '../../src/events/sqlite-store.js';
import type { ConsoleLog } from '../../src/console/log-source.js';
import { timelinePage, timelineStreams } from '../../src/console/timeline-page.js';
import { tempStorage } from '../helpers/store-fixtures.js';

const ESCROW = '77';
const EVENTS = 100_000;
const meta = { actor: { kind: 'chat' as const } };

describe('an escrow timeline of 100,000 events, by pages', () => {
  const storage = tempStorage('shardgate-console-');
  let store: SqliteEventStore;

  beforeAll(async () => {
    store = openSqliteEventStore(eventsFile(storage.dir));
    await store.append(escrowStream(ESCROW), [{ type: 'EscrowCreated', data: { escrowId: ESCROW, txHash: 'AB', height: 1, epoch: 0, creator: 'gonka1x', amount: '1000000000', model: 'm', role: 'regular', slots: [] }, metadata: { actor: { kind: 'admin' } } }], { expectedVersion: -1 });
    // Requests on the escrow and diffs on its session, interleaved as a serving gateway writes them.
    for (let n = 1; n < EVENTS; n += 2_000) {
      const batch = Array.from({ length: 1_000 }, (_, i) => ({ type: 'InferencesRecorded', data: { entries: [{ type: 'InferenceStarted', data: { requestId: `r${n + i}`, nonce: n + i, clientKeyId: null, reservedCost: '10', inputTokens: 1, maxTokens: 1 } }] }, metadata: meta }));
      await store.append(escrowStream(ESCROW), batch, { expectedVersion: 'any' });
      const acks = Array.from({ length: 1_000 }, (_, i) => ({ type: 'DevshardHostAcknowledged', data: { escrowId: ESCROW, host: 'http://h', nonce: n + i, stateHash: 'ab' }, metadata: meta }));
      await store.append(devshardSessionStream(ESCROW), acks, { expectedVersion: 'any' });
    }
  }, 120_000);

  afterAll(async () => {
    await store?.close();
    storage.cleanup();
  });

  for (const reader of ['event store'] as const) {
    const logOf = (): ConsoleLog => store;

    it(`${reader}: the first and the newest page each come in under a second`, async () => {
      const log = logOf();
      const streams = (await timelineStreams(log, ESCROW))!;
      expect(streams).toEqual([escrowStream(ESCROW), devshardSessionStream(ESCROW)]);
      let t = performance.now();
      const first = await timelinePage(log, ESCROW, streams, { limit: 100 });
      expect(performance.now() - t).toBeLessThan(1_000);
      expect(first.total).toBeGreaterThan(EVENTS);
      expect(first.entries[0]!.event).toBe('EscrowCreated');
      expect(first.before).toBeNull();
      t = performance.now();
      const newest = await timelinePage(log, ESCROW, streams, { before: 'end', limit: 100 });
      expect(performance.now() - t).toBeLessThan(1_000);
      expect(newest.after).toBeNull();
      expect(newest.entries.at(-1)!.position).toBe(log.lastPosition());
    });

    it(`${reader}: pages forward and back hold every event once, in position order`, async () => {
      const log = logOf();
      const streams = (await timelineStreams(log, ESCROW))!;
      // The last 2,500 events, walked backward, then forward again from where that ended.
      const back: number[] = [];
      let page = await timelinePage(log, ESCROW, streams, { before: 'end', limit: 500 });
      for (let i = 0; i < 5; i++) {
        back.unshift(...page.entries.map((e) => e.position));
        page = await timelinePage(log, ESCROW, streams, { before: page.before!.split('.').map(Number), limit: 500 });
      }
      const last = log.lastPosition();
      expect(back).toEqual(Array.from({ length: 2_500 }, (_, i) => last - 2_499 + i));
      const forward: number[] = [];
      let next = await timelinePage(log, ESCROW, streams, { after: page.after!.split('.').map(Number), limit: 500 });
      for (;;) {
        forward.push(...next.entries.map((e) => e.position));
        if (!next.after) break;
        next = await timelinePage(log, ESCROW, streams, { after: next.after.split('.').map(Number), limit: 500 });
      }
      expect(forward).toEqual(back);
    });
  }
});
