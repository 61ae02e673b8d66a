import { constants } from 'node:fs';
import { chmod, open } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { renderInitFile } from '../../config/init-file.js';

export interface InitOptions {
  file: string;
  force?: boolean;
}

/**
 * Writes the config file with mode 600. The keys go only into the file: stdout says where they are,
 * never what they are (terminal scrollback and CI logs are not private).
 */
export async function runInit(options: InitOptions, out: (line: string) => void = (l) => process.stdout.write(`${l}\n`)): Promise<string> {
  const path = resolve(options.file);
  const flags = options.force ? constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC : constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL;
  let handle;
  try {
    // Created with 0600 from the first byte (no window where the keys are world-readable).
    handle = await open(path, flags, 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new Error(`${path} already exists; pass --force to overwrite it (its keys will be replaced).`, { cause: err });
    }
    throw err;
  }
  try {
    await handle.writeFile(renderInitFile(), 'utf8');
  } finally {
    await handle.close();
  }
  await chmod(path, 0o600); // --force on an existing file keeps its old mode otherwise
  out(`Wrote ${path} (mode 600) with a new creator key, client API key and admin API key.`);
  out('The keys are in that file only; read them there (e.g. `grep API_KEY ' + options.file + '`).');
  // `serve` needs a chain endpoint (it exits 2 without one); the devnet is the explicit --devnet.
  out(`Try it on the embedded devnet (simulated chain and hosts):  shardgate serve --devnet --env-file ${options.file}`);
  out(`A real network: set NODE_CHAIN_API (or DEVSHARD_CHAIN_REST), NODE_BASE and CHAIN_ID in ${options.file}, then:  shardgate serve --env-file ${options.file}`);
  out('In a container: docker compose -f compose.devnet.yaml up -d (devnet), or NODE_CHAIN_API, NODE_BASE and CHAIN_ID in .env next to compose.yaml, then: docker compose up -d');
  out('Call it:            curl -H "Authorization: Bearer $DEVSHARD_API_KEYS" http://127.0.0.1:8080/v1/models   (after `set -a; . ' + options.file + '; set +a`)');
  return path;
}

export function registerInit(program: Command): void {
  program
    .command('init')
    .description('write a config file (mode 600) with generated keys and the reference settings')
    .option('-f, --file <path>', 'config file to write', 'shardgate.env')
    .option('--force', 'overwrite an existing file (replaces its keys)', false)
    .action(async (opts: { file: string; force: boolean }) => {
      try {
        await runInit(opts);
      } catch (err) {
        process.stderr.write(`shardgate init: ${(err as Error).message}\n`);
        process.exitCode = 1;
      }
    });
}
