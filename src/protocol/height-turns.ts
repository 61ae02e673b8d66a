/**
 * v5 heartbeat turns as the log defines them (zpoken/gonka@86cff503 devshard/heightsync/turn.go
 * `TurnTracker`): which heartbeat nonces exist (the ground of L3, ack causality), which turn each
 * belongs to, the acks each turn collected, and whether it completed or degraded. None of it is
 * hashed into the root; it feeds L3, the last completed height and the gateway's span logic.
 *
 * A turn is named by the nonce of its first heartbeat and spans slots_num nonces. It completes at
 * Q = ceil(2/3 · slots) distinct-slot acks that are not late, and degrades when its ack window
 * (h_req + D_ack) closes first. Records are immutable (a change makes a new object), so a mark is a
 * shallow copy and a refused diff restores it cheaply.
 */
import type { DevshardTx } from './gen/devshard/v1/diff_pb.js';
import type { MsgHeartbeat, MsgHeightAck, SyncState } from './gen/devshard/v1/diff_pb.js';
import { executorStamp, stampPresent } from './stamps.js';
import { U64_MAX } from './bytes.js';

/**
 * D_ack in blocks: the turnover budget (12 s interval + 24 s turn timeout) at the assumed 1 s block
 * time, plus the boundary block (Z5 heightsync/params.go `AckDeadlineBlocksFor`). Compiled, never
 * overlaid, so every replica computes the same late flags.
 */
export const ACK_DEADLINE_BLOCKS = 37n;
/** Turns kept behind the latest (the heartbeat index behind L3 is never pruned). */
export const TURN_RETAIN = 64;

export type TurnState = 'open' | 'complete' | 'degraded';

export interface TurnAck {
  /** The nonce the ack landed at. */
  nonce: bigint;
  height: bigint;
  hash: Uint8Array;
  syncState: SyncState;
  late: boolean;
}

export interface TurnRecord {
  readonly turnStart: bigint;
  /** [turnStart, turnStart + slots_num − 1]. */
  readonly spanEnd: bigint;
  /** The lowest stamped heartbeat height of the turn (0: none stamped). */
  readonly hReq: bigint;
  readonly acks: ReadonlyMap<number, TurnAck>;
  readonly state: TurnState;
  readonly completedAtHeight: bigint;
  /** The opening heartbeat's reason. */
  readonly reason: string;
}

/** `QuorumForRoster`: ceil(2/3 × slots). */
export const turnQuorum = (slots: number): number => (slots <= 0 ? 0 : Math.floor((2 * slots + 2) / 3));

const addSat = (a: bigint, b: bigint): bigint => (a > U64_MAX - b ? U64_MAX : a + b);

/** A heartbeat's requested height, or 0 when it carries no stamp (presence is the hash). */
const requestHeight = (hb: MsgHeartbeat): bigint => (hb.observedHeight === 0n || !stampPresent(hb.observedBlockHash) ? 0n : hb.observedHeight);

export interface TurnsMark {
  heartbeats: number;
  turns: Map<bigint, TurnRecord>;
  stampHeight: bigint;
  latestTurnStart: bigint;
  lastCompleted: bigint;
  lastCompleteStart: bigint;
}

export class HeightTurns {
  private turns = new Map<bigint, TurnRecord>();
  /** Heartbeat nonces (ascending) and the turn each belongs to: append-only, so a mark is a length. */
  private hbNonces: bigint[] = [];
  private hbStarts: bigint[] = [];
  /** The highest executor stamp (confirm / finish) seen: it moves the clock on a busy escrow. */
  private stampHeight = 0n;
  private latestStart = 0n;
  private lastCompleted = 0n;
  private lastCompleteStartNonce = 0n;
  readonly quorum: number;

  constructor(
    readonly slotsNum: number,
    readonly ackDeadline: bigint = ACK_DEADLINE_BLOCKS,
  ) {
    this.quorum = turnQuorum(Math.max(slotsNum, 1));
  }

  /** `Observe`: folds one applied diff at the log's height `hNow`. */
  observe(nonce: bigint, txs: readonly DevshardTx[], hNow: bigint): void {
    for (const tx of txs) {
      if (tx.tx.case === 'heartbeat') this.observeHeartbeat(nonce, tx.tx.value);
      const h = executorStamp(tx);
      if (h !== undefined && h > this.stampHeight) this.stampHeight = h;
    }
    for (const tx of txs) if (tx.tx.case === 'heightAck') this.observeAck(nonce, tx.tx.value);
    this.advance(hNow > this.stampHeight ? hNow : this.stampHeight);
  }

  /** A heartbeat inside the newest turn's span joins it; any other opens a turn of its own. */
  turnStartFor(nonce: bigint): bigint {
    const rec = this.turns.get(this.latestStart);
    return rec && nonce >= rec.turnStart && nonce <= rec.spanEnd ? rec.turnStart : nonce;
  }

  private observeHeartbeat(nonce: bigint, hb: MsgHeartbeat): void {
    const start = this.turnStartFor(nonce);
    const n = this.hbNonces.length;
    if (n > 0 && this.hbNonces[n - 1] === nonce) this.hbStarts[n - 1] = start;
    else {
      this.hbNonces.push(nonce);
      this.hbStarts.push(start);
    }
    if (start > this.latestStart) this.latestStart = start;
    const rec = this.turns.get(start);
    const h = requestHeight(hb);
    if (!rec) {
      const slots = hb.slotsNum === 0n ? BigInt(Math.max(this.slotsNum, 1)) : hb.slotsNum;
      this.turns.set(start, { turnStart: start, spanEnd: BigInt.asUintN(64, start + slots - 1n), hReq: h, acks: new Map(), state: 'open', completedAtHeight: 0n, reason: hb.reason });
      return;
    }
    const reason = rec.reason === '' && hb.reason !== '' ? hb.reason : rec.reason;
    const hReq = h !== 0n && (rec.hReq === 0n || h < rec.hReq) ? h : rec.hReq;
    if (reason !== rec.reason || hReq !== rec.hReq) this.turns.set(start, { ...rec, reason, hReq });
  }

  /** An ack joins the turn of the heartbeat it names; one whose turn was pruned is dropped. */
  private observeAck(nonce: bigint, ack: MsgHeightAck): void {
    const start = this.heartbeatTurn(ack.refNonce);
    if (start === undefined) return;
    const rec = this.turns.get(start);
    if (!rec) return;
    // Late is judged on the host's own stamp: the one time in the log the user cannot forge.
    let late = rec.state === 'degraded' || (rec.hReq > 0n && ack.observedHeight > addSat(rec.hReq, this.ackDeadline));
    const had = rec.acks.get(ack.slotId);
    if (had) late = late || had.late;
    const acks = new Map(rec.acks).set(ack.slotId, { nonce, height: ack.observedHeight, hash: ack.observedBlockHash, syncState: ack.syncState, late });
    this.turns.set(start, { ...rec, acks });
  }

  private advance(hNow: bigint): void {
    for (const rec of this.turns.values()) this.recompute(rec, hNow);
    if (this.turns.size > TURN_RETAIN) {
      const starts = [...this.turns.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      for (const s of starts.slice(0, starts.length - TURN_RETAIN)) this.turns.delete(s);
    }
  }

  /** A settled turn stays settled: late acks never un-degrade it nor un-complete it. */
  private recompute(rec: TurnRecord, hNow: bigint): void {
    if (rec.state !== 'open') return;
    let counting = 0;
    for (const a of rec.acks.values()) if (!a.late) counting++;
    if (counting >= this.quorum) {
      this.turns.set(rec.turnStart, { ...rec, state: 'complete', completedAtHeight: hNow });
      if (hNow > this.lastCompleted) this.lastCompleted = hNow;
      if (rec.turnStart > this.lastCompleteStartNonce) this.lastCompleteStartNonce = rec.turnStart;
      return;
    }
    if (this.windowClosed(rec, hNow)) this.turns.set(rec.turnStart, { ...rec, state: 'degraded' });
  }

  private windowClosed(rec: TurnRecord, hNow: bigint): boolean {
    if (rec.hReq === 0n) return false;
    const deadline = addSat(rec.hReq, this.ackDeadline);
    if (hNow > deadline) return true;
    for (const a of rec.acks.values()) if (a.height > deadline) return true;
    return false;
  }

  /** The turn of the heartbeat at `nonce`, if one landed there (L3's question). */
  heartbeatTurn(nonce: bigint): bigint | undefined {
    let lo = 0;
    let hi = this.hbNonces.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.hbNonces[mid]! < nonce) lo = mid + 1;
      else hi = mid;
    }
    return lo < this.hbNonces.length && this.hbNonces[lo] === nonce ? this.hbStarts[lo] : undefined;
  }

  /** h_last: the height the last turn completed at, or the highest executor stamp when higher. */
  get lastCompletedHeight(): bigint {
    return this.stampHeight > this.lastCompleted ? this.stampHeight : this.lastCompleted;
  }
  /** The start nonce of the newest turn (0: none yet). */
  get latestTurnStart(): bigint {
    return this.latestStart;
  }
  /** The start nonce of the newest completed turn (0: none yet). */
  get lastCompleteStart(): bigint {
    return this.lastCompleteStartNonce;
  }

  record(turnStart: bigint): TurnRecord | undefined {
    return this.turns.get(turnStart);
  }

  latest(): TurnRecord | undefined {
    return this.latestStart === 0n ? undefined : this.turns.get(this.latestStart);
  }

  /** Slots with no ack in the turn at `turnStart` (empty when the turn is unknown). */
  missingAcks(turnStart: bigint): number[] {
    const rec = this.turns.get(turnStart);
    if (!rec) return [];
    const out: number[] = [];
    for (let s = 0; s < this.slotsNum; s++) if (!rec.acks.has(s)) out.push(s);
    return out;
  }

  mark(): TurnsMark {
    return {
      heartbeats: this.hbNonces.length,
      turns: new Map(this.turns),
      stampHeight: this.stampHeight,
      latestTurnStart: this.latestStart,
      lastCompleted: this.lastCompleted,
      lastCompleteStart: this.lastCompleteStartNonce,
    };
  }

  /** Back to a mark taken in the same diff (nonces only grow, so heartbeats past the mark are this diff's). */
  restore(m: TurnsMark): void {
    this.hbNonces.length = m.heartbeats;
    this.hbStarts.length = m.heartbeats;
    this.turns = m.turns;
    this.stampHeight = m.stampHeight;
    this.latestStart = m.latestTurnStart;
    this.lastCompleted = m.lastCompleted;
    this.lastCompleteStartNonce = m.lastCompleteStart;
  }
}
