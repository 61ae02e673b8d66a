import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { escrowStream, newEvent } from '../../src/events/catalog.js';
import { eventsFile, openSqliteEventStore } from '../../src/events/sqlite-store.js';
import { followProjections, Projections, rebuildProjectionsFrom } from '../../src/projections/index.js';
import { ev } from '../machines/events.js';

const meta = { actor: { kind: 'admin' as const } };
const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('projections following the SQLite store', () => {
  it('apply each commit live, checkpoint, and resume after reopening equal to a rebuild', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-proj-'));
    dirs.push(dir);
    let store = openSqliteEventStore(eventsFile(dir));
    const { projections, detach } = await followProjections(store);
    const e = ev.created('e1');
    await store.append(escrowStream('e1'), [newEvent(e.type, e.data, meta), newEvent('EscrowRegistered', ev.registered().data, meta)], { expectedVersion: 'no-stream' });
    expect(projections.pool.pick('m1')?.escrowId).toBe('e1');
    await projections.checkpoint(store);
    await store.append(escrowStream('e1'), [newEvent('InferenceStarted', ev.started('a', 1).data, meta)], { expectedVersion: 1 });
    expect(projections.pool.pick('m1')?.inFlight).toBe(1);
    detach();
    await store.close();

    store = openSqliteEventStore(eventsFile(dir));
    const resumed = await followProjections(store);
    expect(resumed.projections.snapshot()).toEqual(projections.snapshot());
    expect(Projections.rebuild(store.readAll(0)).snapshot()).toEqual(projections.snapshot());
    resumed.detach();
    await store.close();
  });

  it('a rebuild from readAllForFold equals one from readAll', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-proj-'));
    dirs.push(dir);
    const store = openSqliteEventStore(eventsFile(dir));
    const client = { actor: { kind: 'client' as const, keyId: 'k7' }, requestId: 'ra', correlationId: 'ra' };
    const e = ev.created('e1');
    await store.append(escrowStream('e1'), [newEvent(e.type, e.data, meta), newEvent('EscrowRegistered', ev.registered().data, meta)], { expectedVersion: 'no-stream' });
    await store.append(escrowStream('e1'), [newEvent('InferenceStarted', ev.started('ra', 1).data, client)], { expectedVersion: 1 });
    const fold = Projections.rebuild(store.readAllForFold());
    const plain = Projections.rebuild(store.readAll());
    expect(fold.snapshot()).toEqual(plain.snapshot());
    expect(Projections.rebuild(store.readAllForFold(0, { thread: true })).snapshot()).toEqual(plain.snapshot());
    expect(rebuildProjectionsFrom(store).snapshot()).toEqual(plain.snapshot());
    // A checkpoint taken from it restores to the same state.
    expect(Projections.fromCheckpoint(JSON.parse(JSON.stringify(fold.toCheckpoint())))!.snapshot()).toEqual(plain.snapshot());
    await store.close();
  });
});
