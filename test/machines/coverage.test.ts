/**
 * Transition coverage: every transition of every machine definition must be taken by some path the
 * graph utilities generate (adjacency map edges, each reachable by a shortest path from the start).
 * Payload-carrying events are generated from the current context (`events` as a function), and
 * state identity is the state value plus the few context facts guards depend on, so counters do
 * not explode the state space.
 */
import { describe, expect, it } from 'vitest';
import type { AnyStateMachine, AnyStateNode } from 'xstate';
import { getAdjacencyMap, getShortestPaths } from 'xstate/graph';
import type { EscrowSnapshot, RotationSnapshot } from '../../src/machines/index.js';
import { machines } from '../../src/machines/index.js';
import { ev } from './events.js';

type AnyTransition = ReturnType<AnyStateMachine['getTransitionData']>[number];

function allTransitions(node: AnyStateNode, out = new Map<AnyTransition, string>()): Map<AnyTransition, string> {
  for (const list of node.transitions.values()) {
    for (const t of list) {
      const guard = typeof t.guard === 'string' ? ` [${t.guard}]` : t.guard ? ` [${(t.guard as { type?: string }).type ?? 'fn'}]` : '';
      const targets = t.target ? t.target.map((n: AnyStateNode) => n.id).join(',') : '(self)';
      out.set(t, `${node.id}: ${t.eventType}${guard} -> ${targets}`);
    }
  }
  for (const child of Object.values(node.states) as AnyStateNode[]) allTransitions(child, out);
  return out;
}

const escrowEvents = (s: EscrowSnapshot) => {
  const c = s.context;
  const pending = Object.keys(c.pending)[0];
  return [
    ev.createRequested(),
    ev.created('e1', 'm1', '10000000', c.intentId ?? undefined),
    ev.createFailed(),
    ev.registered(),
    ev.imported(),
    ev.activated(),
    ev.noncesReserved(Math.max(c.nonce, c.nonceReserved ?? 0) + 1),
    ...(c.nonceReserved != null && c.nonceReserved > c.nonce ? [ev.noncesSkipped(c.nonce + 1, c.nonceReserved), ev.noncesReleased(c.nonce)] : []),
    ev.usageRecovered('10'),
    ev.started(`r${c.nonce + 1}`, c.nonce + 1, '100'),
    ...(pending ? [ev.finished(pending, c.nonce, '50'), ev.failed(pending, c.nonce, '0')] : []),
    // A batch's starts and ends: a start only (taken where chat is), or an end only (where requests drain).
    ev.recorded(ev.started(`r${c.nonce + 1}`, c.nonce + 1, '100')),
    ...(pending ? [ev.recorded(ev.finished(pending, c.nonce, '50'))] : []),
    ev.depleted(),
    ev.routingStopped(c.nonce),
    ev.finalized(c.nonce),
    ev.settleRequested(),
    ev.settleDeferred(c.inFlight),
    ev.settled(),
    ev.settleFailed(),
    ev.drainedSettleFailed({ attempt: 1, retryAtHeight: 1002 }),
    ev.deactivated(),
    ev.removed(),
  ];
};

const rotationEvents = () => [
  ev.phaseStarted(1),
  ev.phaseStarted(2),
  ev.phaseCompleted(1),
  ev.phaseCompleted(2),
  ev.createDecided('temporary'),
  ev.createDecided('regular'),
  ev.createSuppressed('temporary'),
  ev.rotationFailed('create_temporary', 'temporary'),
  ev.rotationFailed('create_target', 'regular'),
  ev.rotationFailed('settle'),
  ev.rotationSettleFailed('e1', { attempt: 1, retryAtHeight: 1002 }),
  ev.rotationSettleFailed('e1', { windowClosed: true }),
  ev.rotationFailed('read_chain', undefined, 7, false),
  // A configuration error (the key's env variable unusable): the create waits, the state stays (issue 38).
  { ...ev.rotationFailed('create_temporary', 'temporary', 7, false), data: { ...ev.rotationFailed('create_temporary', 'temporary', 7, false).data, configuration: { variable: 'KEY' } } },
  ev.promoted(),
  ev.settleDecided('regular'),
  ev.settleDecided('temporary'),
  ev.replacementDecided(),
  ev.replacementFailed(),
  ev.replacementSettleFailed('e1', { attempt: 1, retryAtHeight: 1002 }),
];

const plans: Record<keyof typeof machines, { events: (s: any) => readonly any[]; serialize: (s: any) => string; input?: unknown }> = {
  escrow: {
    events: escrowEvents,
    input: { routingStop: 3 },
    serialize: (s: EscrowSnapshot) =>
      JSON.stringify([s.value, s.context.inFlight > 0, s.context.settled, s.context.nonce + 1 >= s.context.routingStop, (s.context.nonceReserved ?? 0) > s.context.nonce]),
  },
  accessMode: {
    events: () => [ev.accessMode('m1', 'api_key'), ev.accessMode('m1', 'admin_only')],
    serialize: (s) => JSON.stringify(s.value),
  },
  disabled: {
    events: () => [ev.disabled(), ev.enabled()],
    serialize: (s) => JSON.stringify(s.value),
  },
  devshardSessionPhase: {
    events: () => [{ type: 'FinalizeRoundApplied' }, { type: 'FinalizeDeadlineReached' }],
    serialize: (s) => JSON.stringify(s.value),
  },
  rotation: {
    events: rotationEvents,
    // Whether a settle awaits its retry: settle failures are accepted anywhere only then.
    serialize: (s: RotationSnapshot) => JSON.stringify([s.value, Object.keys(s.context.settleRetries ?? {}).length > 0]),
  },
};

describe('transition coverage', () => {
  for (const [name, machine] of Object.entries(machines) as [keyof typeof machines, AnyStateMachine][]) {
    it(`${name}: every transition is taken by a generated path`, () => {
      const plan = plans[name];
      const options = { events: plan.events, serializeState: plan.serialize, input: plan.input } as never;
      const adjacency = getAdjacencyMap(machine, options);
      const reachable = new Set(getShortestPaths(machine, options).map((p) => plan.serialize(p.state)));
      const expected = allTransitions(machine.root);
      const covered = new Set<AnyTransition>();
      for (const [key, { state, transitions }] of Object.entries(adjacency)) {
        expect(reachable.has(key), `state ${key} has no shortest path`).toBe(true);
        for (const { event } of Object.values(transitions as Record<string, { event: unknown }>)) {
          for (const t of machine.getTransitionData(state as never, event as never)) covered.add(t);
        }
      }
      const missing = [...expected].filter(([t]) => !covered.has(t)).map(([, label]) => label);
      expect(missing, `transitions no generated path takes`).toEqual([]);
      expect(covered.size).toBe(expected.size);
    });
  }
});
