import type { Command } from 'commander';
import { eventsFile, defaultStorageDir } from '../../events/storage-path.js';
import { verifyLog } from '../../events/verify.js';

/** `shardgate verify`: proves the log was not altered; exit 0 with a summary, or 1 naming the first bad position. */
export function registerVerify(program: Command): void {
  program
    .command('verify')
    .description('check positions, stream versions and the hash chain of the event log')
    .option('--storage <dir>', 'storage directory (default: $DEVSHARD_STORAGE_DIR or .devshardctl)')
    .action(async (opts: { storage?: string }) => {
      const file = eventsFile(opts.storage ?? defaultStorageDir());
      const result = await verifyLog(file);
      if (result.ok) {
        const head = result.lastHash ? `, last hash ${result.lastHash}` : '';
        process.stdout.write(`ok: ${result.events} events verified in ${file}, last position ${result.lastPosition}${head}\n`);
        for (const w of result.warnings) process.stderr.write(`warning: ${w}\n`);
      } else {
        const where = result.position > 0 ? ` at position ${result.position}` : '';
        process.stdout.write(`FAILED${where}: ${result.reason} (${file})\n`);
        process.exitCode = 1;
      }
    });
}
