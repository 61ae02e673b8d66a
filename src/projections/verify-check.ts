/**
 * `shardgate verify`'s projection check: the stored projections checkpoint must equal the
 * projections rebuilt from the log up to the checkpoint's position. A checkpoint that differs would
 * make a restarted gateway serve state the log does not support; verify names the projection
 * (pool / settings / rotation) that differs.
 */
import { canonicalJson } from '../events/canonical-json.js';
import { decodeRow, EVENT_COLUMNS, type EventRow } from '../events/rows.js';
import type { VerifyCheck } from '../events/verify.js';
import { PROJECTIONS_CHECKPOINT, PROJECTIONS_CHECKPOINT_VERSION, Projections, type ProjectionsState } from './projections.js';

/** The projections a checkpoint carries, in the order they are compared. */
export const CHECKPOINTED_PROJECTIONS = ['pool', 'settings', 'rotation'] as const;

/** What the projection check found (for the CLI's summary line). */
export interface ProjectionsCheckReport {
  /** 'absent': no checkpoint yet (a fresh log); 'stale-version': a checkpoint of another format, which a gateway ignores and rebuilds. */
  checkpoint: 'absent' | 'stale-version' | 'equal';
  position: number;
}

/** What a check answers: a failure at a position, or nothing when it passed. */
type Failure = { position: number; reason: string } | undefined;

/** A verdict on the checkpoint: its failure, or what passed (for the summary). */
interface Verdict {
  failure?: Failure;
  report?: ProjectionsCheckReport;
}

/**
 * The checkpoint row (position, state JSON, hash at that position) and the log's hash at its
 * position: a verdict already, or the stored state to compare with a rebuild up to `position`.
 * Shared by the SQLite check here and the PostgreSQL one (cli/commands/verify-postgres.ts).
 */
export function openCheckpoint(row: [number, string, string] | undefined, hashAt: (position: number) => string | undefined): Verdict | { position: number; stored: ProjectionsState } {
  if (!row) return { report: { checkpoint: 'absent', position: 0 } };
  const [position, stateText, hash] = row;
  const at = hashAt(position);
  if (at === undefined) return { failure: { position: 0, reason: `projections checkpoint is at position ${position}, beyond the log` } };
  if (at !== hash) return { failure: { position, reason: `projections checkpoint belongs to another log (hash at position ${position} differs)` } };
  let stored: ProjectionsState;
  try {
    stored = JSON.parse(stateText) as ProjectionsState;
  } catch {
    return { failure: { position, reason: 'projections checkpoint is not valid JSON' } };
  }
  // A gateway ignores a checkpoint of another format and rebuilds from position 0: not wrong, just old.
  if (stored?.version !== PROJECTIONS_CHECKPOINT_VERSION) return { report: { checkpoint: 'stale-version', position } };
  return { position, stored };
}

/** The stored checkpoint against the projections rebuilt from the log up to its position. */
export function compareCheckpoint(position: number, stored: ProjectionsState, rebuilt: ProjectionsState): Verdict {
  const differing = CHECKPOINTED_PROJECTIONS.filter((name) => !sameJson(stored[name], rebuilt[name]));
  if (differing.length === 0) return { report: { checkpoint: 'equal', position } };
  return {
    failure: {
      position,
      reason: `projections checkpoint differs from the rebuild at position ${position}: ${differing.map((d) => `${d} projection differs`).join(', ')}`,
    },
  };
}

/** Hands a verdict's report to `report` and answers its failure. */
export function settleVerdict(verdict: Verdict, report?: (r: ProjectionsCheckReport) => void): Failure {
  if (verdict.report) report?.(verdict.report);
  return verdict.failure;
}

/**
 * Builds the check; `report` receives what was compared when the check passes.
 */
export function projectionsCheck(report?: (r: ProjectionsCheckReport) => void): VerifyCheck {
  return ({ db }) => {
    const hasTable = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'checkpoints'`).get();
    const row = hasTable
      ? (db.prepare('SELECT position, state, hash FROM checkpoints WHERE name = ?').raw().get(PROJECTIONS_CHECKPOINT) as [number, string, string] | undefined)
      : undefined;
    const opened = openCheckpoint(row, (position) => db.prepare('SELECT hash FROM events WHERE position = ?').pluck().get(position) as string | undefined);
    if (!('stored' in opened)) return settleVerdict(opened, report);
    const rows = db.prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE position <= ? ORDER BY position`).raw().iterate(opened.position) as IterableIterator<EventRow>;
    const rebuilt = Projections.rebuild((function* () {
      for (const r of rows) yield decodeRow(r);
    })()).toCheckpoint().state;
    return settleVerdict(compareCheckpoint(opened.position, opened.stored, rebuilt), report);
  };
}

function sameJson(a: unknown, b: unknown): boolean {
  try {
    return canonicalJson(a) === canonicalJson(b);
  } catch {
    return JSON.stringify(a) === JSON.stringify(b);
  }
}
