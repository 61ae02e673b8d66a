/**
 * The Dockerfile and compose.yaml state the spec's deployment facts ("Gateway configuration
 * variables" and the paragraph after it): port 8080 inside, published on the host loopback at 18080
 * only, state in the host directory mounted at /root/.devshardctl, container name
 * devshardctl-multi, health check GET /v1/status every 30 s (timeout 5 s, 3 retries, 10 s start
 * period). No Docker engine runs here, so the image is never built: these tests read the files,
 * and run their health check command as written.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderInitFile, parseEnvFile, VARIABLE_NAMES, VARIABLES } from '../../src/config/index.js';
import { ensureBuilt, repoRoot } from '../helpers/store-dist.js';
import { composeEnvironment, dockerInstructions, envPairs, flagsOf, yamlBlock, yamlList, yamlValue, type Instruction } from './container-files.js';

const read = (name: string) => readFileSync(join(repoRoot, name), 'utf8');
const dockerfile = dockerInstructions(read('Dockerfile'));
const compose = read('compose.yaml');
const composeDevnet = read('compose.devnet.yaml');
const service = ['services', 'gateway'];

const lastStage = Math.max(...dockerfile.map((i) => i.stage));
const runtime = dockerfile.filter((i) => i.stage === lastStage);
const one = (keyword: string, from: Instruction[] = runtime): Instruction => {
  const found = from.filter((i) => i.keyword === keyword);
  expect(found, `exactly one ${keyword}`).toHaveLength(1);
  return found[0]!;
};
const runtimeEnv = Object.assign({}, ...runtime.filter((i) => i.keyword === 'ENV').map((i) => envPairs(i.args))) as Record<string, string>;
const healthcheck = flagsOf(one('HEALTHCHECK').args);
const healthcheckCmd = JSON.parse(healthcheck.rest.replace(/^CMD\s+/, '')) as string[];

describe('Dockerfile', () => {
  it('builds in one stage (npm ci with a compiler for better-sqlite3, npm run build, dev deps pruned) and runs on node 20 slim', () => {
    expect(lastStage).toBeGreaterThan(0);
    const build = dockerfile.filter((i) => i.stage < lastStage && i.keyword === 'RUN').map((i) => i.args);
    expect(build.some((r) => /apt-get install .*\bpython3\b/.test(r) && /\bmake\b/.test(r) && /\bg\+\+/.test(r))).toBe(true);
    const order = ['npm ci', 'npm run build', 'npm prune --omit=dev'].map((cmd) => build.findIndex((r) => r.includes(cmd)));
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    // Both stages from the one ARG: node 20 (package.json engines: >=20.19), a slim image.
    const image = /^NODE_IMAGE=(\S+)$/.exec(one('ARG', dockerfile.filter((i) => i.stage === -1)).args)?.[1];
    expect(image).toMatch(/^node:20[\w.-]*-slim$/);
    expect(dockerfile.filter((i) => i.keyword === 'FROM').map((i) => i.args.split(/\s+/)[0])).toEqual(['${NODE_IMAGE}', '${NODE_IMAGE}']);
    expect(JSON.parse(read('package.json')).engines.node).toBe('>=20.19');
  });

  it('listens on 0.0.0.0:8080 inside, keeps state in /root/.devshardctl, as root (that directory is root\'s home)', () => {
    expect(runtimeEnv).toMatchObject({ GATEWAY_HOST: '0.0.0.0', DEVSHARD_PORT: '8080', DEVSHARD_STORAGE_DIR: '/root/.devshardctl' });
    // The names are the ones the config reads (a typo would silently keep the loopback default).
    for (const name of Object.keys(runtimeEnv).filter((n) => n !== 'NODE_ENV')) expect(VARIABLE_NAMES.has(name), name).toBe(true);
    expect(one('EXPOSE').args).toBe('8080');
    expect(one('USER').args).toBe('root');
    expect(one('VOLUME').args).toBe('["/root/.devshardctl"]');
    // The bare-metal defaults stay local.
    const defaults = Object.fromEntries(VARIABLES.map((v) => [v.name, v.default]));
    expect(defaults).toMatchObject({ GATEWAY_HOST: '127.0.0.1', DEVSHARD_STORAGE_DIR: '.devshardctl', DEVSHARD_PORT: '8080' });
  });

  it('checks health every 30 s (timeout 5 s, 3 retries, 10 s start period) with `shardgate healthcheck`, inside Docker\'s timeout', () => {
    expect(healthcheck.flags).toEqual({ interval: '30s', timeout: '5s', retries: '3', 'start-period': '10s' });
    expect(healthcheckCmd.slice(0, 3)).toEqual(['node', 'dist/src/cli/main.js', 'healthcheck']);
    const ms = Number(healthcheckCmd[healthcheckCmd.indexOf('--timeout-ms') + 1]);
    expect(ms).toBeGreaterThan(0);
    expect(ms).toBeLessThan(5000);
  });

  it('runs `serve` from the package\'s bin in exec form (node is PID 1 and receives SIGTERM itself)', () => {
    const bin = JSON.parse(read('package.json')).bin.shardgate as string;
    expect(JSON.parse(one('ENTRYPOINT').args)).toEqual(['node', bin]);
    expect(JSON.parse(one('CMD').args)).toEqual(['serve']);
    expect(one('STOPSIGNAL').args).toBe('SIGTERM');
    expect(readFileSync(join(repoRoot, 'src/cli/commands/serve.ts'), 'utf8')).toContain("process.once('SIGTERM'");
    // The runtime stage has what the entrypoint needs from the build stage.
    const copied = runtime.filter((i) => i.keyword === 'COPY').map((i) => i.args);
    for (const path of ['/app/package.json', '/app/node_modules', '/app/dist/src']) expect(copied.some((c) => c.startsWith(`--from=build ${path} `))).toBe(true);
  });

  it('copies only files that exist and that .dockerignore lets into the context, which never holds keys or state', () => {
    const ignore = read('.dockerignore').split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
    expect(ignore[0]).toBe('*'); // an allowlist
    const allowed = ignore.filter((l) => l.startsWith('!')).map((l) => l.slice(1));
    const sources = dockerfile
      .filter((i) => i.keyword === 'COPY' && !i.args.startsWith('--from='))
      .flatMap((i) => i.args.split(/\s+/).slice(0, -1));
    expect(sources.length).toBeGreaterThan(0);
    for (const src of sources) {
      expect(existsSync(join(repoRoot, src)), src).toBe(true);
      expect(allowed, src).toContain(src);
    }
    for (const secret of ['shardgate.env', '.devshardctl', 'node_modules', 'dist']) expect(allowed).not.toContain(secret);
  });
});

describe('compose.yaml', () => {
  it('names the container DEVSHARD_INSTANCE_NAME (default devshardctl-multi), also the instance name the gateway reports', () => {
    expect(yamlValue(compose, [...service, 'container_name'])).toBe('${DEVSHARD_INSTANCE_NAME:-devshardctl-multi}');
    expect(yamlValue(compose, [...service, 'environment', 'DEVSHARD_INSTANCE_NAME'])).toBe('${DEVSHARD_INSTANCE_NAME:-devshardctl-multi}');
  });

  it('publishes 8080 on the host loopback at 18080 only', () => {
    expect(yamlList(compose, [...service, 'ports'])).toEqual(['127.0.0.1:18080:8080']);
    expect(compose).not.toMatch(/network_mode:\s*host/);
    // No other publication anywhere in the file.
    expect(compose.match(/\d+:8080\b/g)).toEqual(['18080:8080']);
  });

  it('binds the host storage directory (DEVSHARD_STORAGE_HOST_DIR, default .devshardctl) at /root/.devshardctl', () => {
    const volumes = yamlBlock(compose, [...service, 'volumes']);
    expect(volumes).toEqual(['- type: bind', 'source: ${DEVSHARD_STORAGE_HOST_DIR:-.devshardctl}', 'target: /root/.devshardctl', 'bind:', 'create_host_path: true']);
    expect(runtimeEnv.DEVSHARD_STORAGE_DIR).toBe('/root/.devshardctl');
  });

  it('reads the operator\'s config file, yet pins what init writes for bare metal (storage, port, host) to the container\'s values', () => {
    expect(yamlList(compose, [...service, 'env_file'])).toEqual(['shardgate.env']);
    const pinned = { GATEWAY_HOST: '0.0.0.0', DEVSHARD_PORT: '8080', DEVSHARD_STORAGE_DIR: '/root/.devshardctl' };
    for (const [name, value] of Object.entries(pinned)) expect(yamlValue(compose, [...service, 'environment', name]), name).toBe(value);
    // Why the pins matter: the init file sets these, and env_file would otherwise win over the image's ENV.
    const written = parseEnvFile(renderInitFile());
    expect(written.DEVSHARD_STORAGE_DIR).toBe('.devshardctl');
    expect(written.DEVSHARD_PORT).toBe('8080');
  });

  it('has the Dockerfile\'s health check (30 s, 5 s, 3, 10 s), a restart policy, and a stop grace longer than the drain', () => {
    const hc = [...service, 'healthcheck'];
    expect(JSON.parse(yamlValue(compose, [...hc, 'test']))).toEqual(['CMD', ...healthcheckCmd]);
    expect(['interval', 'timeout', 'retries', 'start_period'].map((k) => yamlValue(compose, [...hc, k]))).toEqual(['30s', '5s', '3', '10s']);
    expect(yamlValue(compose, [...service, 'restart'])).toBe('unless-stopped');
    const grace = Number(/^(\d+)s$/.exec(yamlValue(compose, [...service, 'stop_grace_period']))?.[1]) * 1000;
    const drain = Number(VARIABLES.find((v) => v.name === 'GATEWAY_SHUTDOWN_TIMEOUT_MS')!.default);
    expect(grace).toBeGreaterThan(drain);
  });
});

describe('compose.yaml needs a real network, and says so (issue 38)', () => {
  const chainVariables = ['CHAIN_ID', 'NODE_BASE', 'NODE_CHAIN_API'];

  it('runs the Dockerfile\'s `serve`, which exits without a chain endpoint: so compose refuses to start until NODE_CHAIN_API, NODE_BASE and CHAIN_ID are set (${VAR:?message})', () => {
    expect(JSON.parse(yamlValue(compose, [...service, 'command']))).toEqual(['serve']);
    expect(JSON.parse(one('CMD').args)).toEqual(['serve']);
    const { missing } = composeEnvironment(compose, service, {});
    expect(missing.map((m) => m.variable).sort()).toEqual(chainVariables);
    for (const m of missing) {
      // compose prints the message: it names the variable and where compose reads it from.
      expect(m.message, m.variable).toContain(`set ${m.variable} `);
      expect(m.message, m.variable).toContain('.env next to compose.yaml');
    }
    expect(missing.find((m) => m.variable === 'NODE_CHAIN_API')!.message).toContain('compose.devnet.yaml');
    // An empty value is refused too (`:?`, not `?`): the gateway reads an empty variable as unset.
    expect(composeEnvironment(compose, service, { NODE_CHAIN_API: '', NODE_BASE: 'http://n', CHAIN_ID: 'c' }).missing.map((m) => m.variable)).toEqual(['NODE_CHAIN_API']);
  });

  it('hands the chain variables to the gateway over shardgate.env, whose CHAIN_ID is the devnet\'s', () => {
    const shell = { NODE_CHAIN_API: 'http://node:1317', NODE_BASE: 'http://node:8000', CHAIN_ID: 'gonka-mainnet' };
    const { env, missing } = composeEnvironment(compose, service, shell);
    expect(missing).toEqual([]);
    expect(env).toMatchObject(shell);
    for (const name of Object.keys(env)) expect(VARIABLE_NAMES.has(name), name).toBe(true);
    expect(parseEnvFile(renderInitFile()).CHAIN_ID).toBe('shardgate-devnet');
  });
});

describe('compose.devnet.yaml: the embedded devnet, no chain needed', () => {
  it('runs `serve --devnet` and starts with nothing set: no ${VAR:?} anywhere, the chain addresses pinned empty over shardgate.env', () => {
    expect(JSON.parse(yamlValue(composeDevnet, [...service, 'command']))).toEqual(['serve', '--devnet']);
    expect(composeDevnet).not.toMatch(/\$\{\w+:?\?/);
    const { env, missing } = composeEnvironment(composeDevnet, service, {});
    expect(missing).toEqual([]);
    // `serve --devnet` refuses a chain endpoint beside it; an empty value is unset for the gateway.
    expect(env).toMatchObject({ NODE_CHAIN_API: '', DEVSHARD_CHAIN_REST: '', DEVSHARD_TX_QUERY_REST: '', NODE_RPC: '' });
    expect(env).toMatchObject({ GATEWAY_HOST: '0.0.0.0', DEVSHARD_PORT: '8080', DEVSHARD_STORAGE_DIR: '/root/.devshardctl', DEVSHARD_INSTANCE_NAME: 'shardgate-devnet' });
    for (const name of Object.keys(env)) expect(VARIABLE_NAMES.has(name), name).toBe(true);
  });

  it('is compose.yaml\'s deployment (image, port, health check, stop, logs) under its own name and state directory', () => {
    for (const key of ['ports', 'healthcheck', 'env_file', 'logging']) expect(yamlBlock(composeDevnet, [...service, key]), key).toEqual(yamlBlock(compose, [...service, key]));
    for (const key of ['build', 'image', 'restart', 'stop_grace_period']) expect(yamlValue(composeDevnet, [...service, key]), key).toBe(yamlValue(compose, [...service, key]));
    expect(yamlValue(composeDevnet, [...service, 'container_name'])).toBe('${DEVSHARD_INSTANCE_NAME:-shardgate-devnet}');
    // A devnet log (escrows on a simulated chain) never lands in the real network's state directory.
    expect(yamlBlock(composeDevnet, [...service, 'volumes'])).toEqual(['- type: bind', 'source: ${DEVSHARD_STORAGE_HOST_DIR:-.devshardctl-devnet}', 'target: /root/.devshardctl', 'bind:', 'create_host_path: true']);
  });
});

describe('the health check command as the files write it', () => {
  const runAsWritten = (env: Record<string, string>) =>
    new Promise<{ code: number | null; stderr: string }>((resolve) => {
      ensureBuilt(healthcheckCmd[1]!);
      const [cmd, ...args] = healthcheckCmd;
      expect(cmd).toBe('node');
      // The container's WORKDIR is /app, where dist/ is; here that is the repo root.
      const child = execFile(process.execPath, args, { cwd: repoRoot, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 20_000 }, (_e, _out, stderr) =>
        resolve({ code: child.exitCode, stderr }),
      );
    });

  it('exits 0 with the image\'s environment against a JSON /v1/status on that port, 1 when nothing listens', async () => {
    let asked = '';
    const server = createServer((req, res) => {
      asked = req.url ?? '';
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"runtimes":[]}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = String((server.address() as AddressInfo).port);
    try {
      const ok = await runAsWritten({ ...runtimeEnv, DEVSHARD_PORT: port });
      expect(ok).toEqual({ code: 0, stderr: '' });
      expect(asked).toBe('/v1/status');
    } finally {
      await new Promise((r) => server.close(r));
    }
    const down = await runAsWritten({ ...runtimeEnv, DEVSHARD_PORT: port });
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/^unhealthy: .*ECONNREFUSED.*\n$/);
  });
});
