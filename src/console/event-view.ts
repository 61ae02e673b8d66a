/**
 * One log record as the console shows it in a timeline: its position, time, stream, type, actor,
 * causation and correlation, what kind of step it is (lifecycle, diff, host, finalize, settlement,
 * chain, requests), a one-line summary and the details behind it (a diff's nonce, root and txs;
 * a settlement's host stats and signatures; a chain tx's hash and height).
 */
import { fromBinary } from '@bufbuild/protobuf';
import { parseStreamId } from '../events/catalog.js';
import type { RecordedEvent } from '../events/envelope.js';
import { countEntries } from '../events/request-data.js';
import { actorLabel } from '../projections/actor.js';
import { DevshardTxSchema, DiffContentSchema } from '../protocol/gen/devshard/v1/diff_pb.js';
import { describeTx, type TxLine } from './gateway-reads.js';

export type EventKind = 'lifecycle' | 'diff' | 'host' | 'finalize' | 'settlement' | 'chain' | 'requests' | 'nonces' | 'failure' | 'other';

export interface EventView {
  position: number;
  time: string;
  stream: string;
  event: string;
  actor: string;
  causation: string | null;
  correlation: string | null;
  request: string | null;
  kind: EventKind;
  /** What a person reads in the row. */
  summary: string;
  /** The state a lifecycle event leads the escrow to (EscrowSettled → settled), when the event alone says it. */
  state?: string;
  details?: Record<string, unknown>;
}

/**
 * The escrow statechart's state (src/machines/escrow.ts) each lifecycle event leads to when
 * accepted, where the event alone decides it (EscrowSettleFailed does not: finalized, or
 * settleDeferred when retried).
 */
const LIFECYCLE_STATE: Record<string, string> = {
  EscrowCreateRequested: 'creating',
  EscrowCreated: 'created',
  EscrowCreateFailed: 'createFailed',
  EscrowRegistered: 'active',
  EscrowImported: 'imported',
  EscrowActivated: 'active',
  EscrowDeactivated: 'deactivated',
  EscrowDepleted: 'depleted',
  EscrowRoutingStopped: 'routingStopped',
  EscrowFinalized: 'finalized',
  EscrowSettleDeferred: 'settleDeferred',
  EscrowSettleRequested: 'settling',
  EscrowSettled: 'settled',
  EscrowRemoved: 'removed',
};

const short = (s: string | undefined, n = 16) => (s === undefined ? '?' : s.length > n ? `${s.slice(0, n)}…` : s);
const hex = (b64: string) => Buffer.from(b64, 'base64').toString('hex');
const txText = (t: TxLine) => `${t.kind}${t.inferenceId !== undefined ? `#${t.inferenceId}` : ''}${t.detail ? ` (${t.detail})` : ''}`;

/** The txs of a recorded diff (DevshardDiffSent.txs: DiffContent{nonce, txs}, base64). */
export function diffTxs(txs: string): TxLine[] {
  try {
    return fromBinary(DiffContentSchema, new Uint8Array(Buffer.from(txs, 'base64'))).txs.map(describeTx);
  } catch {
    return [];
  }
}

function hostTxs(txs: string[]): TxLine[] {
  return txs.map((t) => {
    try {
      return describeTx(fromBinary(DevshardTxSchema, new Uint8Array(Buffer.from(t, 'base64'))));
    } catch {
      return { kind: 'Empty', detail: 'undecodable' } as TxLine;
    }
  });
}

/** A record as a timeline row. */
export function eventView(r: RecordedEvent): EventView {
  // Each case below reads the members of its own event type (src/events/catalog/*.ts).
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const d = (r.data ?? {}) as Record<string, any>;
  const m = r.metadata;
  const base = {
    position: r.position,
    time: r.time,
    stream: r.streamId,
    event: r.type,
    actor: actorLabel(m?.actor),
    causation: m?.causationId ?? null,
    correlation: m?.correlationId ?? null,
    request: (m as { requestId?: string } | undefined)?.requestId ?? null,
  };
  const view = (kind: EventKind, summary: string, details?: Record<string, unknown>): EventView => ({
    ...base,
    kind,
    summary,
    ...(LIFECYCLE_STATE[r.type] ? { state: LIFECYCLE_STATE[r.type] } : {}),
    ...(details ? { details } : {}),
  });
  switch (r.type) {
    case 'EscrowCreateRequested':
      return view('chain', `create tx sent for ${d.model}: amount ${d.amount}, epoch ${d.epoch}, ${d.role} (${d.origin})`, { tx_hash: d.txHash, creator: d.creator, intent_id: d.intentId });
    case 'EscrowCreated':
      return view('lifecycle', `created on chain at height ${d.height}: amount ${d.amount}, ${d.slots?.length ?? 0} hosts, epoch ${d.epoch}${d.protocol ? `, protocol ${d.protocol.version}` : ''}`, { tx_hash: d.txHash, height: d.height, slots: d.slots, creator: d.creator });
    case 'EscrowCreateFailed':
      return view('failure', `create failed: ${d.error?.kind}: ${d.error?.message}`, { error: d.error });
    case 'EscrowFinalized': {
      const s = d.settlement ?? {};
      return view('finalize', `finalized at nonce ${s.nonce}: ${s.hostStats?.length ?? 0} host stats, ${s.signatures?.length ?? 0} signatures, fees ${s.fees}`, {
        nonce: s.nonce,
        state_root: s.stateRoot,
        version: s.stateRootVersion ?? `v${s.version}`,
        fees: s.fees,
        host_stats: s.hostStats,
        signatures: (s.signatures ?? []).map((x: { slotId: number; signature: string }) => ({ slot_id: x.slotId, signature: short(x.signature, 24) })),
      });
    }
    case 'EscrowSettleRequested':
      return view('chain', `settle tx sent (${d.origin}${d.attempt ? `, attempt ${d.attempt}` : ''})`, { tx_hash: d.txHash, height: d.height ?? null });
    case 'EscrowSettled':
      return view('settlement', `settled at height ${d.height}: paid ${d.totalPayout ?? '?'} (fees ${d.fees ?? '?'}), refund ${d.refund}`, { tx_hash: d.txHash, height: d.height, refund: d.refund, total_payout: d.totalPayout ?? null, fees: d.fees ?? null });
    case 'EscrowSettleFailed':
      return view('failure', `settle failed: ${d.reason}${d.error ? ` (${d.error.kind}: ${d.error.message})` : ''}${d.retryAtHeight ? `; retried from height ${d.retryAtHeight}` : ''}`, { error: d.error ?? null, tx_hash: d.txHash ?? null });
    case 'EscrowSettleDeferred':
      return view('lifecycle', `settle deferred: ${d.inFlight} request(s) in flight (${d.origin})`);
    case 'InferencesRecorded': {
      const c = countEntries(d.entries);
      const ids = (d.entries as { data: { requestId?: string; nonce?: number } }[] | undefined)?.map((e) => e.data.nonce).filter((n) => n !== undefined) ?? [];
      return view('requests', `${c.started} started, ${c.finished} finished, ${c.failed} failed${ids.length ? ` (nonce ${Math.min(...ids)}${ids.length > 1 ? `–${Math.max(...ids)}` : ''})` : ''}`, { entries: d.entries });
    }
    case 'InferenceStarted':
    case 'InferenceFinished':
    case 'InferenceFailed':
      return view('requests', `${r.type.replace('Inference', '').toLowerCase()} nonce ${d.nonce}${d.cost ? `, cost ${d.cost}` : ''}`, d);
    case 'NoncesReserved':
      return view('nonces', `nonces reserved up to ${d.upTo}`);
    case 'NoncesSkipped':
    case 'NoncesReleased':
      return view('nonces', `${r.type === 'NoncesSkipped' ? `nonces ${d.from}–${d.upTo} skipped (${d.reason})` : `nonces released after ${d.upTo}`}`);
    case 'DevshardSessionOpened':
      return view('host', `session opened: ${d.slots?.length ?? 0} hosts${d.protocol ? `, ${d.protocol.version} on ${d.protocol.route}` : ''}`, { slots: d.slots, session: d.session });
    case 'DevshardDiffSent': {
      const txs = diffTxs(d.txs);
      const root = hex(d.postStateRoot ?? '');
      return view('diff', `diff nonce ${d.nonce}: ${txs.length ? txs.map((t) => `${t.kind}${t.inferenceId !== undefined ? `#${t.inferenceId}` : ''}`).join(', ') : '(empty)'}; root ${short(root, 12)}`, { nonce: Number(d.nonce), root, txs: txs.map(txText) });
    }
    case 'DevshardHostTxsReceived': {
      const txs = hostTxs(d.txs ?? []);
      return view('host', `host txs from ${d.host}: ${txs.map((t) => `${t.kind}${t.inferenceId !== undefined ? `#${t.inferenceId}` : ''}`).join(', ')}`, { host: d.host, txs: txs.map(txText) });
    }
    case 'DevshardHostAcknowledged':
      return view('host', `${d.host} applied through nonce ${d.nonce}`, { host: d.host, nonce: d.nonce, state_hash: d.stateHash });
    case 'DevshardHostRefused':
      return view('failure', `${d.host} refused: ${d.status}${d.rule ? ` ${d.rule}` : ''}: ${String(d.message).slice(0, 160)}`, d);
    case 'UsageRecovered':
      return view('requests', `usage recovered: ${d.cost} to slot ${d.slotId} (${d.reason})`, d);
    case 'EscrowDepleted':
      return view('lifecycle', `depleted: balance ${d.balance} under ${d.threshold}`);
    case 'EscrowRoutingStopped':
      return view('lifecycle', `routing stopped at nonce ${d.nonce} (stop ${d.routingStop})`);
    default: {
      const stream = parseStreamId(r.streamId);
      return view(LIFECYCLE_STATE[r.type] || r.type.startsWith('Escrow') ? 'lifecycle' : 'other', `${r.type}${stream.kind === 'rotation' ? ` (${stream.model})` : ''}`, d);
    }
  }
}
