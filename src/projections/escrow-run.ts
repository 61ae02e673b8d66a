/**
 * A run of one escrow's inference events and nonce reservations folded in a batch (rebuild,
 * catch-up): the same outcome as `stepEscrowFast` per event, with the request counters kept as
 * numbers and `pending` as one mutable Map, and the snapshot built once at the end of the run
 * (`finish`), not per event.
 *
 * Why: per event the fast path builds a context, a snapshot and a persistent-map version, and does
 * decimal-string arithmetic (~1.6 µs of a rebuild's ~2 µs fold per event over the soak's log).
 *
 * Why it is the same fold: a run starts only in a state where `stepEscrowFast` serves the event
 * type (fastTypesIn) and fast transitions are targetless, so the state value, and with it the set
 * of served types, does not change during the run. Guards and updates are those of escrow.ts
 * (canStartRequest/startRequestUpdate, canEndRequest/endRequestUpdate), evaluated in the same
 * order; a reservation calls canReserveNonces itself. Amounts are integers in decimal; amounts.ts
 * computes on them exactly (Number when short, BigInt otherwise), so exact Number arithmetic gives
 * the same strings while every value is a safe integer. Anything else — an amount that is not a
 * plain integer, a result beyond 2^53, data of an unexpected type — returns BAIL before anything changes, and the caller folds that event the
 * usual way after `finish()`.
 */
import type { Amount } from '../events/catalog.js';
import { fastTypesIn, pendingOf, PENDING_RENEW, PendingMap, withFastCounters } from '../machines/escrow-fast.js';
import type { EscrowSnapshot } from '../machines/index.js';
import { endAllowed, endUpdate, NUMBERS, reserveAllowed, startAllowed, type StartCounters } from '../machines/escrow-rules.js';

/** `fold` outcomes. */
export const REFUSED = 0;
export const ACCEPTED = 1;
/** Not for a run: finish it and fold the event with stepEscrowFast. */
export const BAIL = -1;

/** The value of a plain decimal integer string (optional minus, digits) that is a safe integer; else undefined. */
export function exactInt(s: unknown): number | undefined {
  if (typeof s !== 'string') return undefined;
  const n = s.length;
  if (n === 0 || n > 17) return undefined;
  let i = s.charCodeAt(0) === 45 ? 1 : 0;
  if (i === n) return undefined;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return undefined;
  }
  const v = Number(s);
  return Number.isSafeInteger(v) ? v : undefined;
}


const RESERVED = 1;
const SPENT = 2;
const BALANCE = 4;
const NONCE_RESERVED = 8;

/** What a run reads of one entry of InferencesRecorded (`amount`: reservedCost of a start, cost of an end). */
export interface EntryFields {
  type: unknown;
  requestId: unknown;
  nonce: unknown;
  amount: unknown;
}

interface RequestData {
  requestId?: unknown;
  nonce?: unknown;
  reservedCost?: unknown;
  cost?: unknown;
}

/** One escrow's run; see the module comment. */
export class EscrowRun {
  /** Whether the pool has indexed this escrow's routability during the run (it cannot change in a run). */
  indexed = false;
  private accepted = false;
  private touched = 0;
  private nonce: number;
  private inFlight: number;
  private nonceReserved: number | null | undefined;
  private readonly routingStop: unknown;
  private pending: Map<string, Amount>;
  private starts = 0;

  private constructor(
    /** The snapshot the run started from (its state value is the run's). */
    readonly base: EscrowSnapshot,
    private readonly types: { has(type: string): boolean },
    private reserved: number,
    private spent: number,
    private balance: number,
    private readonly deposit: number,
  ) {
    const c = base.context;
    this.nonce = c.nonce;
    this.inFlight = c.inFlight;
    this.nonceReserved = c.nonceReserved;
    this.routingStop = c.routingStop;
    this.pending = pendingOf(base).toMap();
  }

  /** A run from `snapshot`, or undefined when its state serves no fast event or its counters are not plain. */
  static of(snapshot: EscrowSnapshot): EscrowRun | undefined {
    const types = fastTypesIn(snapshot);
    if (!types) return undefined;
    const c = snapshot.context;
    if (typeof c.nonce !== 'number' || typeof c.inFlight !== 'number') return undefined;
    const reserved = exactInt(c.reserved);
    const spent = exactInt(c.spent);
    const balance = exactInt(c.balance);
    const deposit = exactInt(c.deposit);
    if (reserved === undefined || spent === undefined || balance === undefined || deposit === undefined) return undefined;
    return new EscrowRun(snapshot, types, reserved, spent, balance, deposit);
  }

  /** Folds one (upcast) inference event or NoncesReserved: ACCEPTED, REFUSED or BAIL (nothing changed). */
  fold(type: string, data: unknown): number {
    if (typeof data !== 'object' || data === null) return BAIL;
    if (type === 'NoncesReserved') return this.types.has(type) ? this.reserve((data as { upTo?: unknown }).upTo) : BAIL;
    const d = data as RequestData;
    return this.foldRequest(type, d.requestId, d.nonce, type === 'InferenceStarted' ? d.reservedCost : d.cost);
  }

  /** `fold` given the fields it reads of the data (`amount`: reservedCost of a start, cost of an end). */
  foldRequest(type: string, requestId: unknown, nonce: unknown, amount: unknown): number {
    if (!this.types.has(type)) return BAIL;
    return type === 'InferenceStarted' ? this.start(requestId, nonce, amount) : this.end(requestId, amount);
  }

  /**
   * Folds InferencesRecorded's entries (its parsed `data.entries`), all or none (escrow.ts
   * recordInferences): ACCEPTED when each entry is accepted in turn; else what the first other
   * outcome was, with the run as it was before the event.
   */
  foldEntries(entries: unknown): number {
    if (!Array.isArray(entries)) return BAIL;
    const fields: EntryFields[] = new Array(entries.length);
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i] as { type?: unknown; data?: unknown } | null;
      const d = entry?.data as RequestData | null | undefined;
      if (typeof d !== 'object' || d === null) return BAIL; // before anything is folded: the caller steps the event itself
      const type = entry!.type as EntryFields['type'];
      fields[i] = { type, requestId: d.requestId, nonce: d.nonce, amount: type === 'InferenceStarted' ? d.reservedCost : d.cost };
    }
    return this.foldEntryFields(fields);
  }

  /** `foldEntries` given the fields a fold reads of each entry (scanned from the text, or taken from the data). */
  foldEntryFields(entries: readonly EntryFields[]): number {
    if (!this.types.has('InferencesRecorded') || entries.length === 0) return BAIL;
    const { nonce, inFlight, reserved, spent, balance, touched, accepted, starts } = this;
    // Restored as a copy, not by undoing the edits: a key removed and set again would move to the end.
    const saved = entries.length > 1 ? new Map(this.pending) : undefined;
    for (let i = 0; i < entries.length; i++) {
      const { type, requestId, nonce: n, amount } = entries[i]!;
      let outcome: number = BAIL;
      if (typeof type === 'string' && this.types.has(type) && typeof requestId === 'string') {
        if (type === 'InferenceStarted') outcome = this.start(requestId, n, amount);
        else if (type === 'InferenceFinished' || type === 'InferenceFailed') outcome = this.end(requestId, amount);
      }
      if (outcome !== ACCEPTED) {
        // The first entry refused or handed back changed nothing; later ones undo the earlier.
        if (i > 0) {
          this.pending = saved!;
          Object.assign(this, { nonce, inFlight, reserved, spent, balance, touched, accepted, starts });
        }
        return outcome;
      }
    }
    return ACCEPTED;
  }

  /** canReserveNonces, then reserveNonces. */
  private reserve(upTo: unknown): number {
    if (typeof upTo !== 'number' || !Number.isSafeInteger(upTo)) return BAIL;
    if (!reserveAllowed(this.counters(), upTo)) return REFUSED;
    this.nonceReserved = upTo;
    this.touched |= NONCE_RESERVED;
    this.accepted = true;
    return ACCEPTED;
  }

  /** canStartRequest, then startRequestUpdate and `pending[requestId] = reservedCost`. */
  private start(id: unknown, nonce: unknown, cost: unknown): number {
    if (typeof id !== 'string' || typeof nonce !== 'number') return BAIL;
    const c = exactInt(cost);
    if (c === undefined) return BAIL;
    const reserved = this.reserved + c;
    if (!Number.isSafeInteger(reserved)) return BAIL; // the machine's decimal arithmetic decides
    if (!startAllowed(NUMBERS, this.counters(), nonce, c, this.pending.has(id))) return REFUSED;
    this.nonce = nonce;
    this.inFlight += 1;
    this.reserved = reserved;
    this.touched |= RESERVED;
    this.pending.set(id, cost as string);
    // A run lives for the whole fold: its map is renewed like the live one (PENDING_RENEW).
    if (++this.starts === PENDING_RENEW) {
      this.starts = 0;
      this.pending = new Map(this.pending);
    }
    this.accepted = true;
    return ACCEPTED;
  }

  /** canEndRequest, then endRequestUpdate and `pending` without the request. */
  private end(id: unknown, cost: unknown): number {
    if (typeof id !== 'string') return BAIL;
    const reservation = this.pending.get(id);
    const c = exactInt(cost);
    if (c === undefined) return reservation === undefined ? REFUSED : BAIL;
    const r = reservation === undefined ? undefined : exactInt(reservation);
    if (reservation !== undefined && r === undefined) return BAIL;
    if (!endAllowed(NUMBERS, this.balance, c, r)) return REFUSED;
    const { spent, reserved, balance } = endUpdate(NUMBERS, { reserved: this.reserved, spent: this.spent, deposit: this.deposit }, c, r!);
    if (!Number.isSafeInteger(spent) || !Number.isSafeInteger(reserved) || !Number.isSafeInteger(balance)) return BAIL;
    this.inFlight -= 1;
    this.spent = spent;
    this.reserved = reserved;
    this.balance = balance;
    this.touched |= RESERVED | SPENT | BALANCE;
    this.pending.delete(id);
    this.accepted = true;
    return ACCEPTED;
  }

  /** The counters a start or a reservation is checked against (escrow-rules.ts). */
  private counters(): StartCounters<number> {
    return { nonce: this.nonce, nonceReserved: this.nonceReserved, routingStop: this.routingStop as number, reserved: this.reserved, balance: this.balance };
  }

  /** The snapshot after the run (`base` itself when nothing was accepted). Ends the run: call it once. */
  finish(): EscrowSnapshot {
    if (!this.accepted) return this.base;
    const c = this.base.context;
    const t = this.touched;
    return withFastCounters(
      this.base,
      {
        nonce: this.nonce,
        inFlight: this.inFlight,
        reserved: t & RESERVED ? String(this.reserved) : c.reserved,
        spent: t & SPENT ? String(this.spent) : c.spent,
        balance: t & BALANCE ? String(this.balance) : c.balance,
        nonceReserved: t & NONCE_RESERVED ? (this.nonceReserved as number) : c.nonceReserved,
      },
      PendingMap.fromMap(this.pending),
    );
  }
}
