/**
 * `verify`'s verdict for one escrow: every event of its streams hashes to its recorded hash (from
 * its recorded predecessor's hash: the global chain, checked where this escrow's events sit in it),
 * versions follow each other, and its devshard session rebuilds from its recorded diffs (the
 * replica, the settlement equal to it, the hosts' signatures; src/gateway/session/audit.ts as
 * `shardgate verify` runs it). The whole log's check stays `shardgate verify`'s.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { canonicalJson } from '../events/canonical-json.js';
import type { RecordedEvent } from '../events/envelope.js';
import { eventHash } from '../events/hash.js';
import type { ConsoleLog } from './log-source.js';
import { auditDevshardLog, failureText, isMissingFacts } from './gateway-reads.js';

const PAGE = 2_000;

export interface EscrowVerdict {
  escrow_id: string;
  ok: boolean;
  events: number;
  /** What was checked, in words. */
  checked: string[];
  failures: { position: number; reason: string }[];
  warnings: string[];
  devshard: {
    diffs: number;
    last_nonce: number;
    replica: { nonce: number; phase: string; balance: string; fees: string; root: string } | null;
    settlements: { nonce: number; position: number; signatures: number; valid: number; matches: boolean }[];
    hosts: { host: string; applied: number; refused: string | null }[];
  } | null;
}

function hashOk(r: RecordedEvent): boolean {
  if (r.prevHash === undefined || r.hash === undefined) return true;
  const computed = eventHash(r.prevHash, {
    position: r.position,
    streamId: r.streamId,
    streamVersion: r.streamVersion,
    type: r.type,
    schemaVersion: r.schemaVersion,
    dataJson: canonicalJson(r.data),
    metadataJson: canonicalJson(r.metadata ?? {}),
    time: r.time,
  });
  return computed === r.hash;
}

export async function verifyEscrow(log: ConsoleLog, escrowId: string, streams: string[]): Promise<EscrowVerdict> {
  const failures: EscrowVerdict['failures'] = [];
  const records: RecordedEvent[] = [];
  for (const s of streams) {
    let expected = 0;
    for (let from = 0; ; from += PAGE) {
      const page = await log.readStream(s, from, PAGE);
      for (const r of page) {
        if (r.streamVersion !== expected) failures.push({ position: r.position, reason: `${s}: version ${r.streamVersion} where ${expected} was expected` });
        expected = r.streamVersion + 1;
        if (!hashOk(r)) failures.push({ position: r.position, reason: `${s}: the event's hash does not match its content (altered after it was written)` });
        records.push(r);
      }
      if (page.length < PAGE) break;
      await nextTurn();
    }
  }
  records.sort((a, b) => a.position - b.position);
  const { escrows } = auditDevshardLog(records);
  const e = escrows.find((x) => x.escrowId === escrowId);
  const warnings: string[] = [];
  for (const f of e?.failures ?? []) {
    if (isMissingFacts(f)) warnings.push(failureText(f));
    else failures.push({ position: f.position, reason: failureText(f) });
  }
  failures.sort((a, b) => a.position - b.position);
  return {
    escrow_id: escrowId,
    ok: failures.length === 0,
    events: records.length,
    checked: [
      `${records.length} events of ${streams.join(', ')}: contiguous versions, each hash recomputed from its content and its predecessor's hash`,
      e ? `devshard session: ${e.diffs} diffs replayed through the replica; ${e.settlements.length} settlement(s) compared with it, their signatures recovered to their slots` : 'no devshard session recorded',
    ],
    failures,
    warnings,
    devshard: e
      ? {
          diffs: e.diffs,
          last_nonce: e.lastNonce,
          replica: e.replica ? { nonce: e.replica.nonce, phase: e.replica.phase, balance: e.replica.balance, fees: e.replica.fees, root: e.replica.root } : null,
          settlements: e.settlements,
          hosts: e.hosts.map((h) => ({ host: h.host, applied: h.applied, refused: h.refused ? `${h.refused.status}${h.refused.rule ? ` ${h.refused.rule}` : ''}: ${h.refused.message.slice(0, 160)}` : null })),
        }
      : null,
  };
}
