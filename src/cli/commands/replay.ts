import { SingleBar } from 'cli-progress';
import { withExistingLog } from './existing-log.js';
import type { Command } from 'commander';
import type { EventStore } from '../../events/store.js';
import type { LocalLog } from '../../projections/from-store.js';
import type { RecordedEvent } from '../../events/envelope.js';
import { machinesAt, parseUntil, replay, type MachinesAt, type ReplayRow } from '../../projections/replay.js';
import { DevshardLogAudit } from '../../gateway/session/audit.js';
import { failureText, formatTxs, isMissingFacts, type DiffLine, type EscrowAudit } from '../../gateway/session/audit-report.js';

/** Logs at least this long get a progress bar (when stderr is a TTY). */
const PROGRESS_THRESHOLD = 50_000;

export interface ReplayCliOptions {
  escrow?: string;
  until?: string;
  json?: boolean;
}

const formatRow = (r: ReplayRow, devshard?: string): string =>
  `${String(r.position).padStart(8)}  ${r.time}  ${r.event.padEnd(28)} ${r.actor.padEnd(16)} ${r.stream.padEnd(28)} -> ${devshard ?? r.state}${r.accepted ? '' : '  (refused by statechart)'}${r.requests ? `  (${formatRequests(r.requests)})` : ''}`;

/** A devshard session event as a reader reads it (the diff's nonce, its txs by kind, the root it leads to). */
export function formatDiffLine(d: DiffLine): string {
  return `nonce ${d.nonce}: ${formatTxs(d.txs)}; root ${d.root.slice(0, 12)}…${d.phase && d.phase !== 'Active' ? ` ${d.phase}` : ''}${d.failure ? `  (${d.failure.rule}: ${d.failure.message})` : ''}`;
}

function formatOpened(r: RecordedEvent): string {
  const d = r.data as { creator: string; amount: string; slots: unknown[]; session: { tokenPrice?: string } };
  return `session bound: creator ${d.creator}, amount ${d.amount}, ${d.slots.length} slots, token price ${d.session.tokenPrice ?? '(default)'}`;
}

function formatDevshard(escrows: readonly EscrowAudit[]): string {
  const lines = [`  devshard sessions (${escrows.length}):`];
  for (const e of escrows) {
    const r = e.replica;
    lines.push(
      r
        ? `    ${e.escrowId}  ${r.phase}  nonce=${r.nonce} balance=${r.balance} fees=${r.fees}${r.finalizeNonce ? ` finalize_nonce=${r.finalizeNonce}` : ''} root=${r.root.slice(0, 16)}…`
        : `    ${e.escrowId}  ${e.diffs} diffs (replica not rebuilt: session facts not in the log)`,
    );
    for (const f of e.failures) lines.push(`      ${isMissingFacts(f) ? 'note' : 'FAILED'}: ${failureText(f)}`);
  }
  return lines.join('\n');
}

/** "3 started, 2 finished, 1 failed" (kinds with none left out). */
const formatRequests = (n: NonNullable<ReplayRow['requests']>): string =>
  (['started', 'finished', 'failed'] as const)
    .filter((k) => n[k] > 0)
    .map((k) => `${n[k]} ${k}`)
    .join(', ');

function formatMachines(m: MachinesAt): string {
  const lines = [`State at position ${m.position}:`];
  const escrows = Object.entries(m.escrows);
  lines.push(`  escrows (${escrows.length}):`);
  for (const [id, e] of escrows) lines.push(`    ${id}  ${e.state}  model=${e.model ?? '-'} nonce=${e.nonce} in_flight=${e.inFlight} balance=${e.balance} reserved=${e.reserved}`);
  lines.push(`  access modes: ${Object.entries(m.accessModes).map(([k, v]) => `${k}=${v}`).join(' ') || '(all admin_only)'}`);
  lines.push(`  kill switch: ${m.disabled.state}${m.disabled.state === 'on' ? ` (${m.disabled.message} -> ${m.disabled.newUrl})` : ''}`);
  const rot = Object.entries(m.rotation);
  lines.push(`  rotation: ${rot.length ? '' : '(none)'}`);
  for (const [model, r] of rot) lines.push(`    ${model}  ${r.stage}  epoch=${r.epoch ?? '-'}${r.suppressed.length ? ` suppressed=${r.suppressed.join(',')}` : ''}`);
  return lines.join('\n');
}

/**
 * Replays a store to stdout (text table, or one JSON document with `--json`); a progress bar on
 * stderr for large logs on a TTY.
 */
export function runReplay(store: LocalLog & Pick<EventStore, 'lastPosition'>, opts: ReplayCliOptions, out: (s: string) => void = (s) => process.stdout.write(s)): void {
  const until = opts.until === undefined ? undefined : parseUntil(opts.until);
  const total = store.lastPosition();
  const bar = process.stderr.isTTY && total >= PROGRESS_THRESHOLD ? new SingleBar({ stream: process.stderr, etaBuffer: 50 }) : undefined;
  bar?.start(typeof until === 'number' ? Math.min(until, total) : total, 0);
  const rows: (ReplayRow & { devshard?: DiffLine })[] = [];
  // The devshard session events are read by the replica's audit (src/gateway/session/audit.ts) as
  // they go by: the projections do not read that stream.
  const audit = new DevshardLogAudit();
  const devshardLines = new Map<number, DiffLine | string>();
  const records = function* (): Generator<RecordedEvent> {
    for (const r of store.readAll(0)) {
      if (until !== undefined && (typeof until === 'number' ? r.position > until : new Date(r.time).getTime() > until.getTime())) {
        yield r; // the replay stops here; the audit must not count it
        return;
      }
      const line = audit.apply(r);
      if (line) devshardLines.set(r.position, line);
      else if (r.type === 'DevshardSessionOpened') devshardLines.set(r.position, formatOpened(r));
      yield r;
    }
  };
  const it = replay(records(), { escrow: opts.escrow, until, onProgress: (pos) => bar?.update(pos) });
  let next = it.next();
  while (!next.done) {
    const d = devshardLines.get(next.value.position);
    devshardLines.clear();
    if (opts.json) rows.push(d && typeof d !== 'string' ? { ...next.value, devshard: d } : next.value);
    else out(`${formatRow(next.value, d === undefined ? undefined : typeof d === 'string' ? d : formatDiffLine(d))}\n`);
    next = it.next();
  }
  const devshard = audit.result().filter((e) => opts.escrow === undefined || e.escrowId === opts.escrow);
  const projections = next.value;
  bar?.update(projections.position);
  bar?.stop();
  const machines = machinesAt(projections);
  if (opts.escrow) {
    machines.escrows = Object.fromEntries(Object.entries(machines.escrows).filter(([id]) => id === opts.escrow));
  }
  if (opts.json) out(`${JSON.stringify({ position: projections.position, escrow: opts.escrow ?? null, timeline: rows, machines, devshard }, null, 2)}\n`);
  else out(`\n${formatMachines(machines)}${devshard.length > 0 ? `\n${formatDevshard(devshard)}` : ''}\n`);
}

/** `shardgate replay [--storage DIR] [--escrow ID] [--until POSITION|ISO-TIME] [--json]`. */
export function registerReplay(program: Command): void {
  program
    .command('replay')
    .description('replay the event log: timeline (position, time, event, actor, resulting state) and each machine\'s state at that point')
    .option('--storage <dir>', 'storage directory (default: $DEVSHARD_STORAGE_DIR or .devshardctl)')
    .option('--escrow <id>', 'only this escrow (its stream and its creation intent)')
    .option('--until <position|iso-time>', 'stop at this global position or time')
    .option('--json', 'one JSON document instead of text')
    .action(async (opts: ReplayCliOptions & { storage?: string }) => {
      // Replay only reads: never create an empty log where none exists.
      await withExistingLog(opts.storage, (store) => runReplay(store, opts));
    });
}
