import type { Command } from 'commander';
import { eventsFile, defaultStorageDir } from '../../events/storage-path.js';
import { recordAnchor, verifyAnchor, type AnchorVerdict } from '../../events/log-anchor.js';
import { lockStorage } from '../../gateway/write/storage-lock.js';
import { verifyLog } from '../../events/verify.js';
import { projectionsCheck, type ProjectionsCheckReport } from '../../projections/verify-check.js';
import { devshardCheck } from '../../gateway/session/audit.js';
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

/**
 * Verifies the log at `file`, writing the summary or the failures; answers the exit code. `key` is
 * DEVSHARD_LOG_HMAC_KEY (the anchor's MAC is checked when it is given).
 */
export async function runVerify(
  file: string,
  out: (s: string) => void = (s) => process.stdout.write(s),
  err: (s: string) => void = (s) => process.stderr.write(s),
  key: string | undefined = process.env.DEVSHARD_LOG_HMAC_KEY || undefined,
  opts: { anchor?: boolean } = {},
): Promise<number> {
  let projections: ProjectionsCheckReport | undefined;
  let devshard: EscrowAudit[] = [];
  // --anchor: the whole log is about to be re-hashed, so the old anchor (unkeyed, or none) is not needed to trust it.
  const anchor: AnchorVerdict = opts.anchor ? { state: 'none' } : verifyAnchor(file, key);
  const result = await verifyLog(file, [
    projectionsCheck((r) => (projections = r)),
    devshardCheck((r) => (devshard = r)),
    () => (anchor.state === 'failed' ? { position: anchor.position, reason: anchor.reason } : undefined),
  ]);
  if (result.ok) {
    const head = result.lastHash ? `, last hash ${result.lastHash}` : '';
    const proj =
      projections?.checkpoint === 'equal'
        ? `; projections checkpoint at position ${projections.position} equals the rebuild (pool, settings, rotation)`
        : projections?.checkpoint === 'stale-version'
          ? `; projections checkpoint at position ${projections.position} has an older format (a gateway rebuilds it)`
          : '; no projections checkpoint stored yet';
    out(`ok: ${result.events} events verified in ${file}, last position ${result.lastPosition}${head}${proj}\n`);
    if (anchor.state === 'holds') out(`${anchorSummary(anchor)}\n`);
    if (opts.anchor) {
      recordAnchor(file, result.lastPosition, result.lastHash, key);
      out(`log anchor recorded at position ${result.lastPosition}${key !== undefined ? ', keyed with DEVSHARD_LOG_HMAC_KEY' : ' without a key (DEVSHARD_LOG_HMAC_KEY is unset)'}\n`);
    }
    for (const line of devshardSummary(devshard)) out(`${line}\n`);
    for (const w of result.warnings) err(`warning: ${w}\n`);
    for (const f of devshard.flatMap((e) => e.failures).filter(isMissingFacts)) err(`warning: ${failureText(f)}\n`);
  } else {
    const where = result.position > 0 ? ` at position ${result.position}` : '';
    out(`FAILED${where}: ${result.reason} (${file})\n`);
    for (const f of devshard.flatMap((e) => e.failures).filter((x) => !isMissingFacts(x))) out(`  at position ${f.position}: ${failureText(f)}\n`);
    return 1;
  }
  return 0;
}

/**
 * `shardgate verify`: proves the log was not altered (positions, versions, hash chain) and that the
 * stored projections checkpoint equals the projections rebuilt from the log, and that every devshard
 * protocol session rebuilds from its recorded diffs (src/gateway/session/audit.ts: contiguous
 * nonces, user signatures by the creator, the roots the hosts signed, the settlement and its
 * signatures); exit 0 with a summary, or 1 naming the first bad position (for a devshard session:
 * the escrow, nonce and rule, every failure listed).
 */
export function registerVerify(program: Command): void {
  program
    .command('verify')
    .description('check positions, stream versions and the hash chain of the event log, the stored projections checkpoint against a rebuild, and every devshard protocol session against its replica rebuilt from the log')
    .option('--storage <dir>', 'storage directory (default: $DEVSHARD_STORAGE_DIR or .devshardctl)')
    .option('--anchor', 'after the whole log verified, record its tail as the start check\'s anchor, keyed with DEVSHARD_LOG_HMAC_KEY (once, when the key is set for an existing log; the gateway must be stopped)')
    .action(async (opts: { storage?: string; anchor?: boolean }) => {
      const dir = opts.storage ?? defaultStorageDir();
      if (!opts.anchor) {
        process.exitCode = await runVerify(eventsFile(dir));
        return;
      }
      // Writing the anchor needs the storage to itself: a running gateway holds the lock.
      const unlock = lockStorage(dir);
      try {
        process.exitCode = await runVerify(eventsFile(dir), undefined, undefined, undefined, { anchor: true });
      } finally {
        unlock();
      }
    });
}
