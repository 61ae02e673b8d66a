import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, MAX_BODY_BYTES_DEFAULT, parseEnvFile, renderEnvTable, VARIABLES } from '../../src/config/index.js';
import { runInit } from '../../src/cli/commands/init.js';

const pool = { DEVSHARDS_JSON: '[]' };
const tmp = () => mkdtempSync(join(tmpdir(), 'shardgate-config-'));

describe('loadConfig', () => {
  it('applies the reference defaults', () => {
    const c = loadConfig({ env: pool, cwd: '/srv/gw' });
    expect(c.server).toMatchObject({ host: '127.0.0.1', port: 8080, storageDir: '/srv/gw/.devshardctl', instanceName: 'devshardctl-multi' });
    expect(c.limits).toMatchObject({ maxConcurrentRequests: 512, maxInputTokensInFlight: 0, defaultMaxTokens: 3072, maxTokensCap: 4096 });
    expect(c.chain.txGasLimit).toBe(500000);
    expect(c.chain.txFeeAmount).toBe(1_000_000n);
    expect(c.chain.txFeeDenom).toBe('ngonka');
    expect(c.chain.rpc).toBeUndefined();
    expect(c.behaviour).toMatchObject({ rotationIntervalMs: 15000, balanceCheckIntervalMs: 30000 });
    expect(c.compatibility).toMatchObject({ pocRequestMode: 'relaxed', capacityAwareLimits: true });
    expect(c.warnings).toEqual([]);
    expect(c.disabledBootstrap.enabled).toBe(false);
    expect(c.mode).toEqual({ kind: 'pool', initialEscrows: [] });
  });

  it('takes overrides and derives the chain REST addresses from NODE_CHAIN_API / NODE_BASE', () => {
    const c = loadConfig({
      env: { ...pool, DEVSHARD_PORT: '9000', GATEWAY_HOST: '0.0.0.0', NODE_RPC: 'http://n:26657/', NODE_CHAIN_API: 'http://n:1317', NODE_BASE: 'http://n:8000', DEVSHARD_CAPACITY_AWARE_LIMITS: 'off', GATEWAY_MAX_INPUT_TOKENS_IN_FLIGHT: '100000' },
    });
    expect(c.server.port).toBe(9000);
    expect(c.server.host).toBe('0.0.0.0');
    expect(c.chain).toMatchObject({ rpc: 'http://n:26657/', chainRest: 'http://n:1317' });
    // Unset: txs are looked up at the chain REST address only.
    expect(c.chain.txQueryRest).toBeUndefined();
    expect(c.compatibility).toMatchObject({ capacityAwareLimits: false, publicApi: 'http://n:8000' });
    // Accepted, but the operator is told it changes nothing.
    expect(c.warnings.some((w) => w.startsWith('DEVSHARD_CAPACITY_AWARE_LIMITS has no effect'))).toBe(true);
    expect(c.limits.maxInputTokensInFlight).toBe(100000);
  });

  it('splits DEVSHARD_API_KEYS on commas, trimming and ignoring empty entries', () => {
    const c = loadConfig({ env: { ...pool, DEVSHARD_API_KEYS: ' sk-a , ,sk-b,' } });
    expect(c.keys.apiKeys).toEqual(['sk-a', 'sk-b']);
  });

  it('parses DEVSHARDS_JSON ids, numeric strings and objects', () => {
    const c = loadConfig({ env: { DEVSHARDS_JSON: '[1, "2", {"id": 3, "model_id": "m"}, {"escrow_id": "18446744073709551615"}]' } });
    expect(c.mode).toEqual({ kind: 'pool', initialEscrows: [{ escrowId: '1' }, { escrowId: '2' }, { escrowId: '3', modelId: 'm' }, { escrowId: '18446744073709551615' }] });
  });

  it('refuses a malformed DEVSHARDS_JSON naming the variable', () => {
    expect(() => loadConfig({ env: { DEVSHARDS_JSON: '{"a":1}' } })).toThrow(/DEVSHARDS_JSON is not an array/);
    expect(() => loadConfig({ env: { DEVSHARDS_JSON: '[1,1]' } })).toThrow(/listed twice/);
  });

  it('DEVSHARD_HOST_PROTOCOL: devshard (or v2, or unset) is the only host protocol; legacy is refused as one no real host served', () => {
    for (const v of [undefined, 'devshard', 'DEVSHARD', 'v2']) expect(() => loadConfig({ env: { DEVSHARDS_JSON: '[]', ...(v ? { DEVSHARD_HOST_PROTOCOL: v } : {}) } })).not.toThrow();
    let err: unknown;
    try {
      loadConfig({ env: { DEVSHARDS_JSON: '[]', DEVSHARD_HOST_PROTOCOL: 'legacy' } });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues[0]!.variable).toBe('DEVSHARD_HOST_PROTOCOL');
    expect((err as Error).message).toMatch(/legacy was removed: .*real Gonka hosts never served/);
    expect(() => loadConfig({ env: { DEVSHARDS_JSON: '[]', DEVSHARD_HOST_PROTOCOL: 'v1' } })).toThrow(/must be devshard/);
  });

  it('reads the protocol defaults, refusing at start a route devshardctl would refuse (ResolveRoutePrefix\'s words)', () => {
    const env = { DEVSHARDS_JSON: '[]' };
    const issue = (extra: Record<string, string>) => {
      try {
        loadConfig({ env: { ...env, ...extra } });
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        return (e as ConfigError).message;
      }
      return '';
    };
    expect(loadConfig({ env }).network.protocol).toEqual({});
    expect(loadConfig({ env: { ...env, DEVSHARD_PROTOCOL_VERSION: '4.1' } }).network.protocol).toEqual({ version: 'v4.1' });
    expect(loadConfig({ env: { ...env, DEVSHARD_ROUTE_PREFIX: '/devshard/v3/', DEVSHARD_STATE_ROOT_VERSION: 'v2' } }).network.protocol).toEqual({ routePrefix: '/devshard/v3', stateRootVersion: 'v2' });
    // /v1/devshard only for v2 escrows
    expect(loadConfig({ env: { ...env, DEVSHARD_ROUTE_PREFIX: '/v1/devshard' } }).network.protocol).toEqual({ routePrefix: '/v1/devshard' });
    expect(issue({ DEVSHARD_ROUTE_PREFIX: '/v1/devshard', DEVSHARD_PROTOCOL_VERSION: 'v4.1' })).toContain('DEVSHARD_ROUTE_PREFIX "/v1/devshard" serves v2, but DEVSHARD_PROTOCOL_VERSION is v4.1');
    expect(issue({ DEVSHARD_ROUTE_PREFIX: '/api/devshard' })).toContain('DEVSHARD_ROUTE_PREFIX unsupported devshard route prefix "/api/devshard"');
    expect(issue({ DEVSHARD_ROUTE_PREFIX: '/devshard/v9' })).toContain('names a version this gateway does not speak (v2, v3, v4, v4.1, v5)');
    expect(issue({ DEVSHARD_PROTOCOL_VERSION: 'v9' })).toContain('DEVSHARD_PROTOCOL_VERSION protocol version "v9" is not one this gateway speaks');
  });

  it('single-escrow mode needs DEVSHARD_ESCROW_ID and says how to fix it', () => {
    let err: unknown;
    try {
      loadConfig({ env: {} });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const message = (err as Error).message;
    expect(message).toContain("DEVSHARDS_JSON='[]' for pool mode");
    expect(message).toContain('DEVSHARD_ESCROW_ID');
    expect((err as ConfigError).issues[0]!.variable).toBe('DEVSHARD_ESCROW_ID');
    expect(loadConfig({ env: { DEVSHARD_ESCROW_ID: '42' } }).mode).toEqual({ kind: 'single', escrowId: '42' });
  });

  it('reports every bad variable by name and never echoes a secret', () => {
    const secret = '0xdeadbeefdeadbeefdeadbeefdeadbeefdeadbeefdeadbeefdeadbeefdeadbe';
    let message = '';
    try {
      loadConfig({ env: { ...pool, DEVSHARD_PORT: 'eighty', DEVSHARD_PRIVATE_KEY: secret, GATEWAY_MAX_CONCURRENT_REQUESTS: '0' } });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toContain('DEVSHARD_PORT must be an integer');
    expect(message).toContain('"eighty"');
    expect(message).toContain('DEVSHARD_PRIVATE_KEY must be 64 hexadecimal characters');
    expect(message).toContain('GATEWAY_MAX_CONCURRENT_REQUESTS');
    expect(message).not.toContain(secret);
    expect(message).not.toContain('deadbeef');
  });

  it('refuses a DEVSHARD_PRIVATE_KEY outside the secp256k1 range (zero, >= the curve order) without echoing it', () => {
    for (const secret of ['0'.repeat(64), 'f'.repeat(64)]) {
      let err: unknown;
      try {
        loadConfig({ env: { ...pool, DEVSHARD_PRIVATE_KEY: secret } });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toContain('DEVSHARD_PRIVATE_KEY must be 64 hexadecimal characters');
      expect((err as Error).message).toContain('secp256k1');
      expect((err as Error).message).not.toContain(secret);
    }
  });

  it('reads an env file and lets the environment override it', () => {
    const dir = tmp();
    const file = join(dir, 'gw.env');
    writeFileSync(file, [
      '# comment',
      'export DEVSHARD_PORT=9100',
      'DEVSHARDS_JSON=\'[7]\'',
      'DEVSHARD_GATEWAY_DISABLED_MESSAGE="moved # not a comment"',
      'LOG_LEVEL=debug # trailing comment',
      'DEVSHARD_INSTANCE_NAME=from-file',
    ].join('\n'));
    const c = loadConfig({ env: { DEVSHARD_INSTANCE_NAME: 'from-env' }, envFile: file });
    expect(c.server.port).toBe(9100);
    expect(c.server.logLevel).toBe('debug');
    expect(c.server.instanceName).toBe('from-env');
    expect(c.mode).toEqual({ kind: 'pool', initialEscrows: [{ escrowId: '7' }] });
    expect(c.disabledBootstrap.message).toBe('moved # not a comment');
    expect(c.sources.DEVSHARD_PORT).toBe('file');
    expect(c.sources.DEVSHARD_INSTANCE_NAME).toBe('env');
  });

  it('uses fallbacks below the file and environment (serve quick start)', () => {
    expect(loadConfig({ env: {}, fallbacks: { DEVSHARDS_JSON: '[]' } }).mode.kind).toBe('pool');
    expect(loadConfig({ env: { DEVSHARD_ESCROW_ID: '5', DEVSHARDS_JSON: '' }, fallbacks: {} }).mode.kind).toBe('single');
  });

  it('env file errors name the line, not the value', () => {
    expect(() => parseEnvFile('OK=1\nthis is not an assignment sk-secret\n', 'f.env')).toThrow(/f\.env, line 2: expected KEY=VALUE/);
    try {
      parseEnvFile('A="sk-secret', 'f.env');
    } catch (e) {
      expect((e as Error).message).not.toContain('sk-secret');
    }
  });

  it('renders an env table listing every variable, secrets without values', () => {
    const table = renderEnvTable();
    for (const v of VARIABLES) expect(table).toContain(`\`${v.name}\``);
    expect(table).toMatch(/`DEVSHARD_ADMIN_API_KEY` \| \(secret\)/);
    expect(table).toMatch(/`GATEWAY_MAX_CONCURRENT_REQUESTS` \| `512`/);
  });

  it('GATEWAY_MAX_BODY_BYTES: 8 MiB by default (262,144 tokens x 32 bytes), settable, at least 1 KiB', () => {
    expect(MAX_BODY_BYTES_DEFAULT).toBe(262_144 * 32);
    expect(loadConfig({ env: pool }).server.maxBodyBytes).toBe(8 * 1024 * 1024);
    expect(loadConfig({ env: { ...pool, GATEWAY_MAX_BODY_BYTES: '33554432' } }).server.maxBodyBytes).toBe(32 * 1024 * 1024);
    expect(() => loadConfig({ env: { ...pool, GATEWAY_MAX_BODY_BYTES: '100' } })).toThrow(/GATEWAY_MAX_BODY_BYTES must be an integer >= 1024/);
    // The README says how the default was computed.
    expect(renderEnvTable()).toMatch(/`GATEWAY_MAX_BODY_BYTES` \| `8388608` \| .*262,144 tokens.* times 32 JSON bytes a token/);
  });
});

describe('shardgate init', () => {
  it('writes a mode-600 file with keys in the spec formats, loadable as config, and prints no secret', async () => {
    const dir = tmp();
    const file = join(dir, 'shardgate.env');
    const out: string[] = [];
    await runInit({ file }, (l) => out.push(l));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const text = readFileSync(file, 'utf8');
    const vars = parseEnvFile(text);
    expect(vars.DEVSHARD_API_KEYS).toMatch(/^sk-[0-9a-f]{48}$/);
    expect(vars.DEVSHARD_ADMIN_API_KEY).toMatch(/^sk-admin-[0-9a-f]{48}$/);
    expect(vars.DEVSHARD_PRIVATE_KEY).toMatch(/^[0-9a-f]{64}$/);
    const printed = out.join('\n');
    expect(printed).toContain(file);
    for (const secret of [vars.DEVSHARD_API_KEYS!, vars.DEVSHARD_ADMIN_API_KEY!, vars.DEVSHARD_PRIVATE_KEY!]) expect(printed).not.toContain(secret);
    const c = loadConfig({ env: {}, envFile: file });
    expect(c.keys.apiKeys).toEqual([vars.DEVSHARD_API_KEYS]);
    expect(c.mode.kind).toBe('pool');
    expect(c.limits.maxTokensCap).toBe(4096);
  });

  it('refuses to overwrite without --force and replaces keys with it', async () => {
    const dir = tmp();
    const file = join(dir, 'x.env');
    writeFileSync(file, 'KEEP=1\n', { mode: 0o644 });
    await expect(runInit({ file }, () => {})).rejects.toThrow(/already exists; pass --force/);
    expect(readFileSync(file, 'utf8')).toBe('KEEP=1\n');
    await runInit({ file, force: true }, () => {});
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8')).toContain('DEVSHARD_ADMIN_API_KEY=sk-admin-');
  });
});
