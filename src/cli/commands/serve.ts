import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { ConfigError, loadConfig } from '../../config/index.js';
import { startGateway } from '../../main/start.js';
import { chooseLogFormat, createLogger } from '../../http/logger.js';
import { StorageInUseError } from '../../gateway/write/storage-lock.js';
import { EventLogTamperedError } from '../../events/log-anchor.js';
import { tuneV8ForServing } from '../../gateway/v8-tuning.js';
import { runInit } from './init.js';
import { logWhere } from '../../events/log-where.js';

const DEFAULT_ENV_FILE = 'shardgate.env';

interface ServeOptions {
  envFile?: string;
  port?: string;
  storage?: string;
  devnet?: boolean;
}

/**
 * `shardgate serve`: the gateway. With no configuration at all it is the quick start: keys are
 * generated into ./shardgate.env (mode 600), the embedded devnet runs in-process, a first escrow is
 * created, and the output says how to call it.
 */
export async function runServe(opts: ServeOptions): Promise<void> {
  const env: Record<string, string | undefined> = { ...process.env };
  if (opts.port !== undefined) env.DEVSHARD_PORT = opts.port;
  if (opts.storage !== undefined) env.DEVSHARD_STORAGE_DIR = opts.storage;
  let envFile = opts.envFile;
  // The devnet is an explicit choice (`serve --devnet`, as `npm start` runs it), never a fallback.
  const embedded = opts.devnet === true;
  if (!envFile && existsSync(DEFAULT_ENV_FILE)) envFile = DEFAULT_ENV_FILE;
  if (!envFile && embedded && !env.DEVSHARD_ADMIN_API_KEY) {
    // Only init's first line: serve prints its own how-to-call below.
    let first = true;
    await runInit({ file: DEFAULT_ENV_FILE }, (line) => {
      if (first) process.stderr.write(`${line}\n`);
      first = false;
    });
    envFile = DEFAULT_ENV_FILE;
  }
  let config;
  try {
    config = loadConfig({ env, ...(envFile ? { envFile } : {}), fallbacks: embedded ? { DEVSHARDS_JSON: '[]' } : {} });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`shardgate: configuration error\n${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const endpoint = config.chain.chainRest ?? config.chain.chainApi;
  if (!embedded && !endpoint) {
    process.stderr.write(
      'shardgate: no chain endpoint configured\n' +
        'Set the chain REST address: DEVSHARD_CHAIN_REST or NODE_CHAIN_API (e.g. http://node:1317), and usually\n' +
        'DEVSHARD_PUBLIC_API or NODE_BASE (the public API: /v1/epochs/latest, /v1/governance/models) and\n' +
        'DEVSHARD_TX_QUERY_REST (where txs are looked up by hash). NODE_RPC is accepted but not needed.\n' +
        'To try shardgate against the embedded simulated chain instead: `shardgate serve --devnet` (what `npm start` runs).\n',
    );
    process.exit(2);
  }
  if (embedded && endpoint) {
    process.stderr.write('shardgate: --devnet and a chain endpoint (DEVSHARD_CHAIN_REST / NODE_CHAIN_API) were both given; choose one\n');
    process.exit(2);
  }
  // LOG_FORMAT=json|pretty; unset: readable lines on a terminal, JSON lines elsewhere (containers, pipes).
  const logFormat = chooseLogFormat(env.LOG_FORMAT, process.stdout.isTTY === true);
  if (typeof logFormat !== 'string') {
    process.stderr.write(`shardgate: configuration error\n${logFormat.error}\n`);
    process.exit(2);
  }
  const logger = createLogger({ level: config.server.logLevel, format: logFormat });
  for (const w of config.warnings) process.stderr.write(`warning: ${w}\n`);
  tuneV8ForServing();
  let gw;
  try {
    // The quick start (no initial escrows named in the process environment, as `npm start` runs it:
    // the generated shardgate.env or nothing): rotation keeps the first escrow's model served past its epoch.
    gw = await startGateway(config, { logger, quickStartEscrow: true, quickStartRotation: config.sources.DEVSHARDS_JSON !== 'env' });
  } catch (err) {
    // The ways a start commonly fails get a sentence, not a stack trace.
    if (err instanceof ConfigError) {
      process.stderr.write(`shardgate: configuration error\n${err.message}\n`);
      process.exit(2);
    }
    if (err instanceof EventLogTamperedError) {
      // The log no longer proves the state: nothing is served (docs/faults.md); `shardgate verify` names the rest.
      process.stderr.write(`shardgate: ${err.message}\n`);
      process.exit(3);
    }
    if (err instanceof StorageInUseError) {
      process.stderr.write(`shardgate: ${err.message}\n`);
      process.exit(2);
    }
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      process.stderr.write(`shardgate: ${config.server.host}:${config.server.port} is already in use (set DEVSHARD_PORT / GATEWAY_HOST)\n`);
      process.exit(2);
    }
    throw err;
  }
  const keyFile = envFile ?? '<your env file>';
  // The banner is gathered and written at once below, so no log line lands inside it.
  const banner: string[] = [];
  const say = (s: string) => banner.push(s);
  say('');
  // On PostgreSQL the log is the database (shown without its password); the directory keeps the rest.
  const state = config.storage.mode === 'postgres' ? `event log: ${logWhere(config)}, instance ${config.server.instanceName}; other state: ${config.server.storageDir}` : `state: ${config.server.storageDir}`;
  say(`shardgate is listening on ${gw.url}  (${state})`);
  if (gw.devnet) say(`embedded devnet (chain ${gw.devnet.chainId}) at ${gw.devnet.url}  — serve --devnet`);
  say(`keys: ${keyFile} (mode 600; never printed)`);
  say(`operator console: ${gw.url}/console  (sign in with DEVSHARD_ADMIN_API_KEY from ${keyFile})`);
  const q = gw.quickStart;
  if (q) {
    say(
      q.rotation
        ? `first escrow: ${q.escrowId} (epoch ${q.epoch}); escrow rotation is on for ${config.model}: before each epoch switch it is settled and replaced, so chat keeps working (GET /v1/debug/rotation)`
        : `first escrow: ${q.escrowId} (epoch ${q.epoch}); rotation is off: settle it before epoch ${q.epoch + 2}, when the chain prunes it and pays its deposit to its hosts`,
    );
  }
  say('');
  say('Try it:');
  say(`  ADMIN=$(sed -n 's/^DEVSHARD_ADMIN_API_KEY=//p' ${keyFile}); KEY=$(sed -n 's/^DEVSHARD_API_KEYS=//p' ${keyFile} | cut -d, -f1)`);
  say(`  curl -s ${gw.url}/v1/status`);
  say(`  curl -s ${gw.url}/v1/chat/completions -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \\`);
  say(`       -d '{"model":"${config.model}","messages":[{"role":"user","content":"Hello"}]}'`);
  say(`  # client keys need the model in api_key mode:`);
  say(`  curl -s ${gw.url}/v1/admin/settings -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \\`);
  say(`       -d '{"model_limits":[{"model_id":"${config.model}","access_mode":"api_key"}]}'`);
  say(`  # another port: --port <n> or DEVSHARD_PORT; JSON log lines: LOG_FORMAT=json (pretty: LOG_FORMAT=pretty)`);
  say('');
  process.stderr.write(`${banner.join('\n')}\n`);

  const shutdown = (signal: string) => {
    process.stderr.write(`${signal}: draining in-flight requests and closing the log...\n`);
    gw.stop().then(
      () => process.exit(0),
      (err) => {
        process.stderr.write(`shutdown failed: ${(err as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run the gateway against the chain at DEVSHARD_CHAIN_REST / NODE_CHAIN_API (or the embedded devnet with --devnet)')
    .option('--devnet', 'run against the embedded devnet (simulated chain and hosts, in-process)')
    .option('--env-file <file>', `config file (default ./${DEFAULT_ENV_FILE} when present; the environment overrides it)`)
    .option('--port <port>', 'listen port (DEVSHARD_PORT)')
    .option('--storage <dir>', 'state directory (DEVSHARD_STORAGE_DIR)')
    .action(async (opts: ServeOptions) => {
      await runServe(opts);
    });
}
