import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { withExistingLog } from './existing-log.js';
import { defaultStorageDir, eventsFile } from '../../events/storage-path.js';
import { openSqliteEventStore } from '../../events/sqlite-store.js';
import type { LocalLog } from '../../projections/from-store.js';
import { explainRotation, formatExplain } from '../../projections/rotation-explain.js';
import { devshardSessionStream, escrowStream, type SettlementData } from '../../events/catalog.js';
import { eachRequestEvent } from '../../events/request-data.js';
import { auditDevshardLog } from '../../gateway/session/audit.js';
import { failureText, formatTxs, type HostAudit, type InferenceTrail } from '../../gateway/session/audit-report.js';

export interface ExplainRotationOptions {
  model?: string;
  epoch?: number;
  json?: boolean;
}

/** Writes the rotation explanation of a store (text, or JSON with `json`). */
export function runExplainRotation(store: LocalLog, opts: ExplainRotationOptions, out: (s: string) => void = (s) => process.stdout.write(s)): void {
  const x = explainRotation(store.readAll(0), { ...(opts.model !== undefined ? { model: opts.model } : {}), ...(opts.epoch !== undefined ? { epoch: opts.epoch } : {}) });
  out(opts.json ? `${JSON.stringify(x, null, 2)}\n` : formatExplain(x));
}

/** What the log says about one request: the gateway's own events and, over the devshard protocol, the diffs. */
export interface RequestExplanation {
  requestId: string;
  escrowId: string;
  nonce: number;
  /** The gateway's records of the request (InferenceStarted / Finished / Failed data). */
  gateway: { type: string; position: number; data: Record<string, unknown> }[];
  /** The diffs that carried a tx for this inference (its MsgStartInference first), absent on the legacy path. */
  devshard?: InferenceTrail & { executor?: string; failures: string[]; hosts: HostAudit[] };
  /** The protocol settlement of the escrow, if finalized: the executor slot's billed cost in it. */
  settlement?: { nonce: number; slotId: number; slotCost: string; signatures: number };
  /** What the client was billed against what the host's Finish charged, and the events that carry the difference. */
  billing?: RequestBilling;
}

/**
 * A request's bill in the log against its charge in the protocol (src/gateway/session/billing.ts):
 * `billed` is what its end recorded (what the client was billed), `charged` what its host's
 * MsgFinishInference charged once a diff applied it (0 for a MsgTimeoutInference), `recovered` the
 * UsageRecovered events naming the inference (the charge beyond the bill). `unbilled` = charged −
 * billed − Σ recovered: 0 when the log bills what the settlement pays; below 0 when the log billed
 * more than the host charged (or no Finish reached a diff: the settlement pays nothing for it and
 * the refund returns it).
 */
export interface RequestBilling {
  billed: string;
  charged: string | null;
  chargedBy?: { kind: 'Finish' | 'Timeout'; nonce: number; position: number };
  recovered: { position: number; cost: string; slotId: number }[];
  unbilled: string | null;
  /** Once finalized: whether the diff that charged it is within the settlement (at or below its nonce). */
  inSettlement?: boolean;
}

/**
 * Finds `id` (an x-request-id, or a chat completion id `devshard-<escrow>-<nonce>`) in the log and
 * rebuilds what the escrow's replica did with that inference. Undefined when the log has no such request.
 */
export function explainRequest(store: LocalLog, id: string): RequestExplanation | undefined {
  let where: { escrowId: string; nonce: number } | undefined;
  const m = /^devshard-(.+)-(\d+)$/.exec(id);
  const gateway: RequestExplanation['gateway'] = [];
  for (const r of store.readAll(0)) {
    if (!r.streamId.startsWith('escrow-') || r.streamId.startsWith('escrow-create-')) continue;
    if (r.type !== 'InferencesRecorded' && r.type !== 'InferenceStarted' && r.type !== 'InferenceFinished' && r.type !== 'InferenceFailed') continue;
    for (const e of eachRequestEvent([r])) {
      const d = e.data as { requestId?: string; nonce?: number };
      const escrowId = r.streamId.slice('escrow-'.length);
      const match = d.requestId === id || (m !== null && escrowId === m[1] && d.nonce === Number(m[2]));
      if (!match || (where && (where.escrowId !== escrowId || where.nonce !== d.nonce))) continue;
      where = { escrowId, nonce: d.nonce! };
      gateway.push({ type: e.type, position: r.position, data: e.data as Record<string, unknown> });
    }
  }
  if (!where && m) where = { escrowId: m[1]!, nonce: Number(m[2]) };
  if (!where) return undefined;
  const { escrowId, nonce } = where;
  const streams = new Set([escrowStream(escrowId), devshardSessionStream(escrowId)]);
  const only = function* () {
    for (const r of store.readAll(0)) if (streams.has(r.streamId)) yield r;
  };
  const { audit, escrows } = auditDevshardLog(only(), { trails: true });
  let settlement: RequestExplanation['settlement'];
  let slots: string[] = [];
  const recovered: RequestBilling['recovered'] = [];
  for (const r of only()) {
    if (r.type === 'DevshardSessionOpened') slots = (r.data as { slots: { host: string }[] }).slots.map((s) => s.host);
    if (r.type === 'UsageRecovered') {
      const d = r.data as { inferenceId?: number; cost: string; slotId: number };
      if (d.inferenceId === nonce) recovered.push({ position: r.position, cost: d.cost, slotId: d.slotId });
    }
    if (r.type !== 'EscrowFinalized') continue;
    const s = (r.data as { settlement: SettlementData }).settlement;
    if (s.version !== 2 || slots.length === 0) continue;
    const slotId = nonce % slots.length;
    const stat = s.hostStats.find((h) => h.slotId === slotId);
    settlement = { nonce: s.nonce, slotId, slotCost: stat?.cost ?? '0', signatures: s.signatures.length };
  }
  const requestId = (gateway.find((g) => typeof g.data.requestId === 'string')?.data.requestId as string | undefined) ?? id;
  const trail = audit.trail(escrowId, nonce);
  const e = escrows.find((x) => x.escrowId === escrowId);
  const devshard = trail
    ? { ...trail, ...(slots.length ? { executor: slots[nonce % slots.length] } : {}), failures: (e?.failures ?? []).map(failureText), hosts: e?.hosts ?? [] }
    : undefined;
  const billing = trail ? requestBilling(gateway, trail, recovered, settlement) : undefined;
  return { requestId, escrowId, nonce, gateway, ...(devshard ? { devshard } : {}), ...(settlement ? { settlement } : {}), ...(billing ? { billing } : {}) };
}

/** The request's bill against its host's charge (RequestBilling). */
function requestBilling(gateway: RequestExplanation['gateway'], trail: InferenceTrail, recovered: RequestBilling['recovered'], settlement: RequestExplanation['settlement']): RequestBilling {
  let billed = 0n;
  for (const g of gateway) if (g.type === 'InferenceFinished' || g.type === 'InferenceFailed') billed += BigInt((g.data as { cost?: string }).cost ?? '0');
  const step = trail.steps.find((s) => s.tx.kind === 'Finish' || s.tx.kind === 'Timeout');
  let charged: bigint | null = null;
  if (step?.tx.kind === 'Timeout') charged = 0n;
  else if (step) {
    // The replica's record, or the cost the replay wrote on the Finish line once the record was sealed.
    const fromLine = /→ cost (\d+)/.exec(step.tx.detail)?.[1];
    charged = trail.record ? BigInt(trail.record.actualCost) : fromLine !== undefined ? BigInt(fromLine) : null;
  }
  const recoveredSum = recovered.reduce((n, r) => n + BigInt(r.cost), 0n);
  const unbilled = charged === null ? (step ? null : -billed - recoveredSum) : charged - billed - recoveredSum;
  return {
    billed: billed.toString(),
    charged: charged === null ? null : charged.toString(),
    ...(step ? { chargedBy: { kind: step.tx.kind as 'Finish' | 'Timeout', nonce: step.nonce, position: step.position } } : {}),
    recovered,
    unbilled: unbilled === null ? null : unbilled.toString(),
    ...(settlement ? { inSettlement: step !== undefined && step.nonce <= settlement.nonce } : {}),
  };
}

/** The billing line of a request's explanation. */
function billingLines(b: RequestBilling): string[] {
  const lines = [`  billing: the client was billed ${b.billed} (the request's end in the log)`];
  if (b.chargedBy) lines.push(`    the host's ${b.chargedBy.kind === 'Finish' ? 'MsgFinishInference' : 'MsgTimeoutInference'} charged ${b.charged ?? '?'} (diff nonce ${b.chargedBy.nonce}, position ${b.chargedBy.position})${b.inSettlement === false ? ', after the settlement\'s nonce: not paid by it' : ''}`);
  else lines.push(`    no diff carries its Finish or Timeout: the protocol charged nothing for it${b.inSettlement !== undefined ? ', the settlement pays nothing for it and the settle\'s refund returns what the log billed' : ' yet'}`);
  for (const r of b.recovered) lines.push(`    UsageRecovered at position ${r.position}: ${r.cost} to slot ${r.slotId} (the host's charge beyond the client's bill)`);
  if (b.unbilled === null) return lines;
  const u = BigInt(b.unbilled);
  if (u === 0n) lines.push(`    the log bills what the host charged${b.recovered.length ? ' (the client\'s bill + the UsageRecovered above)' : ''}`);
  else if (u < 0n) lines.push(`    the log billed ${-u} more than the protocol charged: the chain does not pay it, the settle's refund returns it (the escrow view's chain_settlement.spent_breakdown.unreconciled)`);
  else lines.push(`    ${u} charged by the host is in no event of the log (no UsageRecovered recorded it): the settlement pays it beyond the log's bill`);
  return lines;
}

/** The explanation as text. */
export function formatRequestExplanation(x: RequestExplanation): string {
  const lines = [`request ${x.requestId}: escrow ${x.escrowId}, nonce ${x.nonce}`];
  for (const g of x.gateway) {
    const d = g.data as { reservedCost?: string; cost?: string; usage?: { promptTokens: number; completionTokens: number }; reason?: string };
    if (g.type === 'InferenceStarted') lines.push(`  gateway  position ${g.position}: started, reserved ${d.reservedCost}`);
    else lines.push(`  gateway  position ${g.position}: ${g.type === 'InferenceFinished' ? 'finished' : `failed (${d.reason})`}, usage in ${d.usage?.promptTokens} out ${d.usage?.completionTokens}, billed ${d.cost}`);
  }
  const t = x.devshard;
  if (!t) {
    lines.push('  no devshard protocol diff carries this inference (the legacy host transport, or a log before DevshardDiffSent)');
    return `${lines.join('\n')}\n`;
  }
  for (const s of t.steps) lines.push(`  diff nonce ${String(s.nonce).padStart(5)} (position ${s.position}): ${formatTxs([s.tx])}${s.tx.kind === 'StartInference' || s.tx.kind === 'ConfirmStart' ? ` (${s.tx.detail})` : ''}`);
  if (!t.steps.some((s) => s.tx.kind === 'ConfirmStart')) lines.push('  no diff carries its ConfirmStart yet (the executor\'s receipt)');
  if (!t.steps.some((s) => s.tx.kind === 'Finish' || s.tx.kind === 'Timeout')) lines.push('  no diff carries its Finish or Timeout yet');
  const r = t.record;
  if (r) {
    lines.push(
      `  replica: ${r.status}, executor slot ${r.executorSlot}${t.executor ? ` (${t.executor})` : ''}, tokens in ${r.inputTokens} out ${r.outputTokens}, reserved ${r.reservedCost}, charged ${r.actualCost}${t.sealedAt !== undefined ? ` (sealed at nonce ${t.sealedAt})` : ''}`,
    );
  }
  // Composed by us is not applied by the hosts: what each host acknowledged, as recorded.
  if (t.hosts.length === 0) lines.push('  applied by the hosts: no acknowledgement recorded');
  for (const h of t.hosts) {
    const started = h.applied >= x.nonce ? `its start (nonce ${x.nonce}) applied` : `its start (nonce ${x.nonce}) not acknowledged`;
    lines.push(`  host ${h.host}: applied through nonce ${h.applied}, ${started}${h.refused ? `; then refused (${h.refused.status}${h.refused.rule ? ` ${h.refused.rule}` : ''}: ${h.refused.message.slice(0, 160)})` : ''}`);
  }
  if (x.billing) lines.push(...billingLines(x.billing));
  if (x.settlement) lines.push(`  settlement at nonce ${x.settlement.nonce}: slot ${x.settlement.slotId} is paid ${x.settlement.slotCost} in all (host_stats cost), this inference's ${r?.actualCost ?? '?'} included; ${x.settlement.signatures} signatures`);
  for (const f of t.failures) lines.push(`  FAILED: ${f}`);
  return `${lines.join('\n')}\n`;
}

/** Writes the explanation of one request (text, or JSON); false when the log has no such request. */
export function runExplainRequest(store: LocalLog, id: string, opts: { json?: boolean }, out: (s: string) => void = (s) => process.stdout.write(s)): boolean {
  const x = explainRequest(store, id);
  if (!x) return false;
  out(opts.json ? `${JSON.stringify(x, null, 2)}\n` : formatRequestExplanation(x));
  return true;
}

/** `shardgate explain rotation [--storage DIR] [--model M] [--epoch N] [--json]`. */
export function registerExplain(program: Command): void {
  const explain = program.command('explain').description('explain from the event log what the gateway did and why');
  explain
    .command('rotation')
    .description('what each escrow rotation did, in order; for a failed one the step, the chain\'s reason, what was suppressed and which settle still waits on in-flight requests')
    .option('--storage <dir>', 'storage directory (default: $DEVSHARD_STORAGE_DIR or .devshardctl)')
    .option('--model <model>', 'only this model')
    .option('--epoch <n>', 'only the rotation of this epoch (phase 1 or phase 2 epoch)')
    .option('--json', 'one JSON document instead of text')
    .action(async (opts: { storage?: string; model?: string; epoch?: string; json?: boolean }) => {
      const file = eventsFile(opts.storage ?? defaultStorageDir());
      if (!existsSync(file)) {
        process.stderr.write(`no event log at ${file}\n`);
        process.exitCode = 1;
        return;
      }
      let epoch: number | undefined;
      if (opts.epoch !== undefined) {
        epoch = Number(opts.epoch);
        if (!Number.isInteger(epoch) || epoch < 0) {
          process.stderr.write(`--epoch must be a non-negative integer, got ${opts.epoch}\n`);
          process.exitCode = 2;
          return;
        }
      }
      const store = openSqliteEventStore(file);
      try {
        runExplainRotation(store, { ...(opts.model !== undefined ? { model: opts.model } : {}), ...(epoch !== undefined ? { epoch } : {}), ...(opts.json ? { json: true } : {}) });
      } finally {
        await store.close();
      }
    });
  explain
    .command('request <id>')
    .description('what the log holds of one request (x-request-id, or the completion id devshard-<escrow>-<nonce>): the gateway\'s records and, over the devshard protocol, the diff that started it, the diffs that carried its ConfirmStart / Finish / Timeout (with their nonces) and the cost the replica charged')
    .option('--storage <dir>', 'storage directory (default: $DEVSHARD_STORAGE_DIR or .devshardctl)')
    .option('--json', 'one JSON document instead of text')
    .action(async (id: string, opts: { storage?: string; json?: boolean }) => {
      await withExistingLog(opts.storage, (store, file) => {
        if (!runExplainRequest(store, id, { ...(opts.json ? { json: true } : {}) })) {
          process.stderr.write(`no request ${id} in ${file}\n`);
          process.exitCode = 1;
        }
      });
    });
}
