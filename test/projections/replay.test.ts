import { describe, expect, it } from 'vitest';
import { runReplay } from '../../src/cli/commands/replay.js';
import { createIntentStream, escrowStream, rotationStream, settingsStream } from '../../src/events/catalog.js';
import { parseUntil, replay } from '../../src/projections/replay.js';
import { ev, record } from '../machines/events.js';

const log = record([
  { streamId: createIntentStream('i1'), event: ev.createRequested('i1') },
  { streamId: escrowStream('e9'), event: ev.created('e9') },
  { streamId: escrowStream('e1'), event: ev.created('e1', 'm1', '10000000', 'i1') },
  { streamId: escrowStream('e1'), event: ev.registered('e1') },
  { streamId: settingsStream, event: ev.accessMode('m1', 'api_key') },
  { streamId: escrowStream('e1'), event: ev.started('a', 1) },
  { streamId: escrowStream('e1'), event: ev.recorded(ev.started('b', 2), ev.finished('a', 1), ev.started('c', 3), ev.failed('c', 3)) },
  { streamId: escrowStream('e1'), event: ev.removed() },
  { streamId: rotationStream('m1'), event: ev.phaseStarted(1) },
]);
const store = { readAll: (after = 0) => log.filter((r) => r.position > after), lastPosition: () => log.length };

describe('replay', () => {
  it('yields each event with the resulting state of its statechart, refusals marked', () => {
    const rows = [...replay(log)];
    expect(rows.map((r) => [r.position, r.event, r.state, r.accepted])).toEqual([
      [1, 'EscrowCreateRequested', 'creating', true],
      [2, 'EscrowCreated', 'created', true],
      [3, 'EscrowCreated', 'created', true],
      [4, 'EscrowRegistered', 'active', true],
      [5, 'ModelAccessModeChanged', 'api_key', true],
      [6, 'InferenceStarted', 'active', true],
      [7, 'InferencesRecorded', 'active', true],
      [8, 'EscrowRemoved', 'active', false],
      [9, 'RotationPhaseStarted', 'phase1.creatingTemporaries', true],
    ]);
  });

  it('--escrow shows that escrow with its creation intent; --until stops at a position or time', () => {
    expect([...replay(log, { escrow: 'e1', until: 4 })].map((r) => r.position)).toEqual([1, 3, 4]);
    expect([...replay(log, { until: parseUntil(log[1]!.time) })].map((r) => r.position)).toEqual([1, 2]);
    expect(() => parseUntil('yesterday')).toThrow(/--until/);
  });

  it('prints the machines at the stop point (text and JSON)', () => {
    let text = '';
    runReplay(store, { until: '6' }, (s) => (text += s));
    expect(text).toContain('State at position 6:');
    expect(text).toMatch(/e1 {2}active {2}model=m1 nonce=1 in_flight=1/);
    expect(text).toContain('m1=api_key');
    text = '';
    runReplay(store, { until: '7' }, (s) => (text += s));
    expect(text).toMatch(/InferencesRecorded .* -> active {2}\(2 started, 1 finished, 1 failed\)\n/);
    expect(text).toMatch(/e1 {2}active {2}model=m1 nonce=3 in_flight=1/);
    let json = '';
    runReplay(store, { json: true, escrow: 'e1' }, (s) => (json += s));
    const doc = JSON.parse(json);
    expect(doc.position).toBe(9);
    expect(doc.timeline.find((r: { event: string }) => r.event === 'InferencesRecorded').requests).toEqual({ started: 2, finished: 1, failed: 1 });
    expect(Object.keys(doc.machines.escrows)).toEqual(['e1']);
    expect(doc.machines.rotation.m1.stage).toBe('phase1.creatingTemporaries');
    expect(doc.timeline.at(-1)).toMatchObject({ event: 'EscrowRemoved', accepted: false });
  });
});
