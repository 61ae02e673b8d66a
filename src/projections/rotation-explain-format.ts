/** `explain rotation` as text (rotation-explain.ts explains; this writes it for a person). */
import { reasonOf, stepName, WINDOW_CLOSED, type ExplainFailure, type ExplainReplacement, type ReplacedSettle, type RotationExplanation } from './rotation-explain-types.js';

/**
 * What the chain said to a failed settle, and what became of it: a retry given up by the gateway
 * was never sent, and an unreachable chain said nothing.
 */
function failureText(f: ExplainFailure, recovered: boolean): string {
  // The gateway's own configuration, never the chain's answer (issue 38).
  if (f.configuration) return `${f.error.message}${recovered ? '; fixed: the create was sent on a later tick' : ''}`;
  const givenUp = f.windowClosed && f.error.code === undefined;
  const said = givenUp
    ? f.error.message
    : f.error.kind === 'unreachable' || f.error.kind === 'timeout'
      ? `no answer from the chain (${f.error.kind}: ${f.error.message})`
      : `the chain said ${f.error.kind}: ${f.error.message}`;
  const outcome = recovered
    ? '; transient, settled on a later attempt'
    : f.retryAtHeight !== undefined
      ? `; transient, retried from height ${f.retryAtHeight}`
      : f.windowClosed && !givenUp
        ? '; settle window closed, not retried'
        : '';
  return `${said}${f.error.rawLog ? ` [raw log: ${f.error.rawLog}]` : ''}${outcome}`;
}

/** Where the settle of a replacement's old escrow stands, after one of its attempts failed. */
function replacedSettleText(r: ExplainReplacement, s: ReplacedSettle): string {
  const failed = s.failures.filter((f) => f.attempt !== undefined).length;
  const last = s.failures.at(-1);
  const id = r.escrowId;
  switch (s.state) {
    case 'settled':
      return `escrow ${id} settled on chain at height ${s.settledAt ?? '?'} after ${failed} failed settle attempt(s)`;
    case 'settling':
      return `settle of escrow ${id}: tx sent, outcome not yet recorded`;
    case 'retrying':
      return `settle of escrow ${id} not finished: last attempt failed (${last ? reasonOf(last.error) : 'transient'}); attempt ${s.retry?.attempt ?? '?'} from height ${s.retry?.atHeight ?? '?'} while the settle window is open`;
    case 'failed':
      if (last?.windowClosed && last.error.code === undefined) return `GAVE UP settle of escrow ${id}: ${last.error.message}; the unused deposit can no longer be settled on chain`;
      return `settle of escrow ${id} FAILED: ${last ? reasonOf(last.error) : '?'}; ${last?.windowClosed ? WINDOW_CLOSED : 'not retried'}`;
  }
}

/** Human-readable lines of an explanation. */
export function formatExplain(x: RotationExplanation): string {
  const out: string[] = [];
  if (x.cycles.length === 0 && x.replacements.length === 0) return 'No rotation is recorded in this log (for the given model / epoch).\n';
  for (const c of x.cycles) {
    // A transient settle failure followed by the escrow's settlement is recovered, not a failure of the cycle.
    const recovered = (f: ExplainFailure) =>
      (f.retryAtHeight !== undefined && c.settles.some((s) => s.escrowId === f.escrowId && s.state === 'settled')) ||
      // A configuration error is over once the create it held up was sent and created the escrow.
      (f.configuration !== undefined && c.created.some((x) => x.intentId === f.intentId && x.escrowId !== null));
    const failed = c.failures.some((f) => !recovered(f));
    const verdict = c.status === 'completed' ? (failed ? 'completed with FAILURES' : 'completed') : `in progress (${c.stage.replace('_', ' ')})${failed ? ' with FAILURES' : ''}`;
    out.push(`Rotation of ${c.model}, cycle of epoch ${c.epoch} (boundary at height ${c.boundaryHeight}): ${verdict}`);
    for (const s of c.steps) out.push(`  #${s.position} ${s.time}  ${s.text}`);
    if (c.failures.length > 0) {
      out.push(failed ? '  Failures:' : '  Failures (all recovered):');
      for (const f of c.failures) {
        out.push(`    step ${stepName(f)}${f.role ? ` (${f.role})` : ''}: ${failureText(f, recovered(f))}`);
      }
    }
    if (c.suppressed.length > 0) {
      out.push('  Suppressed:');
      const seen = new Set<string>();
      for (const s of c.suppressed) {
        const key = `${s.role}@${s.epoch}`;
        if (seen.has(key)) continue;
        seen.add(key);
        out.push(`    ${s.role} creates for ${c.model} in epoch ${s.epoch} (after: ${s.reason})`);
      }
    }
    const waiting = c.settles.filter((s) => s.state === 'deferred' || s.state === 'decided' || s.state === 'settling' || s.state === 'retrying');
    if (waiting.length > 0) {
      out.push('  Settles not finished:');
      for (const s of waiting) {
        const why =
          s.state === 'deferred'
            ? `waiting on ${s.inFlight} in-flight request(s); broadcast once they drain`
            : s.state === 'settling'
              ? 'settle tx sent, outcome not yet recorded'
              : s.state === 'retrying'
                ? `last attempt failed (${s.reason ?? 'transient'}); attempt ${s.retry?.attempt ?? '?'} from height ${s.retry?.atHeight ?? '?'} while the settle window is open`
                : 'decided, not yet finalized';
        out.push(`    escrow ${s.escrowId} (${s.role}): ${why}`);
      }
    }
    out.push('');
  }
  if (x.replacements.length > 0) {
    out.push('Depletion replacements:');
    for (const r of x.replacements) {
      const result = r.failure
        ? `FAILED: ${r.failure.kind}: ${r.failure.message}${r.suppressed ? ` (regular creates suppressed in epoch ${r.epoch})` : ''}`
        : r.replacementId
          ? `replaced by escrow ${r.replacementId}`
          : 'replacement under way';
      const settle = r.settle ? `; ${replacedSettleText(r, r.settle)}` : '';
      out.push(`  #${r.position} ${r.time}  ${r.model}: escrow ${r.escrowId} (${r.reason}) at height ${r.height}, epoch ${r.epoch}: ${result}${settle}`);
      for (const f of r.settle?.failures ?? []) out.push(`    #${f.position} ${stepName(f)}: ${failureText(f, r.settle!.state === 'settled' && f.retryAtHeight !== undefined)}`);
    }
    out.push('');
  }
  return out.join('\n');
}
