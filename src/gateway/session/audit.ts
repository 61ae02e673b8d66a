/**
 * Reading the devshard protocol sessions back from the log, with no chain and no host: each escrow's
 * replica is rebuilt from its DevshardSessionOpened facts (creator, amount, slots, session fields,
 * bind params) and its DevshardDiffSent diffs, and checked diff by diff:
 *  - `nonce-contiguous`: the diffs' nonces run 1, 2, 3, … with none skipped or repeated;
 *  - `diff-decode`: the recorded wire txs decode to DiffContent{nonce, txs} of the diff's nonce;
 *  - `user-signature`: the user signature over DiffContent{nonce, txs, escrow_id, post_state_root}
 *    recovers to the escrow's creator;
 *  - `state-machine`: the replica accepts every tx (the hosts' rules, src/protocol);
 *  - `post-state-root`: the recorded post_state_root (the root the hosts signed in their receipts)
 *    equals the replica's root after applying the diff;
 *  - `settlement`: every protocol EscrowFinalized equals the replica's BuildSettlement at its nonce
 *    (state root, nonce, fees, rest hash, host stats);
 *  - `settlement-signature`: each recorded signature recovers to its slot's host address;
 *  - `session-facts`: the facts are recorded, and agree with the escrow's own record (creator, slots).
 * After the first failure of an escrow its later diffs are not checked (they build on a state the
 * log does not support). Pure over records: `shardgate verify`, `replay` and `explain` add the I/O.
 * Lives in src/gateway because the layers below it (projections, events) may not import src/protocol.
 */
import { upcast, type EventDataMap, type SettlementData, type SlotInfo } from '../../events/catalog.js';
import type { RecordedEvent } from '../../events/envelope.js';
import {
  buildSettlement,
  diffSignedBytes,
  DevshardError,
  Phase,
  recoverAddress,
  Replica,
  LEGACY_PROTOCOL,
  settlementSignatureValid,
  toHex,
  type RecordedDiff,
  type Settlement,
} from '../../protocol/index.js';
import { recordedDiffOf, sessionEscrowOf } from './diffs.js';
import { replicaParamsOf } from '../../network/devshard/session.js';
import { decodeRow, EVENT_COLUMNS, type EventRow } from '../../events/rows.js';
import type { VerifyCheck } from '../../events/verify.js';
import { describeTx, failureText, isMissingFacts, recordView, type AuditFailure, type AuditOptions, type DiffLine, type EscrowAudit, type HostAudit, type InferenceTrail } from './audit-report.js';

// What the audit answers and how a reader sees it (audit-report.ts), importable from here as before.
export { describeTx, failureText, formatTxs, isMissingFacts } from './audit-report.js';
export type { AuditFailure, AuditOptions, AuditRule, DiffLine, EscrowAudit, HostAudit, InferenceTrail, TxLine } from './audit-report.js';

const SESSION_PREFIX = 'devshard-session-';
const ESCROW_PREFIX = 'escrow-';

export const PHASE_NAMES: Record<Phase, string> = { [Phase.Active]: 'Active', [Phase.Finalizing]: 'Finalizing', [Phase.Settlement]: 'Settlement' };

const b64hex = (b64: string): string => Buffer.from(b64, 'base64').toString('hex');
const PROTOCOL_SETTLEMENT_VERSION = 2;

interface EscrowState {
  escrowId: string;
  /** From EscrowCreated / EscrowImported: the chain's record. */
  creator?: string;
  slots?: readonly SlotInfo[];
  opened?: EventDataMap['DevshardSessionOpened'];
  replica?: Replica;
  diffs: number;
  lastNonce: number;
  /** Stopped at a failure: later diffs not checked. */
  stopped: boolean;
  /** The replica's settlement at each nonce that left it in the Settlement phase. */
  settlementsAt: Map<number, Settlement>;
  checked: EscrowAudit['settlements'];
  /** Our recorded root at each nonce (hex), to check what the hosts acknowledged. */
  roots: Map<number, string>;
  hosts: Map<string, HostAudit>;
  failures: AuditFailure[];
}


/** Feeds records in log order; `apply` answers the line of a DevshardDiffSent. */
export class DevshardLogAudit {
  private readonly escrows = new Map<string, EscrowState>();
  private readonly trails = new Map<string, InferenceTrail>();

  constructor(private readonly opts: AuditOptions = {}) {}

  private escrow(id: string): EscrowState {
    let e = this.escrows.get(id);
    if (!e) {
      e = { escrowId: id, diffs: 0, lastNonce: 0, stopped: false, settlementsAt: new Map(), checked: [], roots: new Map(), hosts: new Map(), failures: [] };
      this.escrows.set(id, e);
    }
    return e;
  }

  /** The trail of inference `id` of an escrow (with `trails`). */
  trail(escrowId: string, inferenceId: number): InferenceTrail | undefined {
    return this.trails.get(`${escrowId}/${inferenceId}`);
  }

  apply(raw: RecordedEvent): DiffLine | undefined {
    const sid = raw.streamId;
    if (!sid.startsWith(SESSION_PREFIX) && !(sid.startsWith(ESCROW_PREFIX) && !sid.startsWith('escrow-create-'))) return undefined;
    const r = upcast(raw);
    if (!r) return undefined;
    switch (r.type) {
      case 'EscrowCreated':
      case 'EscrowImported': {
        const e = this.escrow(r.data.escrowId);
        e.creator = r.data.creator;
        e.slots = r.data.slots;
        return undefined;
      }
      case 'EscrowFinalized':
        this.finalized(r.data.settlement, r.position);
        return undefined;
      case 'DevshardSessionOpened':
        this.opened(r.data, r.position);
        return undefined;
      case 'DevshardDiffSent':
        return this.diff(r.data, r.position);
      case 'DevshardHostAcknowledged': {
        const e = this.escrow(r.data.escrowId);
        const h = this.host(e, r.data.host);
        const ours = e.roots.get(r.data.nonce);
        if (ours === undefined || ours !== r.data.stateHash.toLowerCase()) {
          this.fail(e, { nonce: r.data.nonce, position: r.position, rule: 'host-ack', message: `host ${r.data.host} acknowledged nonce ${r.data.nonce} with state_hash ${r.data.stateHash}, but ${ours === undefined ? 'no diff of that nonce precedes it in the log' : `our diff's root there is ${ours}`}` });
        }
        if (r.data.nonce > h.applied) h.applied = r.data.nonce;
        delete h.refused;
        return undefined;
      }
      case 'DevshardHostRefused': {
        const e = this.escrow(r.data.escrowId);
        this.host(e, r.data.host).refused = { status: r.data.status, message: r.data.message, ...(r.data.rule ? { rule: r.data.rule } : {}), position: r.position };
        return undefined;
      }
      default:
        return undefined;
    }
  }

  private host(e: EscrowState, host: string): HostAudit {
    let h = e.hosts.get(host);
    if (!h) e.hosts.set(host, (h = { host, applied: 0 }));
    return h;
  }

  private fail(e: EscrowState, f: Omit<AuditFailure, 'escrowId'>): AuditFailure {
    const failure = { escrowId: e.escrowId, ...f };
    e.failures.push(failure);
    return failure;
  }

  private opened(d: EventDataMap['DevshardSessionOpened'], position: number): void {
    const e = this.escrow(d.escrowId);
    if (e.creator !== undefined && d.creator !== e.creator) {
      this.fail(e, { position, rule: 'session-facts', message: `the session was opened for creator ${d.creator}, the escrow's creator is ${e.creator}` });
    }
    if (e.slots && d.slots.map((s) => s.host).join() !== e.slots.map((s) => s.host).join()) {
      this.fail(e, { position, rule: 'session-facts', message: `the session's slots (${d.slots.map((s) => s.host).join(', ')}) differ from the escrow's (${e.slots.map((s) => s.host).join(', ')})` });
    }
    if (e.opened === undefined && e.diffs === 0) {
      e.opened = d;
      try {
        e.replica = Replica.create(replicaParamsOf(sessionEscrowOf(d)));
      } catch (err) {
        this.fail(e, { position, rule: 'session-facts', message: `the replica cannot be created from the recorded facts: ${String(err instanceof Error ? err.message : err)}` });
        e.stopped = true;
      }
    } else if (e.opened !== undefined && (d.amount !== e.opened.amount || JSON.stringify(d.session) !== JSON.stringify(e.opened.session) || JSON.stringify(d.bind ?? null) !== JSON.stringify(e.opened.bind ?? null) || JSON.stringify(d.protocol ?? null) !== JSON.stringify(e.opened.protocol ?? null))) {
      this.fail(e, { position, rule: 'session-facts', message: 'the session was reopened with other facts (amount, session fields, bind params or protocol) than it was bound to' });
    }
  }

  private diff(data: EventDataMap['DevshardDiffSent'], position: number): DiffLine {
    const e = this.escrow(data.escrowId);
    const nonce = Number(data.nonce);
    const line: DiffLine = { escrowId: e.escrowId, position, nonce, txs: [], root: b64hex(data.postStateRoot) };
    e.diffs++;
    const expected = e.lastNonce + 1;
    e.lastNonce = Math.max(e.lastNonce, nonce);
    let d: RecordedDiff;
    try {
      d = recordedDiffOf(data);
    } catch (err) {
      line.failure = this.fail(e, { nonce, position, rule: 'diff-decode', message: `the recorded txs do not decode: ${String(err instanceof Error ? err.message : err)}` });
      e.stopped = true;
      return line;
    }
    line.txs = d.txs.map((tx) => describeTx(tx));
    e.roots.set(nonce, line.root);
    if (e.stopped) return line;
    if (nonce !== expected) {
      line.failure = this.fail(e, { nonce, position, rule: 'nonce-contiguous', message: nonce < expected ? `nonce ${nonce} again after ${expected - 1} (reused)` : `expected nonce ${expected}, got ${nonce} (skipped ${expected}${nonce - 1 > expected ? `..${nonce - 1}` : ''})` });
      e.stopped = true;
      return line;
    }
    const creator = e.opened?.creator ?? e.creator;
    if (creator !== undefined) {
      let signer: string;
      try {
        signer = recoverAddress(diffSignedBytes(e.escrowId, d.nonce, d.txs, d.postStateRoot), d.userSig);
      } catch (err) {
        signer = `(no address: ${String(err instanceof Error ? err.message : err)})`;
      }
      if (signer !== creator) {
        line.failure = this.fail(e, { nonce, position, rule: 'user-signature', message: `the diff's user signature recovers to ${signer}, not to the creator ${creator}` });
        e.stopped = true;
        return line;
      }
    }
    const replica = e.replica;
    if (!replica) return line;
    const slots = replica.slots;
    const allowed = d.warmKeyBindings.map((b) => ({ warm: b.warm, cold: slots[b.slot] }));
    let root: Uint8Array;
    try {
      root = replica.applyLocal(d.nonce, d.txs, { warmKeys: (warm, cold) => allowed.some((a) => a.warm === warm && a.cold === cold) }).root;
    } catch (err) {
      if (!(err instanceof DevshardError)) throw err;
      line.failure = this.fail(e, { nonce, position, rule: 'state-machine', message: `the replica refuses the diff: ${err.message}` });
      e.stopped = true;
      return line;
    }
    line.phase = PHASE_NAMES[replica.phase];
    if (toHex(root) !== line.root) {
      line.failure = this.fail(e, { nonce, position, rule: 'post-state-root', message: `post_state_root ${line.root} differs from the replica's root ${toHex(root)}` });
      e.stopped = true;
      return line;
    }
    // Finish costs as the replica charged them.
    d.txs.forEach((tx, i) => {
      if (tx.tx.case === 'finishInference') {
        const rec = replica.inference(tx.tx.value.inferenceId);
        if (rec) line.txs[i]!.detail += ` → cost ${rec.actualCost}`;
      }
    });
    if (replica.phase === Phase.Settlement) e.settlementsAt.set(nonce, buildSettlement(replica));
    if (this.opts.trails) this.track(e, line, replica);
    return line;
  }

  private track(e: EscrowState, line: DiffLine, replica: Replica): void {
    for (const tx of line.txs) {
      if (tx.inferenceId === undefined) continue;
      const key = `${e.escrowId}/${tx.inferenceId}`;
      let t = this.trails.get(key);
      if (!t) this.trails.set(key, (t = { escrowId: e.escrowId, inferenceId: tx.inferenceId, steps: [] }));
      t.steps.push({ nonce: line.nonce, position: line.position, tx });
    }
    // Every trail's record as it stands after this diff (sealed records leave the live set).
    for (const [key, t] of this.trails) {
      if (t.escrowId !== e.escrowId || t.sealedAt !== undefined) continue;
      const rec = replica.inference(BigInt(t.inferenceId));
      if (rec) t.record = recordView(rec);
      else if (replica.isSealed(BigInt(t.inferenceId))) t.sealedAt = line.nonce;
      void key;
    }
  }

  private finalized(s: SettlementData, position: number): void {
    if (s.version !== PROTOCOL_SETTLEMENT_VERSION) return;
    const e = this.escrow(s.escrowId);
    const slots = e.opened?.slots.map((x) => x.host) ?? e.slots?.map((x) => x.host) ?? [];
    const ours = e.settlementsAt.get(s.nonce);
    const entry = { nonce: s.nonce, position, signatures: s.signatures.length, valid: 0, matches: false };
    e.checked.push(entry);
    if (!ours) {
      if (e.replica && !e.stopped) {
        const phase = PHASE_NAMES[e.replica.phase];
        this.fail(e, { nonce: s.nonce, position, rule: 'settlement', message: `the recorded settlement is at nonce ${s.nonce}; the replica rebuilt from the diffs is not in Settlement there (it is ${phase} at nonce ${e.replica.latestNonce})` });
      }
      return;
    }
    const diffs: string[] = [];
    if (toHex(ours.stateRoot) !== s.stateRoot.toLowerCase()) diffs.push(`state_root ${s.stateRoot} ≠ replica ${toHex(ours.stateRoot)}`);
    if (toHex(ours.restHash) !== s.restHash.toLowerCase()) diffs.push(`rest_hash ${s.restHash} ≠ replica ${toHex(ours.restHash)}`);
    if (ours.fees.toString() !== s.fees) diffs.push(`fees ${s.fees} ≠ replica ${ours.fees}`);
    const stat = (h: { slotId: number; missed: number; invalid: number; cost: string | bigint }) => `${h.slotId}:${h.missed}/${h.invalid}/${h.cost}`;
    const recStats = [...s.hostStats].sort((a, b) => a.slotId - b.slotId).map(stat).join(' ');
    const repStats = ours.hostStats.map(stat).join(' ');
    if (recStats !== repStats) diffs.push(`host_stats (slot:missed/invalid/cost) ${recStats} ≠ replica ${repStats}`);
    if (diffs.length > 0) {
      this.fail(e, { nonce: s.nonce, position, rule: 'settlement', message: `the recorded settlement differs from the replica's: ${diffs.join('; ')}` });
      return;
    }
    entry.matches = true;
    for (const sig of s.signatures) {
      const host = slots[sig.slotId];
      if (host === undefined) {
        this.fail(e, { nonce: s.nonce, position, rule: 'settlement-signature', message: `a signature names slot ${sig.slotId}, beyond the ${slots.length} slots` });
      } else if (!settlementSignatureValid(ours, host, new Uint8Array(Buffer.from(sig.signature, 'base64')))) {
        this.fail(e, { nonce: s.nonce, position, rule: 'settlement-signature', message: `the signature of slot ${sig.slotId} does not recover to its host ${host}` });
      } else entry.valid++;
    }
  }

  /** Every escrow with devshard events, in the order first seen. */
  result(): EscrowAudit[] {
    const out: EscrowAudit[] = [];
    for (const e of this.escrows.values()) {
      if (e.diffs === 0 && e.opened === undefined && e.checked.length === 0 && e.hosts.size === 0) continue;
      const failures = [...e.failures];
      if (e.diffs > 0 && e.opened === undefined) {
        failures.push({ escrowId: e.escrowId, position: 0, rule: 'session-facts', message: 'no DevshardSessionOpened before the diffs (a log older than it): nonces and signatures checked, roots not recomputed' });
      }
      const r = e.replica;
      out.push({
        escrowId: e.escrowId,
        diffs: e.diffs,
        lastNonce: e.lastNonce,
        facts: e.opened ? 'recorded' : 'missing',
        ...(e.opened ? { protocol: { ...(e.opened.protocol ?? LEGACY_PROTOCOL) } } : {}),
        ...(r
          ? { replica: { nonce: Number(r.latestNonce), phase: PHASE_NAMES[r.phase], balance: r.balance.toString(), fees: r.fees.toString(), finalizeNonce: Number(r.finalizeNonce), root: toHex(r.stateRoot()) } }
          : {}),
        settlements: e.checked,
        hosts: [...e.hosts.values()].map((h) => ({ ...h, ...(h.refused ? { refused: { ...h.refused } } : {}) })),
        failures,
      });
    }
    return out;
  }
}

/** The event types the audit reads (everything else is skipped before its JSON is parsed). */
export const AUDITED_TYPES = ['EscrowCreated', 'EscrowImported', 'EscrowFinalized', 'DevshardSessionOpened', 'DevshardDiffSent', 'DevshardHostAcknowledged', 'DevshardHostRefused'] as const;

/** Audits every devshard session of an iterable of records. */
export function auditDevshardLog(records: Iterable<RecordedEvent>, opts: AuditOptions = {}): { audit: DevshardLogAudit; escrows: EscrowAudit[] } {
  const audit = new DevshardLogAudit(opts);
  for (const r of records) audit.apply(r);
  return { audit, escrows: audit.result() };
}

/**
 * `shardgate verify`'s devshard check: every escrow's replica rebuilt from the log (see the module
 * comment for the rules). `report` receives every escrow's audit (failures included); the check
 * fails at the first failure's position, naming how many there are.
 */
export function devshardCheck(report?: (escrows: EscrowAudit[]) => void): VerifyCheck {
  return ({ db }) => {
    const marks = AUDITED_TYPES.map(() => '?').join(', ');
    const rows = db.prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE type IN (${marks}) ORDER BY position`).raw().iterate(...AUDITED_TYPES) as IterableIterator<EventRow>;
    const { escrows } = auditDevshardLog((function* () {
      for (const r of rows) yield decodeRow(r);
    })());
    report?.(escrows);
    const failures = escrows.flatMap((e) => e.failures).filter((f) => !isMissingFacts(f));
    if (failures.length === 0) return undefined;
    const first = failures[0]!;
    return { position: first.position, reason: `${failureText(first)}${failures.length > 1 ? ` (and ${failures.length - 1} more devshard failure(s))` : ''}` };
  };
}
