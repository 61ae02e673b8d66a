/**
 * `explain request <id>` for the console: what the log holds of one chat request, found by its
 * x-request-id or its completion id (`devshard-<escrow>-<nonce>`): the gateway's records of it
 * (start, end, cost), the diffs that carried its txs (StartInference, ConfirmStart, Finish or
 * Timeout) with their nonces, the replica's record of it, what each host applied, and what the
 * settlement pays the executor's slot. The same reading as the CLI's (src/cli/commands/explain.ts),
 * over the store's asynchronous reads.
 */
import { devshardSessionStream, escrowStream, type SettlementData } from '../events/catalog.js';
import type { RecordedEvent } from '../events/envelope.js';
import { eachRequestEvent } from '../events/request-data.js';
import type { ConsoleLog } from './log-source.js';
import { auditDevshardLog, failureText, type InferenceTrail } from './gateway-reads.js';

export interface RequestView {
  request_id: string;
  completion_id: string;
  escrow_id: string;
  nonce: number;
  gateway: { type: string; position: number; time: string; data: Record<string, unknown> }[];
  devshard: (InferenceTrail & { executor: string | null; failures: string[]; hosts: { host: string; applied: number }[] }) | null;
  settlement: { nonce: number; slot_id: number; slot_cost: string; signatures: number } | null;
  billing: { billed: string; charged: string | null };
}

const REQUEST_EVENTS = new Set(['InferencesRecorded', 'InferenceStarted', 'InferenceFinished', 'InferenceFailed']);

async function readStreamAll(log: ConsoleLog, stream: string): Promise<RecordedEvent[]> {
  const out: RecordedEvent[] = [];
  for (let from = 0; ; from += 2_000) {
    const page = await log.readStream(stream, from, 2_000);
    out.push(...page);
    if (page.length < 2_000) return out;
  }
}

/** The request's records in the escrow's stream records. */
function matches(records: Iterable<RecordedEvent>, test: (escrowId: string, d: { requestId?: string; nonce?: number }) => boolean, out: RequestView['gateway'], where: { escrowId?: string; nonce?: number }): void {
  for (const r of records) {
    if (!REQUEST_EVENTS.has(r.type) || !r.streamId.startsWith('escrow-') || r.streamId.startsWith('escrow-create-')) continue;
    const escrowId = r.streamId.slice('escrow-'.length);
    for (const e of eachRequestEvent([r])) {
      const d = e.data as { requestId?: string; nonce?: number };
      if (!test(escrowId, d)) continue;
      if (where.escrowId !== undefined && (where.escrowId !== escrowId || where.nonce !== d.nonce)) continue;
      where.escrowId = escrowId;
      where.nonce = d.nonce;
      out.push({ type: e.type, position: r.position, time: r.time, data: e.data as Record<string, unknown> });
    }
  }
}

export async function explainRequestFromLog(log: ConsoleLog, id: string): Promise<RequestView | undefined> {
  const gateway: RequestView['gateway'] = [];
  const where: { escrowId?: string; nonce?: number } = {};
  const completion = /^devshard-(\d+)-(\d+)$/.exec(id);
  if (completion) {
    const [, escrowId, nonce] = completion;
    matches(await readStreamAll(log, escrowStream(escrowId!)), (e, d) => e === escrowId && d.nonce === Number(nonce), gateway, where);
    where.escrowId ??= escrowId;
    where.nonce ??= Number(nonce);
    if (gateway.length === 0 && log.streamVersion(escrowStream(escrowId!)) < 0) return undefined;
  } else {
    // An x-request-id names no escrow: every escrow's request records are read (an admin's search).
    const batch: RecordedEvent[] = [];
    for await (const r of log.readAll(0) as AsyncIterable<RecordedEvent>) {
      batch.push(r);
      if (batch.length >= 2_000) matches(batch.splice(0), (_e, d) => d.requestId === id, gateway, where);
    }
    matches(batch, (_e, d) => d.requestId === id, gateway, where);
    if (where.escrowId === undefined) return undefined;
  }
  const escrowId = where.escrowId!;
  const nonce = where.nonce!;
  const records = [...(await readStreamAll(log, escrowStream(escrowId))), ...(await readStreamAll(log, devshardSessionStream(escrowId)))].sort((a, b) => a.position - b.position);
  const { audit, escrows } = auditDevshardLog(records, { trails: true });
  let slots: string[] = [];
  let settlement: RequestView['settlement'] = null;
  for (const r of records) {
    if (r.type === 'DevshardSessionOpened') slots = (r.data as { slots: { host: string }[] }).slots.map((s) => s.host);
    if (r.type !== 'EscrowFinalized' || slots.length === 0) continue;
    const s = (r.data as { settlement: SettlementData }).settlement;
    const slotId = nonce % slots.length;
    settlement = { nonce: s.nonce, slot_id: slotId, slot_cost: s.hostStats.find((h) => h.slotId === slotId)?.cost ?? '0', signatures: s.signatures.length };
  }
  const trail = audit.trail(escrowId, nonce);
  const e = escrows.find((x) => x.escrowId === escrowId);
  let billed = 0n;
  for (const g of gateway) if (g.type !== 'InferenceStarted') billed += BigInt((g.data as { cost?: string }).cost ?? '0');
  const requestId = (gateway.find((g) => typeof g.data.requestId === 'string')?.data.requestId as string | undefined) ?? id;
  return {
    request_id: requestId,
    completion_id: `devshard-${escrowId}-${nonce}`,
    escrow_id: escrowId,
    nonce,
    gateway,
    devshard: trail
      ? { ...trail, executor: slots.length ? slots[nonce % slots.length]! : null, failures: (e?.failures ?? []).map(failureText), hosts: (e?.hosts ?? []).map((h) => ({ host: h.host, applied: h.applied })) }
      : null,
    settlement,
    billing: { billed: billed.toString(), charged: trail?.record ? trail.record.actualCost : null },
  };
}
