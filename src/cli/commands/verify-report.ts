/**
 * What `shardgate verify` prints, for either store: the summary (events verified, the projections
 * checkpoint, the anchor, each devshard session) and exit 0, or `FAILED at position N: reason (where)`
 * with every devshard failure and exit 1. `where` is the SQLite file or the PostgreSQL URL without
 * its password.
 */
import type { AnchorVerdict } from '../../events/log-anchor.js';
import type { VerifyResult } from '../../events/verify.js';
import type { ProjectionsCheckReport } from '../../projections/verify-check.js';
import { failureText, isMissingFacts, type EscrowAudit } from '../../gateway/session/audit-report.js';

/** One line per escrow of the devshard check: diffs, the replica's state, the settlements checked. */
export function devshardSummary(escrows: readonly EscrowAudit[]): string[] {
  return escrows.map((e) => {
    const r = e.replica ? `replica nonce ${e.replica.nonce} ${e.replica.phase}, root ${e.replica.root.slice(0, 16)}…` : 'replica not rebuilt (session facts not in the log)';
    const s = e.settlements.map((x) => `settlement at nonce ${x.nonce} ${x.matches ? 'equals the replica' : 'DIFFERS'}, ${x.valid}/${x.signatures} signatures recover to their slots`).join('; ');
    const p = e.protocol ? ` (${e.protocol.version} on ${e.protocol.route}, tag ${JSON.stringify(e.protocol.tag)})` : '';
    return `devshard escrow ${e.escrowId}${p}: composed ${e.diffs} diffs, nonces 1..${e.lastNonce}, ${r}; ${hostsSummary(e)}${s ? `; ${s}` : ''}`;
  });
}

/** What the hosts applied, as the log recorded it: "applied by the hosts: h1 to nonce 5, h2 refused (410 …)". */
function hostsSummary(e: EscrowAudit): string {
  if (e.hosts.length === 0) return 'applied by the hosts: none recorded';
  const parts = e.hosts.map((h) => {
    const applied = h.applied > 0 ? `to nonce ${h.applied}` : 'nothing';
    const refused = h.refused ? `, then refused (${h.refused.status}${h.refused.rule ? ` ${h.refused.rule}` : ''}: ${h.refused.message.slice(0, 120)})` : '';
    return `${h.host} ${applied}${refused}`;
  });
  return `applied by the hosts: ${parts.join(', ')}`;
}

/** The anchor's line of the summary (docs/faults.md, "Tampered log at start"). */
function anchorSummary(a: Extract<AnchorVerdict, { state: 'holds' }>): string {
  const mac =
    a.keyed === 'checked'
      ? 'its MAC matches DEVSHARD_LOG_HMAC_KEY'
      : a.keyed === 'key-unset'
        ? 'keyed, but DEVSHARD_LOG_HMAC_KEY is unset here: its MAC was not checked'
        : 'recorded without a key (set DEVSHARD_LOG_HMAC_KEY to detect a rewrite of the whole log)';
  return `log anchor at position ${a.position} holds; ${mac}`;
}

export interface VerifyOutcome {
  /** The log as printed: a file, or a database URL without its password. */
  where: string;
  result: VerifyResult;
  projections: ProjectionsCheckReport | undefined;
  devshard: readonly EscrowAudit[];
  anchor: AnchorVerdict;
  /** DEVSHARD_LOG_HMAC_KEY, when set. */
  key: string | undefined;
  /** `--anchor`: records the verified tail as the start check's anchor (keyed with `key`). */
  recordAnchor: ((position: number, hash: string) => void | Promise<void>) | undefined;
}

/** Writes the summary or the failures; answers the exit code (0, or 1 when the log fails). */
export async function reportVerify(o: VerifyOutcome, out: (s: string) => void, err: (s: string) => void): Promise<number> {
  const { result, projections, anchor } = o;
  if (!result.ok) {
    const where = result.position > 0 ? ` at position ${result.position}` : '';
    out(`FAILED${where}: ${result.reason} (${o.where})\n`);
    for (const f of o.devshard.flatMap((e) => e.failures).filter((x) => !isMissingFacts(x))) out(`  at position ${f.position}: ${failureText(f)}\n`);
    return 1;
  }
  const head = result.lastHash ? `, last hash ${result.lastHash}` : '';
  const proj =
    projections?.checkpoint === 'equal'
      ? `; projections checkpoint at position ${projections.position} equals the rebuild (pool, settings, rotation)`
      : projections?.checkpoint === 'stale-version'
        ? `; projections checkpoint at position ${projections.position} has an older format (a gateway rebuilds it)`
        : '; no projections checkpoint stored yet';
  out(`ok: ${result.events} events verified in ${o.where}, last position ${result.lastPosition}${head}${proj}\n`);
  if (anchor.state === 'holds') out(`${anchorSummary(anchor)}\n`);
  if (o.recordAnchor) {
    await o.recordAnchor(result.lastPosition, result.lastHash);
    out(`log anchor recorded at position ${result.lastPosition}${o.key !== undefined ? ', keyed with DEVSHARD_LOG_HMAC_KEY' : ' without a key (DEVSHARD_LOG_HMAC_KEY is unset)'}\n`);
  }
  for (const line of devshardSummary(o.devshard)) out(`${line}\n`);
  for (const w of result.warnings) err(`warning: ${w}\n`);
  for (const f of o.devshard.flatMap((e) => e.failures).filter(isMissingFacts)) err(`warning: ${failureText(f)}\n`);
  return 0;
}
