/**
 * The escrow fast path: `stepEscrowFast(snapshot, event)` gives what `step(escrowMachine, …)` gives,
 * at a fraction of the cost, for the events chat requests record (InferencesRecorded, which holds
 * a batch's starts and ends of the escrow; in older logs InferenceStarted, then InferenceFinished or
 * InferenceFailed, one event each) and the nonce reservations taken along with them (NoncesReserved,
 * one per block of nonces). Everything else goes through xstate's `transition`.
 *
 * Why it is equivalent:
 *  - which (state, event) pairs it handles is read from the machine definition at load time: only
 *    targetless transitions whose guard and action are the named ones below (so a changed chart
 *    falls back to xstate instead of silently diverging);
 *  - guards and counter updates are the very functions the machine's guards and assigns call
 *    (escrow.ts: canStartRequest, canEndRequest, startRequestUpdate, endRequestUpdate,
 *    canReserveNonces);
 *  - a targetless transition leaves the state value, active nodes, tags, children and history as
 *    they were, so the next snapshot is the previous one with a new context — a shallow copy, which
 *    keeps `.can()`, `.matches()`, `persistState` and feeding it back to `transition` working.
 *
 * Why it is cheap: copying `pending` (requestId → reservation) per request costs O(in flight) and,
 * since every request id is a new property name, V8 builds new hidden classes on every copy
 * (measured 4–10 µs per event at 16 in flight). Here `pending` lives in a persistent map
 * (`PendingMap`): each version is O(1) to derive, old versions stay valid and unchanged. The
 * context exposes it as an ordinary enumerable `pending` property whose record is built on first
 * read (JSON, checkpoints, spreads and deep equality see a plain `Record<string, Amount>`).
 */
import type { Amount } from '../events/catalog.js';
import type { RecordedEvent } from '../events/envelope.js';
import {
  canEndRequest,
  canReserveNonces,
  canStartRequest,
  endRequestUpdate,
  escrowMachine,
  recordInferences,
  startRequestUpdate,
  type EscrowContext,
  type EscrowEvent,
} from './escrow.js';
import { initialSnapshot, step } from './fold.js';
import { PendingMap } from './pending-map.js';

export { PENDING_RENEW, PendingMap } from './pending-map.js';
import type { SnapshotFrom } from 'xstate';

type Snapshot = SnapshotFrom<typeof escrowMachine>;
type StartEvent = Extract<EscrowEvent, { type: 'InferenceStarted' }>;
type EndEvent = Extract<EscrowEvent, { type: 'InferenceFinished' | 'InferenceFailed' }>;
type ReserveEvent = Extract<EscrowEvent, { type: 'NoncesReserved' }>;
type RecordedEvents = Extract<EscrowEvent, { type: 'InferencesRecorded' }>;

/**
 * A context made by the fast path: the same own enumerable fields, in the same order, as a context
 * made by the machine, `pending` being an own enumerable accessor whose record is built on first
 * read. The persistent map sits in a private field (invisible to JSON, spreads, structuredClone and
 * deep equality). One shared accessor keeps every instance on one hidden class (an object-literal
 * getter would make a new closure, hence a new hidden class, per context), and no WeakMap is
 * involved (ephemeron bookkeeping cost microseconds per entry under GC).
 */
class FastContext {
  declare escrowId: EscrowContext['escrowId'];
  declare intentId: EscrowContext['intentId'];
  declare model: EscrowContext['model'];
  declare role: EscrowContext['role'];
  declare creator: EscrowContext['creator'];
  declare epoch: EscrowContext['epoch'];
  declare deposit: EscrowContext['deposit'];
  declare spent: EscrowContext['spent'];
  declare balance: EscrowContext['balance'];
  declare reserved: EscrowContext['reserved'];
  declare nonce: EscrowContext['nonce'];
  declare nonceReserved: EscrowContext['nonceReserved'];
  declare inFlight: EscrowContext['inFlight'];
  declare readonly pending: EscrowContext['pending'];
  declare routingStop: EscrowContext['routingStop'];
  declare settlement: EscrowContext['settlement'];
  declare slots: EscrowContext['slots'];
  declare settled: EscrowContext['settled'];
  declare lastError: EscrowContext['lastError'];
  declare settleRetry: EscrowContext['settleRetry'];
  readonly #pending: PendingMap;

  static readonly #accessor: PropertyDescriptor = {
    get(this: FastContext) {
      return this.#pending.toRecord();
    },
    enumerable: true,
    configurable: true,
  };

  /** `{ ...c, ...u, pending }` without reading `c.pending` (which would build its record). */
  constructor(c: EscrowContext, u: Partial<Omit<EscrowContext, 'pending'>>, pending: PendingMap) {
    this.escrowId = c.escrowId;
    this.intentId = c.intentId;
    this.model = c.model;
    this.role = c.role;
    this.creator = c.creator;
    this.epoch = c.epoch;
    this.deposit = c.deposit;
    this.spent = u.spent ?? c.spent;
    this.balance = u.balance ?? c.balance;
    this.reserved = u.reserved ?? c.reserved;
    this.nonce = u.nonce ?? c.nonce;
    this.nonceReserved = u.nonceReserved ?? c.nonceReserved;
    this.inFlight = u.inFlight ?? c.inFlight;
    Object.defineProperty(this, 'pending', FastContext.#accessor);
    this.routingStop = c.routingStop;
    this.settlement = c.settlement;
    this.slots = c.slots;
    this.settled = c.settled;
    this.lastError = c.lastError;
    this.settleRetry = c.settleRetry;
    this.#pending = pending;
  }

  /** The context's pending reservations as a persistent map (O(in flight) once for a plain context). */
  static pendingOf(c: EscrowContext): PendingMap {
    return c instanceof FastContext ? c.#pending : PendingMap.from(c.pending);
  }
}

/** Every field of EscrowContext must be copied by FastContext (compile-time check; optional ones may be undefined). */
const _complete: (c: FastContext) => { [K in keyof Required<EscrowContext>]: EscrowContext[K] } = (c) => c;
void _complete;

const pendingMap = (c: EscrowContext): PendingMap => FastContext.pendingOf(c);
const nextContext = (c: EscrowContext, u: Partial<Omit<EscrowContext, 'pending'>>, pending: PendingMap): EscrowContext => new FastContext(c, u, pending);

// ---- which transitions are fast, read from the machine -----------------------------------------

/** Fast implementations of the machine's named guard + assign pairs, by guard name and action name. */
const FAST = {
  InferenceStarted: {
    guard: 'canStartRequest',
    action: 'startRequest',
    run(c: EscrowContext, e: StartEvent): EscrowContext | undefined {
      const d = e.data;
      const pending = pendingMap(c);
      if (!canStartRequest(c, d, pending.has(d.requestId))) return undefined;
      return nextContext(c, startRequestUpdate(c, d), pending.set(d.requestId, d.reservedCost));
    },
  },
  InferenceFinished: { guard: 'canEndRequest', action: 'endRequest', run: end },
  InferenceFailed: { guard: 'canEndRequest', action: 'endRequest', run: end },
  // One per block of an escrow's nonces. Through xstate it cost ~100–250 µs in a rebuild (the
  // spread context builds `pending` as a record of request-id keys, each a new hidden class), and
  // it ended the rebuild's escrow run (escrow-run.ts): ~0.5 s per partition of the soak's log.
  NoncesReserved: {
    guard: 'canReserveNonces',
    action: 'reserveNonces',
    run(c: EscrowContext, e: ReserveEvent): EscrowContext | undefined {
      const upTo = e.data.upTo;
      if (!canReserveNonces(c, upTo)) return undefined;
      return nextContext(c, { nonceReserved: upTo }, pendingMap(c));
    },
  },
  // Per escrow and group commit, the live gateway's only per-request event.
  InferencesRecorded: { guard: 'canRecordInferences', action: 'recordInferences', run: (c: EscrowContext, e: RecordedEvents) => recorded(c, e, true) },
} as const;

/** The drain states' InferencesRecorded (ends only): served like FAST's, under its own guard. */
const FAST_ENDS_ONLY = { guard: 'canRecordInferenceEnds', action: 'recordInferences', run: (c: EscrowContext, e: RecordedEvents) => recorded(c, e, false) };

/**
 * InferencesRecorded: its entries are checked against an overlay of their own edits first, and
 * the persistent map is edited only once all are accepted. (Edited and then abandoned, the map
 * would be rerooted back to this version on the next read, which re-adds removed keys at the end:
 * the same entries in another order.)
 */
function recorded(c: EscrowContext, e: RecordedEvents, startsAllowed: boolean): EscrowContext | undefined {
  const base = pendingMap(c);
  const overlay = new Map<string, Amount | undefined>();
  const edits: [string, Amount | undefined][] = [];
  const counters = recordInferences(c, e.data.entries, startsAllowed, {
    get: (id) => (overlay.has(id) ? overlay.get(id) : base.get(id)),
    set: (id, v) => void (overlay.set(id, v), edits.push([id, v])),
    delete: (id) => void (overlay.set(id, undefined), edits.push([id, undefined])),
  });
  if (!counters) return undefined;
  let pending = base;
  for (const [id, v] of edits) pending = v === undefined ? pending.delete(id) : pending.set(id, v);
  return nextContext(c, counters, pending);
}

function end(c: EscrowContext, e: EndEvent): EscrowContext | undefined {
  const d = e.data;
  const pending = pendingMap(c);
  const reservation = pending.get(d.requestId);
  if (!canEndRequest(c, d, reservation)) return undefined;
  return nextContext(c, endRequestUpdate(c, d, reservation!), pending.delete(d.requestId));
}

type FastType = keyof typeof FAST;
type FastRun = (c: EscrowContext, e: EscrowEvent) => EscrowContext | undefined;

/** state value → the fast event types handled there exactly as the machine would, each with its run. */
const FAST_STATES: ReadonlyMap<string, ReadonlyMap<string, FastRun>> = (() => {
  const table = new Map<string, Map<string, FastRun>>();
  const root = escrowMachine.root;
  const candidates = [...(Object.keys(FAST) as FastType[]).map((type) => [type, FAST[type]] as const), ['InferencesRecorded', FAST_ENDS_ONLY] as const];
  for (const [name, node] of Object.entries(root.states)) {
    if (node.type !== 'atomic' || node.always?.length) continue;
    for (const [type, fast] of candidates) {
      if (root.transitions.get(type)?.length || node.transitions.get('*')?.length) continue;
      const ts = node.transitions.get(type);
      if (!ts || ts.length !== 1) continue;
      const t = ts[0]!;
      const targetless = !t.target || t.target.length === 0;
      const actions = t.actions as unknown[];
      if (targetless && !t.reenter && t.guard === fast.guard && actions.length === 1 && actions[0] === fast.action) {
        let runs = table.get(name);
        if (!runs) table.set(name, (runs = new Map()));
        runs.set(type, fast.run as FastRun);
      }
    }
  }
  return table;
})();

/** The (state, event type) pairs the fast path serves, e.g. `active:InferenceStarted` (for tests and docs). */
export const fastTransitions = (): string[] => [...FAST_STATES].flatMap(([state, runs]) => [...runs.keys()].map((t) => `${state}:${t}`));

/** The own keys of an xstate 5 machine snapshot, in order (checked against the installed xstate below). */
const SNAPSHOT_KEYS = 'status,output,error,machine,context,_nodes,value,tags,children,historyValue,matches,hasTag,can,getMeta,toJSON';

/**
 * `{ ...snapshot, context }`. A literal of the known keys is ~20x cheaper than a spread of the
 * snapshot (measured 15 ns vs 275 ns); it is used only when the installed xstate's snapshots have
 * exactly those keys, else the spread.
 */
const withContext: (snapshot: Snapshot, context: EscrowContext) => Snapshot =
  Object.keys(initialSnapshot(escrowMachine)).join(',') === SNAPSHOT_KEYS
    ? (s, context) => {
        const x = s as unknown as Record<string, unknown>;
        return {
          status: x.status,
          output: x.output,
          error: x.error,
          machine: x.machine,
          context,
          _nodes: x._nodes,
          value: x.value,
          tags: x.tags,
          children: x.children,
          historyValue: x.historyValue,
          matches: x.matches,
          hasTag: x.hasTag,
          can: x.can,
          getMeta: x.getMeta,
          toJSON: x.toJSON,
        } as unknown as Snapshot;
      }
    : (s, context) => ({ ...s, context }) as Snapshot;

/**
 * One event through the escrow machine, like `step(escrowMachine, snapshot, event)`: the same
 * resulting `value` and `context`, and `accepted` false (with the very same snapshot back) when the
 * machine ignores the event.
 */
export function stepEscrowFast(snapshot: Snapshot, event: EscrowEvent | RecordedEvent): { snapshot: Snapshot; accepted: boolean } {
  const type = event.type;
  // A reservation whose upTo is not a number goes to xstate, which decides what odd data does.
  const served =
    type === 'InferencesRecorded' ||
    type === 'InferenceStarted' ||
    type === 'InferenceFinished' ||
    type === 'InferenceFailed' ||
    (type === 'NoncesReserved' && typeof (event.data as { upTo?: unknown } | null)?.upTo === 'number');
  if (served && snapshot.status === 'active' && snapshot.machine === escrowMachine) {
    const run = typeof snapshot.value === 'string' ? FAST_STATES.get(snapshot.value)?.get(type) : undefined;
    if (run) {
      const context = run(snapshot.context, event as EscrowEvent);
      if (!context) return { snapshot, accepted: false };
      return { snapshot: withContext(snapshot, context), accepted: true };
    }
  }
  return step(escrowMachine, snapshot, event);
}

/**
 * The fast event types `stepEscrowFast` serves in `snapshot`'s state (undefined: none). Fast
 * transitions are targetless, so the set holds for as long as only fast events are folded.
 */
export function fastTypesIn(snapshot: Snapshot): { has(type: string): boolean } | undefined {
  if (snapshot.status !== 'active' || snapshot.machine !== escrowMachine || typeof snapshot.value !== 'string') return undefined;
  return FAST_STATES.get(snapshot.value);
}

/** The persistent pending map of a snapshot's context (see PendingMap). */
export const pendingOf = (snapshot: Snapshot): PendingMap => pendingMap(snapshot.context);

/**
 * `snapshot` with new request counters and pending map: what a chain of accepted fast steps from
 * `snapshot` ends in (for a batch fold that keeps the counters itself and builds the snapshot once).
 */
export function withFastCounters(
  snapshot: Snapshot,
  counters: Pick<EscrowContext, 'nonce' | 'inFlight' | 'reserved' | 'spent' | 'balance'> & Partial<Pick<EscrowContext, 'nonceReserved'>>,
  pending: PendingMap,
): Snapshot {
  return withContext(snapshot, nextContext(snapshot.context, counters, pending));
}

/** Would the escrow machine accept `event` in `snapshot`? (`stepEscrowFast(...).accepted`.) */
export const canEscrowFast = (snapshot: Snapshot, event: EscrowEvent | RecordedEvent): boolean => stepEscrowFast(snapshot, event).accepted;

