import type { Command } from 'commander';
import { eventsFile, defaultStorageDir } from '../../events/storage-path.js';
import { verifyLog } from '../../events/verify.js';
import { projectionsCheck, type ProjectionsCheckReport } from '../../projections/verify-check.js';

/**
 * `shardgate verify`: proves the log was not altered (positions, versions, hash chain) and that the
 * stored projections checkpoint equals the projections rebuilt from the log; exit 0 with a summary,
 * or 1 naming the first bad position or the projection that differs.
 */
export function registerVerify(program: Command): void {
  program
    .command('verify')
    .description('check positions, stream versions and the hash chain of the event log, and the stored projections checkpoint against a rebuild')
    .option('--storage <dir>', 'storage directory (default: $DEVSHARD_STORAGE_DIR or .devshardctl)')
    .action(async (opts: { storage?: string }) => {
      const file = eventsFile(opts.storage ?? defaultStorageDir());
      let projections: ProjectionsCheckReport | undefined;
      const result = await verifyLog(file, [projectionsCheck((r) => (projections = r))]);
      if (result.ok) {
        const head = result.lastHash ? `, last hash ${result.lastHash}` : '';
        const proj =
          projections?.checkpoint === 'equal'
            ? `; projections checkpoint at position ${projections.position} equals the rebuild (pool, settings, rotation)`
            : projections?.checkpoint === 'stale-version'
              ? `; projections checkpoint at position ${projections.position} has an older format (a gateway rebuilds it)`
              : '; no projections checkpoint stored yet';
        process.stdout.write(`ok: ${result.events} events verified in ${file}, last position ${result.lastPosition}${head}${proj}\n`);
        for (const w of result.warnings) process.stderr.write(`warning: ${w}\n`);
      } else {
        const where = result.position > 0 ? ` at position ${result.position}` : '';
        process.stdout.write(`FAILED${where}: ${result.reason} (${file})\n`);
        process.exitCode = 1;
      }
    });
}
