/**
 * Issue 38 item 4: the container must be able to start. No Docker engine runs here, so each compose
 * file's command is run as the container would run it: the Dockerfile's ENTRYPOINT with the
 * file's `command`, under the environment compose hands the container (the file `shardgate init`
 * writes, as env_file, then the file's `environment`, interpolated against the shell). Only the
 * port (0: any free one) and the state directory (a temporary one) differ from the container's.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEnvFile, renderInitFile } from '../../src/config/index.js';
import { startDevnet, type Devnet } from '../../src/devnet/chain/start.js';
import { ensureBuilt, repoRoot } from '../helpers/store-dist.js';
import { composeEnvironment, dockerInstructions, yamlValue } from './container-files.js';

const read = (name: string) => readFileSync(join(repoRoot, name), 'utf8');
const service = ['services', 'gateway'];
const entrypoint = JSON.parse(dockerInstructions(read('Dockerfile')).find((i) => i.keyword === 'ENTRYPOINT')!.args) as string[];

interface Run {
  /** Resolves with the exit code, or with the gateway's URL once serve says it listens. */
  outcome: Promise<{ exit: number | null; stderr: string } | { url: string; stderr: string }>;
  /** SIGTERM, then the exit. */
  stop(): Promise<number | null>;
  /** Everything it wrote to stderr so far. */
  stderr(): string;
}

/** The container's process for a compose file, with a shell environment (what compose interpolates). */
function runComposeCommand(
  file: string,
  shell: Record<string, string>,
  dirs: { cwd: string; storage: string },
  opts: { envFile?: Record<string, string>; drop?: string[] } = {},
): Run {
  const text = read(file);
  const command = JSON.parse(yamlValue(text, [...service, 'command'])) as string[];
  const { env: composeEnv, missing } = composeEnvironment(text, service, shell);
  expect(missing, `compose would refuse ${file}`).toEqual([]);
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    ...parseEnvFile(renderInitFile()), // env_file: shardgate.env as init writes it
    ...opts.envFile, // what the operator added to it
    ...composeEnv, // environment: wins over env_file
    DEVSHARD_PORT: '0',
    DEVSHARD_STORAGE_DIR: dirs.storage,
    LOG_LEVEL: 'warn',
    DEVNET_BLOCK_TIME_MS: '50',
  };
  for (const name of opts.drop ?? []) delete env[name];
  expect(entrypoint[0]).toBe('node');
  const main = ensureBuilt(entrypoint[1]!);
  // cwd: a directory without a shardgate.env, as the image's /app.
  const child = spawn(process.execPath, [main, ...command], { cwd: dirs.cwd, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const outcome = new Promise<{ exit: number | null; stderr: string } | { url: string; stderr: string }>((resolve) => {
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const m = /shardgate is listening on (http:\/\/\S+)/.exec(stderr);
      if (m) resolve({ url: m[1]!.replace('//0.0.0.0:', '//127.0.0.1:'), stderr });
    });
    void exited.then((exit) => resolve({ exit, stderr }));
  });
  return {
    outcome,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

describe('the command each compose file runs, with the environment compose gives it', () => {
  let dirs: { cwd: string; storage: string };
  let devnet: Devnet | undefined;
  beforeAll(() => {
    const cwd = mkdtempSync(join(tmpdir(), 'compose-command-'));
    dirs = { cwd, storage: join(cwd, 'state') };
  });
  afterAll(async () => {
    await devnet?.close();
    rmSync(dirs.cwd, { recursive: true, force: true });
  });

  it('compose.yaml: without the variables compose requires, the container\'s `serve` exits 2 naming them (what it did before compose required them)', { timeout: 60_000 }, async () => {
    const required = composeEnvironment(read('compose.yaml'), service, {}).missing.map((m) => m.variable);
    expect(required).toContain('NODE_CHAIN_API');
    const shell = Object.fromEntries(required.map((v) => [v, 'http://127.0.0.1:9']));
    const o = await runComposeCommand('compose.yaml', shell, dirs, { drop: required }).outcome;
    expect(o).toMatchObject({ exit: 2 });
    expect(o.stderr).toContain('no chain endpoint configured');
    // The chain REST variable serve asks for is one compose requires, and the message names the devnet alternative.
    expect(o.stderr).toContain('NODE_CHAIN_API');
    expect(o.stderr).toContain('serve --devnet');
  });

  it('compose.yaml: with the chain variables set (here, a devnet reached over REST as a real chain), the container\'s `serve` starts and answers /v1/status', { timeout: 90_000 }, async () => {
    devnet = await startDevnet({ port: 0, blockTimeMs: 50 });
    const run = runComposeCommand('compose.yaml', { NODE_CHAIN_API: devnet.url, NODE_BASE: devnet.url, CHAIN_ID: devnet.chainId }, { ...dirs, storage: join(dirs.cwd, 'real') });
    try {
      const o = await run.outcome;
      expect('url' in o, o.stderr).toBe(true);
      const status = await fetch(`${(o as { url: string }).url}/v1/status`);
      expect(status.status).toBe(200);
      expect(await status.json()).toHaveProperty('runtimes');
      expect(o.stderr).not.toContain('embedded devnet');
    } finally {
      // Stopped either way (a clean SIGTERM exit is serve's own test, test/faults/).
      await run.stop();
    }
  });

  it('compose.devnet.yaml: `serve --devnet` starts with nothing set, even when shardgate.env names a chain', { timeout: 90_000 }, async () => {
    const chainInEnvFile = { NODE_CHAIN_API: 'http://127.0.0.1:9', DEVSHARD_CHAIN_REST: 'http://127.0.0.1:9', NODE_RPC: 'http://127.0.0.1:9/' };
    const run = runComposeCommand('compose.devnet.yaml', {}, { ...dirs, storage: join(dirs.cwd, 'devnet') }, { envFile: chainInEnvFile });
    try {
      const o = await run.outcome;
      expect('url' in o, o.stderr).toBe(true);
      expect(o.stderr).toContain('embedded devnet');
      const status = await fetch(`${(o as { url: string }).url}/v1/status`);
      expect(status.status).toBe(200);
    } finally {
      // Stopped either way (a clean SIGTERM exit is serve's own test, test/faults/).
      await run.stop();
    }
  });
});
