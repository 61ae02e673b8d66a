import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { defaultStorageDir, eventsFile } from '../../events/storage-path.js';
import { openSqliteEventStore } from '../../events/sqlite-store.js';
import type { EventStore } from '../../events/store.js';
import { explainRotation, formatExplain } from '../../gateway/rotation/explain.js';

export interface ExplainRotationOptions {
  model?: string;
  epoch?: number;
  json?: boolean;
}

/** Writes the rotation explanation of a store (text, or JSON with `json`). */
export function runExplainRotation(store: Pick<EventStore, 'readAll'>, opts: ExplainRotationOptions, out: (s: string) => void = (s) => process.stdout.write(s)): void {
  const x = explainRotation(store.readAll(0), { ...(opts.model !== undefined ? { model: opts.model } : {}), ...(opts.epoch !== undefined ? { epoch: opts.epoch } : {}) });
  out(opts.json ? `${JSON.stringify(x, null, 2)}\n` : formatExplain(x));
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
}
