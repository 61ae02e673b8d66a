/**
 * A fold split by stream (partitioned-rebuild.ts) equals the sequential rebuild: logs written
 * through the real SQLite store — many escrow streams created through intents (some failing),
 * imported, deactivated and reactivated (routable order), drained, finalized, settled or failing
 * to settle under rotation decisions, settings changes, refused and odd events, request data the
 * fast read does not take — rebuilt split into 2, 3 and 5 partitions (on this thread, and on
 * worker threads when the compiled worker is there) and compared with
 * `Projections.rebuild(store.readAll())`: checkpoint and snapshot JSON (key order included), and
 * the orders a snapshot does not show (escrows, routable sets, pending creates).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS, createIntentStream, escrowStream, settingsStream, type CatalogEvent } from '../../src/events/catalog.js';
import type { EventMetadata } from '../../src/events/envelope.js';
import { openSqliteEventStore, type SqliteEventStore } from '../../src/events/sqlite-store.js';
import { foldPartitioned } from '../../src/projections/partitioned-rebuild.js';
import { catchUpProjections, Projections, rebuildProjectionsFrom, type ProjectionsOptions } from '../../src/projections/index.js';
import { ev } from '../machines/events.js';
import { Prng } from '../../src/devnet/hosts/prng.js';

const OPTIONS: ProjectionsOptions = { escrow: { routingStop: 40 } };
const WORKER = new URL('../../dist/src/projections/partition-worker.js', import.meta.url);
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Deterministic random numbers in [0, 1) (the simulated hosts' seeded PRNG). */
function prng(seed: number): () => number {
  const p = new Prng(`partitioned-rebuild-${seed}`);
  return () => p.next();
}

type Append = { streamId: string; event: CatalogEvent | { type: string; data: unknown }; metadata?: EventMetadata };

interface Escrow {
  id: string;
  model: string;
  nonce: number;
  pending: string[];
}

/** A random gateway-like history of `steps` actions. */
function history(seed: number, steps: number): Append[] {
  const rand = prng(seed);
  const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const out: Append[] = [];
  const escrows: Escrow[] = [];
  const client: EventMetadata = { actor: { kind: 'client', keyId: 'ck_1' } };
  const rotation: EventMetadata = { actor: { kind: 'rotation-task' } };
  let n = 0;
  const create = () => {
    const k = ++n;
    const model = pick(['m1', 'm2', 'm3']);
    // Numeric ids (chain ids) and others: JSON orders the former by value, the latter as inserted.
    const id = `${k % 2 ? '' : 'x'}${1000 + ((k * 7919) % 9000)}`;
    const intent = `intent-${k}`;
    const roll = rand();
    if (roll < 0.75) {
      out.push({ streamId: createIntentStream(intent), event: ev.createRequested(intent, model), metadata: rotation });
      if (rand() < 0.15) {
        out.push({ streamId: createIntentStream(intent), event: ev.createFailed(intent), metadata: rotation });
        return;
      }
      out.push({ streamId: escrowStream(id), event: ev.created(id, model, pick(['10000000', '1000000000000000', '500']), intent), metadata: rotation });
    } else if (roll < 0.9) out.push({ streamId: escrowStream(id), event: ev.created(id, model, '10000000') });
    else out.push({ streamId: escrowStream(id), event: { type: 'EscrowImported', data: { ...ev.imported(id).data, model } } });
    out.push({ streamId: escrowStream(id), event: rand() < 0.8 ? ev.registered(id, model) : ev.activated(id) });
    escrows.push({ id, model, nonce: 0, pending: [] });
  };
  for (let i = 0; i < 4; i++) create();
  for (let i = 0; i < steps; i++) {
    const r = rand();
    const e = pick(escrows);
    const s = escrowStream(e.id);
    if (r < 0.45) {
      const requestId = rand() < 0.03 ? `req-"${i}` : `req-${seed}-${i}`;
      const nonce = rand() < 0.05 ? e.nonce : ++e.nonce;
      const cost = rand() < 0.02 ? pick(['007', '-5', '99999999999999999999']) : String(100 + Math.floor(rand() * 1000));
      out.push({ streamId: s, event: ev.started(requestId, nonce, cost), metadata: client });
      e.pending.push(requestId);
    } else if (r < 0.8) {
      const requestId = e.pending.length && rand() < 0.95 ? e.pending.splice(Math.floor(rand() * e.pending.length), 1)[0]! : 'req-unknown';
      const cost = String(Math.floor(rand() * 800));
      out.push({ streamId: s, event: rand() < 0.1 ? ev.failed(requestId, e.nonce, cost) : ev.finished(requestId, e.nonce, cost), metadata: client });
    } else if (r < 0.83) create();
    else if (r < 0.86) out.push({ streamId: s, event: ev.deactivated() });
    else if (r < 0.89) out.push({ streamId: s, event: ev.activated(e.id) });
    else if (r < 0.9) out.push({ streamId: s, event: ev.depleted() });
    else if (r < 0.92) out.push({ streamId: s, event: ev.routingStopped(e.nonce) });
    else if (r < 0.935) out.push({ streamId: s, event: ev.finalized(e.nonce) });
    else if (r < 0.95) {
      out.push({ streamId: `rotation-${e.model}`, event: ev.settleDecided('regular', [e.id], 7, e.model), metadata: rotation });
      out.push({ streamId: s, event: rand() < 0.5 ? ev.settleRequested() : ev.settleDeferred() });
      out.push({ streamId: s, event: rand() < 0.7 ? ev.settled() : ev.settleFailed() });
    } else if (r < 0.96) out.push({ streamId: `rotation-${e.model}`, event: ev.phaseStarted(rand() < 0.5 ? 1 : 2, 7, e.model), metadata: rotation });
    else if (r < 0.97) out.push({ streamId: s, event: ev.noncesReserved(e.nonce + 3) });
    else if (r < 0.975) out.push({ streamId: settingsStream, event: ev.accessMode(e.model, rand() < 0.5 ? 'api_key' : 'admin_only') });
    else if (r < 0.98) out.push({ streamId: settingsStream, event: rand() < 0.5 ? ev.disabled() : ev.enabled() });
    else if (r < 0.985) out.push({ streamId: settingsStream, event: { type: 'SettingsChanged', data: { patch: {}, effective: { ...DEFAULT_SETTINGS, default_max_tokens: 100 + i } } } });
    else if (r < 0.99) out.push({ streamId: s, event: { type: 'SomethingNew', data: { i } } });
    else out.push({ streamId: s, event: ev.usageRecovered(String(Math.floor(rand() * 50))) });
  }
  return recordTogether(out, rand);
}

const REQUEST = new Set(['InferenceStarted', 'InferenceFinished', 'InferenceFailed']);

/**
 * Most runs of one stream's consecutive starts and ends as InferencesRecorded (as the gateway
 * records them), the rest one event each (as older logs hold them): both fold the same.
 */
function recordTogether(appends: Append[], rand: () => number): Append[] {
  const out: Append[] = [];
  let open: { streamId: string; entries: unknown[] } | undefined;
  for (const a of appends) {
    if (!REQUEST.has(a.event.type)) {
      open = undefined;
      out.push(a);
      continue;
    }
    const entry = { data: a.event.data, type: a.event.type };
    if (open?.streamId === a.streamId && rand() < 0.8) open.entries.push(entry);
    else if (rand() < 0.7) {
      open = { streamId: a.streamId, entries: [entry] };
      out.push({ streamId: a.streamId, event: { type: 'InferencesRecorded', data: { entries: open.entries } }, metadata: { actor: { kind: 'chat' } } });
    } else {
      open = undefined;
      out.push(a);
    }
  }
  return out;
}

async function writeLog(appends: Append[]): Promise<SqliteEventStore> {
  const dir = mkdtempSync(join(tmpdir(), 'shardgate-partitioned-'));
  dirs.push(dir);
  const store = openSqliteEventStore(join(dir, 'events.sqlite'));
  for (let i = 0; i < appends.length; i += 50) {
    await Promise.all(
      appends.slice(i, i + 50).map(({ streamId, event, metadata }) =>
        store.append(streamId, [{ type: event.type, data: event.data, metadata: metadata ?? { actor: { kind: 'admin' } } }], { expectedVersion: 'any' }),
      ),
    );
  }
  return store;
}

/** Everything the two must agree on, as text (key order included). */
function observed(p: Projections): string {
  const models = p.pool.models();
  return JSON.stringify({
    checkpoint: p.toCheckpoint(),
    snapshot: p.snapshot(),
    all: p.pool.all().map((e) => e.escrowId),
    routable: models.map((m) => p.pool.routableOf(m).map((e) => e.escrowId)),
    picks: models.map((m) => p.pool.pick(m)?.escrowId ?? null),
    pending: p.pool.pending(),
  });
}

describe('partitioned rebuild', () => {
  for (const seed of [1, 2, 3]) {
    it(`equals the sequential rebuild (seed ${seed})`, async () => {
      const store = await writeLog(history(seed, 2_500));
      try {
        const expected = observed(Projections.rebuild(store.readAll(), OPTIONS));
        for (const partitions of [2, 3, 5]) {
          const split = foldPartitioned(store.foldPartitions()!, undefined, OPTIONS, { partitions, worker: false });
          expect(split).toBeDefined();
          expect(observed(split!)).toBe(expected);
        }
        expect(observed(rebuildProjectionsFrom(store, OPTIONS))).toBe(expected);
        expect(observed(catchUpProjections(store, undefined, OPTIONS, { minEvents: 0, partitions: 3, worker: false }))).toBe(expected);
      } finally {
        await store.close();
      }
    });
  }

  it.runIf(existsSync(WORKER))('equals the sequential rebuild on worker threads (compiled worker in dist/)', async () => {
    const store = await writeLog(history(4, 3_000));
    try {
      const expected = observed(Projections.rebuild(store.readAll(), OPTIONS));
      // Lead 0: the workers fold escrows of their own. The default lead (100,000 events) gives this
      // small log's escrows all to this thread, the workers then folding only what all share.
      for (const [partitions, lead] of [[2, 0], [3, 0], [2, undefined]] as const) {
        const split = foldPartitioned(store.foldPartitions()!, undefined, OPTIONS, { partitions, worker: WORKER, ...(lead !== undefined ? { lead } : {}) });
        expect(split).toBeDefined();
        expect(observed(split!)).toBe(expected);
      }
    } finally {
      await store.close();
    }
  });

  it('catches up from a checkpoint like folding on from it in one piece', async () => {
    const store = await writeLog(history(5, 2_500));
    try {
      const all = [...store.readAll()];
      for (const cut of [1, 700, 1_900]) {
        const checkpoint = Projections.rebuild(all.slice(0, cut), OPTIONS).toCheckpoint();
        const expected = observed(Projections.fromCheckpoint(checkpoint, OPTIONS)!.foldAll(all.slice(cut)));
        const worker = existsSync(WORKER) ? WORKER : false;
        expect(observed(catchUpProjections(store, checkpoint, OPTIONS, { minEvents: 0, partitions: 2, worker }))).toBe(expected);
        expect(observed(catchUpProjections(store, checkpoint, OPTIONS, { minEvents: 0, partitions: 3, worker: false }))).toBe(expected);
      }
    } finally {
      await store.close();
    }
  });

  it('gives up on an EscrowCreated after requests of another partition, and the rebuild folds in one piece', async () => {
    const appends = history(6, 600);
    // A stream whose first event is a request (refused: no escrow yet), then EscrowCreated taking over an intent.
    appends.push({ streamId: createIntentStream('late'), event: ev.createRequested('late', 'm1') });
    appends.push({ streamId: escrowStream('9999'), event: ev.started('req-early', 1) });
    appends.push({ streamId: escrowStream('9999'), event: ev.created('9999', 'm1', '10000000', 'late') });
    appends.push({ streamId: escrowStream('9999'), event: ev.registered('9999') });
    const store = await writeLog(appends);
    try {
      const expected = observed(Projections.rebuild(store.readAll(), OPTIONS));
      expect(foldPartitioned(store.foldPartitions()!, undefined, OPTIONS, { partitions: 3, worker: false })).toBeUndefined();
      expect(observed(catchUpProjections(store, undefined, OPTIONS, { minEvents: 0, partitions: 3, worker: false }))).toBe(expected);
    } finally {
      await store.close();
    }
  });
});
