/**
 * Random command sequences against the escrow statechart. A command builds an event from the
 * current state and is appended only when `snapshot.can(event)`, exactly as the gateway does.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { escrowMachine, foldEscrow, initialSnapshot, step, type EscrowEvent, type EscrowSnapshot } from '../../src/machines/index.js';
import { ev } from './events.js';

type Command =
  | { kind: 'start'; cost: number; skip: number }
  | { kind: 'finish'; pick: number; cost: number; failed: boolean }
  | { kind: 'settle' }
  | { kind: 'reserve'; ahead: number }
  | { kind: 'skip'; short: number }
  | { kind: 'release'; off: number }
  | { kind: 'recover'; cost: number }
  | { kind: 'plain'; event: EscrowEvent };

const plainEvents: EscrowEvent[] = [
  ev.depleted(),
  ev.routingStopped(0),
  ev.finalized(),
  ev.settled(),
  ev.settleFailed(),
  ev.deactivated(),
  ev.activated(),
  ev.removed(),
];

const command: fc.Arbitrary<Command> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('start' as const), cost: fc.integer({ min: 0, max: 4_000_000 }), skip: fc.integer({ min: -1, max: 2 }) }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('finish' as const), pick: fc.nat(), cost: fc.integer({ min: 0, max: 5_000_000 }), failed: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'settle' as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('reserve' as const), ahead: fc.integer({ min: -2, max: 6 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('skip' as const), short: fc.integer({ min: -1, max: 2 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('release' as const), off: fc.integer({ min: -1, max: 1 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('recover' as const), cost: fc.integer({ min: 0, max: 12_000_000 }) }) },
  { weight: 2, arbitrary: fc.constantFrom(...plainEvents).map((event) => ({ kind: 'plain' as const, event })) },
);

/** Turns a command into an event from the current state (possibly an invalid one: `can` decides). */
function toEvent(s: EscrowSnapshot, c: Command, n: number): EscrowEvent {
  const ctx = s.context;
  switch (c.kind) {
    case 'start':
      return ev.started(`r${n}`, ctx.nonce + 1 + c.skip, String(c.cost));
    case 'finish': {
      const ids = Object.keys(ctx.pending);
      const id = ids.length ? ids[c.pick % ids.length]! : `r${c.pick}`;
      return c.failed ? ev.failed(id, ctx.nonce, String(c.cost)) : ev.finished(id, ctx.nonce, String(c.cost));
    }
    case 'reserve':
      return ev.noncesReserved(Math.max(ctx.nonce, ctx.nonceReserved ?? 0) + c.ahead);
    case 'skip':
      return ev.noncesSkipped(ctx.nonce + 1, (ctx.nonceReserved ?? ctx.nonce) - c.short);
    case 'release':
      return ev.noncesReleased(ctx.nonce + c.off);
    case 'recover':
      return ev.usageRecovered(String(c.cost));
    case 'settle':
      return ctx.inFlight > 0 ? ev.settleDeferred(ctx.inFlight) : ev.settleRequested();
    case 'plain':
      return c.event.type === 'EscrowRoutingStopped' ? ev.routingStopped(ctx.nonce) : c.event;
  }
}

describe('escrow statechart properties', () => {
  it('never settles with requests in flight, nonce strictly increases and stays within its reservation, balance never negative, replay equals live', () => {
    fc.assert(
      fc.property(fc.array(command, { maxLength: 120 }), fc.integer({ min: 2, max: 40 }), (commands, routingStop) => {
        const input = { routingStop };
        let s = initialSnapshot(escrowMachine, input);
        const log: EscrowEvent[] = [ev.created('e1', 'm1', '10000000'), ev.registered()];
        for (const e of log) s = step(escrowMachine, s, e).snapshot;
        commands.forEach((c, n) => {
          const event = toEvent(s, c, n);
          if (!s.can(event)) {
            expect(step(escrowMachine, s, event).accepted).toBe(false);
            return;
          }
          const before = s.context;
          s = step(escrowMachine, s, event).snapshot;
          log.push(event);
          const ctx = s.context;
          if (event.type === 'InferenceStarted' || event.type === 'NoncesSkipped') expect(ctx.nonce).toBeGreaterThan(before.nonce);
          else expect(ctx.nonce).toBe(before.nonce);
          // once nonces are reserved, no request (and no skip) goes past the reservation
          if (before.nonceReserved != null) expect(ctx.nonce).toBeLessThanOrEqual(ctx.nonceReserved!);
          if (event.type === 'NoncesReserved') expect(ctx.nonceReserved).toBeGreaterThan(Math.max(before.nonce, before.nonceReserved ?? 0));
          else if (event.type === 'NoncesReleased') {
            expect(before.inFlight).toBe(0); // only a stop with nothing in flight gives nonces back
            expect(ctx.nonceReserved).toBe(ctx.nonce);
          } else expect(ctx.nonceReserved).toBe(before.nonceReserved);
          expect(BigInt(ctx.balance)).toBeGreaterThanOrEqual(0n);
          expect(BigInt(ctx.reserved)).toBeGreaterThanOrEqual(0n);
          expect(ctx.inFlight).toBe(Object.keys(ctx.pending).length);
          expect(ctx.nonce).toBeLessThan(routingStop);
          if (s.value === 'settling' || s.value === 'settled' || ctx.settled) expect(ctx.inFlight).toBe(0);
        });
        const replayed = foldEscrow(log, input);
        expect(replayed.value).toEqual(s.value);
        expect(replayed.context).toEqual(s.context);
      }),
      { numRuns: 300 },
    );
  });
});
