/**
 * loadConfig: environment (+ optional env file) -> a typed, validated GatewayConfig.
 * Precedence: process environment > env file > `fallbacks` (caller's defaults, e.g. serve's
 * DEVSHARDS_JSON='[]' for the quick start) > the table's defaults. An empty value counts as unset.
 * All problems are reported at once; messages name the variable and never echo a secret.
 */
import { isAbsolute, resolve } from 'node:path';
import { isPrivateKeyHex, PRIVATE_KEY_RULE } from './private-key.js';
import { readEnvFile } from './env-file.js';
import { storageSettings } from './storage.js';
import type { GatewayConfig } from './gateway-config.js';
import { parseMode } from './mode.js';

export type { GatewayConfig, GatewayMode, InitialEscrow } from './gateway-config.js';
export { parseMode } from './mode.js';
import { ConfigError, type ConfigIssue } from './errors.js';
import { SECRET_VARIABLES, VARIABLES } from './variables.js';
import { parseProtocolVersion, SUPPORTED_VERSION_NAMES, versionOfRoute } from '../protocol/versions.js';

export interface LoadConfigOptions {
  env?: NodeJS.ProcessEnv | Record<string, string | undefined>;
  /** An env file (`shardgate init` writes one); the environment overrides it. */
  envFile?: string;
  /** Defaults that win over the table's (serve's quick-start defaults). */
  fallbacks?: Record<string, string>;
  /** Base for a relative DEVSHARD_STORAGE_DIR (default process.cwd()). */
  cwd?: string;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const TRUE = ['1', 'true', 'yes', 'on'];
const FALSE = ['0', 'false', 'no', 'off'];

export function loadConfig(options: LoadConfigOptions = {}): GatewayConfig {
  const processEnv = options.env ?? process.env;
  const fileEnv = options.envFile ? readEnvFile(options.envFile) : {};
  const issues: ConfigIssue[] = [];
  const warnings: string[] = [];
  const sources: Record<string, 'env' | 'file' | 'fallback' | 'default'> = {};

  // Merged environment: every variable of the file, then the process environment on top.
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(fileEnv)) if (v !== '') env[k] = v;
  for (const [k, v] of Object.entries(processEnv)) if (v !== undefined && v !== '') env[k] = v;
  for (const [k, v] of Object.entries(options.fallbacks ?? {})) if (env[k] === undefined) env[k] = v;

  const defaults = new Map(VARIABLES.map((v) => [v.name, v.default]));
  const get = (name: string): string | undefined => {
    const raw = processEnv[name];
    if (raw !== undefined && raw.trim() !== '') sources[name] = 'env';
    else if (fileEnv[name] !== undefined && fileEnv[name].trim() !== '') sources[name] = 'file';
    else if (options.fallbacks?.[name] !== undefined) sources[name] = 'fallback';
    else if (defaults.get(name) !== undefined) sources[name] = 'default';
    const v = env[name]?.trim();
    return v === undefined || v === '' ? defaults.get(name) : v;
  };
  const fail = (variable: string, message: string) => issues.push({ variable, message: `${variable} ${message}` });
  // Non-secret values are quoted back to help the operator; secret ones never are.
  const shown = (name: string, v: string) => (SECRET_VARIABLES.has(name) ? '' : ` (got ${JSON.stringify(v.length > 80 ? `${v.slice(0, 80)}...` : v)})`);

  const int = (name: string, min: number): number => {
    const v = get(name) ?? '0';
    const n = Number(v);
    if (!/^-?\d+$/.test(v) || !Number.isSafeInteger(n) || n < min) {
      fail(name, `must be an integer >= ${min}${shown(name, v)}`);
      return min;
    }
    return n;
  };
  const bool = (name: string): boolean => {
    const v = (get(name) ?? 'false').toLowerCase();
    if (TRUE.includes(v)) return true;
    if (FALSE.includes(v)) return false;
    fail(name, `must be on/off, true/false, yes/no or 1/0${shown(name, v)}`);
    return false;
  };
  const url = (name: string): string | undefined => {
    const v = get(name);
    if (v === undefined) return undefined;
    try {
      const u = new URL(v);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('protocol');
    } catch {
      fail(name, `must be an http(s) URL${shown(name, v)}`);
    }
    return v;
  };

  // keys
  const creatorPrivateKey = get('DEVSHARD_PRIVATE_KEY');
  if (creatorPrivateKey !== undefined && !isPrivateKeyHex(creatorPrivateKey)) {
    fail('DEVSHARD_PRIVATE_KEY', PRIVATE_KEY_RULE);
  }
  const apiKeys = (get('DEVSHARD_API_KEYS') ?? '').split(',').map((k) => k.trim()).filter((k) => k !== '');
  if (apiKeys.some((k) => /\s/.test(k))) fail('DEVSHARD_API_KEYS', 'keys must not contain whitespace (separate keys with commas)');
  const adminApiKey = get('DEVSHARD_ADMIN_API_KEY');
  if (adminApiKey !== undefined && /\s/.test(adminApiKey)) fail('DEVSHARD_ADMIN_API_KEY', 'must not contain whitespace');
  if (adminApiKey !== undefined && apiKeys.includes(adminApiKey)) {
    fail('DEVSHARD_ADMIN_API_KEY', 'must differ from every key in DEVSHARD_API_KEYS');
  }

  // mode
  const mode = parseMode(get('DEVSHARDS_JSON'), get('DEVSHARD_ESCROW_ID'), issues, warnings);

  // chain
  const rpc = url('NODE_RPC');
  const chainApi = url('NODE_CHAIN_API');
  const nodeBase = url('NODE_BASE');
  const chain = {
    rpc,
    chainId: get('CHAIN_ID')!,
    nodeBase,
    chainApi,
    chainRest: url('DEVSHARD_CHAIN_REST') ?? chainApi,
    txQueryRest: url('DEVSHARD_TX_QUERY_REST'),
    txGasLimit: int('DEVSHARD_TX_GAS_LIMIT', 1),
    txFeeAmount: BigInt(int('DEVSHARD_TX_FEE_AMOUNT', 0)),
    txFeeDenom: get('DEVSHARD_TX_FEE_DENOM')!,
  };
  if (rpc !== undefined && !rpc.endsWith('/')) warnings.push('NODE_RPC does not end with a slash; the spec\'s reference form does (it is used as a prefix, e.g. `{NODE_RPC}status`).');
  if (rpc !== undefined && chainApi === undefined && chain.chainRest === undefined) {
    fail('NODE_CHAIN_API', 'is required when NODE_RPC points at a real chain (or set DEVSHARD_CHAIN_REST)');
  }

  const storage = storageSettings(get, fail);

  // server
  const logLevel = (get('LOG_LEVEL') ?? 'info').toLowerCase();
  if (!LOG_LEVELS.includes(logLevel)) fail('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}${shown('LOG_LEVEL', logLevel)}`);
  const storageDir = get('DEVSHARD_STORAGE_DIR')!;
  const port = int('DEVSHARD_PORT', 0);
  if (port > 65535) fail('DEVSHARD_PORT', `must be a port number 0..65535 (got ${port})`);
  const server = {
    host: get('GATEWAY_HOST')!,
    port,
    storageDir: isAbsolute(storageDir) ? storageDir : resolve(options.cwd ?? process.cwd(), storageDir),
    importDir: ((d) => (d === undefined ? undefined : resolve(options.cwd ?? process.cwd(), d)))(get('DEVSHARD_IMPORT_DIR')),
    instanceName: get('DEVSHARD_INSTANCE_NAME')!,
    shutdownTimeoutMs: int('GATEWAY_SHUTDOWN_TIMEOUT_MS', 0),
    logLevel,
    storageLowBytes: int('GATEWAY_STORAGE_LOW_BYTES', 0),
    maxConnections: int('GATEWAY_MAX_CONNECTIONS', 1),
    headersTimeoutMs: int('GATEWAY_HEADERS_TIMEOUT_MS', 1),
    requestReceiveTimeoutMs: int('GATEWAY_REQUEST_RECEIVE_TIMEOUT_MS', 1),
    maxUnsentBytes: int('GATEWAY_SLOW_CLIENT_MAX_UNSENT_BYTES', 1024),
    slowClientTimeoutMs: int('GATEWAY_SLOW_CLIENT_TIMEOUT_MS', 0),
    // Below 1 KiB not even a short chat request fits: a typo, refused at start rather than at every request.
    maxBodyBytes: int('GATEWAY_MAX_BODY_BYTES', 1024),
  };
  if (server.headersTimeoutMs > server.requestReceiveTimeoutMs) fail('GATEWAY_HEADERS_TIMEOUT_MS', `must be at most GATEWAY_REQUEST_RECEIVE_TIMEOUT_MS (${server.requestReceiveTimeoutMs})${shown('GATEWAY_HEADERS_TIMEOUT_MS', String(server.headersTimeoutMs))}`);

  const limits = {
    maxConcurrentRequests: int('GATEWAY_MAX_CONCURRENT_REQUESTS', 1),
    maxInputTokensInFlight: int('GATEWAY_MAX_INPUT_TOKENS_IN_FLIGHT', 0),
    defaultMaxTokens: int('GATEWAY_DEFAULT_MAX_TOKENS', 1),
    maxTokensCap: int('GATEWAY_MAX_TOKENS_CAP', 1),
    stallTimeoutMs: int('GATEWAY_STALL_TIMEOUT_MS', 1),
    requestTimeoutMs: int('GATEWAY_REQUEST_TIMEOUT_MS', 1),
    finalizeDrainMs: int('GATEWAY_FINALIZE_DRAIN_MS', 0),
  };
  if (limits.defaultMaxTokens > limits.maxTokensCap) {
    warnings.push(`GATEWAY_DEFAULT_MAX_TOKENS (${limits.defaultMaxTokens}) is above GATEWAY_MAX_TOKENS_CAP (${limits.maxTokensCap}); requests get the cap.`);
  }

  const poc = (get('DEVSHARD_POC_REQUEST_MODE') ?? 'relaxed').trim().toLowerCase();
  if (poc !== 'relaxed' && poc !== 'off' && poc !== 'strict') fail('DEVSHARD_POC_REQUEST_MODE', `must be off or relaxed (devshardctl's values)${shown('DEVSHARD_POC_REQUEST_MODE', poc)}`);
  if (poc === 'strict') warnings.push('DEVSHARD_POC_REQUEST_MODE=strict is read as off (devshardctl knows off and relaxed): chat is refused with 503 while the chain is in PoC.');
  const compatibility = {
    pocRequestMode: (poc === 'relaxed' ? 'relaxed' : 'off') as 'relaxed' | 'off',
    capacityAwareLimits: bool('DEVSHARD_CAPACITY_AWARE_LIMITS'),
    publicApi: url('DEVSHARD_PUBLIC_API') ?? nodeBase,
  };
  // A value other than the reference one says the operator expects a change: tell them there is none.
  if (!compatibility.capacityAwareLimits) warnings.push('DEVSHARD_CAPACITY_AWARE_LIMITS has no effect in shardgate (the spec does not say what the limits are); GATEWAY_MAX_CONCURRENT_REQUESTS and GATEWAY_MAX_INPUT_TOKENS_IN_FLIGHT apply.');
  const behaviour = {
    rotationIntervalMs: int('GATEWAY_ROTATION_INTERVAL_MS', 100),
    balanceCheckIntervalMs: int('GATEWAY_BALANCE_CHECK_INTERVAL_MS', 100),
    reconcileIntervalMs: int('GATEWAY_RECONCILE_INTERVAL_MS', 100),
    pruneWarnBlocks: int('DEVSHARD_PRUNE_WARN_BLOCKS', 0),
    requireHeightSeed: bool('DEVSHARD_REQUIRE_HEIGHT_SEED'),
    recordBeforeLastByte: bool('GATEWAY_RECORD_BEFORE_LAST_BYTE'),
    heartbeatIdleMs: int('GATEWAY_HEARTBEAT_IDLE_MS', 0),
  };

  const disabledBootstrap = {
    enabled: bool('DEVSHARD_GATEWAY_DISABLED'),
    message: get('DEVSHARD_GATEWAY_DISABLED_MESSAGE'),
    newUrl: url('DEVSHARD_GATEWAY_DISABLED_NEW_URL'),
  };
  // Without DEVSHARD_GATEWAY_DISABLED_NEW_URL a first start is refused (startup-settings.ts), not here:
  // on later starts the variables have no effect.

  // The devshard host protocol is the only host path. `legacy` named a protocol of this gateway's
  // own (a signed OpenAI body, an invented `/sign` route) that no real host ever served; it is gone.
  const hostProtocolRaw = (get('DEVSHARD_HOST_PROTOCOL') ?? 'devshard').toLowerCase();
  if (hostProtocolRaw === 'legacy') {
    fail('DEVSHARD_HOST_PROTOCOL', 'legacy was removed: it was a protocol of this gateway\'s own that real Gonka hosts never served (they speak the devshard host protocol, docs/protocol.md); remove the variable or set it to devshard');
  } else if (hostProtocolRaw !== 'devshard' && hostProtocolRaw !== 'v2') {
    fail('DEVSHARD_HOST_PROTOCOL', `must be devshard (the only host protocol)${shown('DEVSHARD_HOST_PROTOCOL', hostProtocolRaw)}`);
  }
  const protocol: GatewayConfig['network']['protocol'] = {};
  const versionRaw = get('DEVSHARD_PROTOCOL_VERSION');
  if (versionRaw !== undefined && versionRaw.trim() !== '') {
    try {
      protocol.version = parseProtocolVersion(versionRaw);
    } catch (err) {
      fail('DEVSHARD_PROTOCOL_VERSION', (err as Error).message);
    }
  }
  const routePrefixRaw = get('DEVSHARD_ROUTE_PREFIX');
  if (routePrefixRaw !== undefined && routePrefixRaw.trim() !== '') {
    // devshardctl's ResolveRoutePrefix: /devshard/<name> only; /v1/devshard stays for v2 escrows.
    try {
      const v = versionOfRoute(routePrefixRaw);
      if (v === undefined) fail('DEVSHARD_ROUTE_PREFIX', `${JSON.stringify(routePrefixRaw)} names a version this gateway does not speak (${SUPPORTED_VERSION_NAMES.join(', ')})`);
      else if (protocol.version !== undefined && v !== protocol.version) fail('DEVSHARD_ROUTE_PREFIX', `${JSON.stringify(routePrefixRaw)} serves ${v}, but DEVSHARD_PROTOCOL_VERSION is ${protocol.version}: hosts serve each version under /devshard/<version> (v2 under /v1/devshard); set one of them, or both alike`);
      else protocol.routePrefix = routePrefixRaw.trim().replace(/\/+$/, '');
    } catch (err) {
      fail('DEVSHARD_ROUTE_PREFIX', (err as Error).message);
    }
  }
  const tagRaw = get('DEVSHARD_STATE_ROOT_VERSION');
  if (tagRaw !== undefined && tagRaw.trim() !== '') {
    if (tagRaw.trim().length > 128) fail('DEVSHARD_STATE_ROOT_VERSION', 'must be at most 128 characters (the keeper\'s limit on a settlement\'s version)');
    else protocol.stateRootVersion = tagRaw.trim();
  }
  const network = {
    upstreamUrl: url('NETWORK_UPSTREAM_URL'),
    upstreamKey: get('NETWORK_UPSTREAM_KEY'),
    protocol,
  };

  if (issues.length > 0) throw new ConfigError(issues);
  return {
    mode,
    model: get('DEVSHARD_MODEL')!,
    chain,
    keys: { creatorPrivateKey, apiKeys, adminApiKey, logHmacKey: get('DEVSHARD_LOG_HMAC_KEY') },
    storage,
    server,
    limits,
    behaviour,
    compatibility,
    disabledBootstrap,
    network,
    env,
    sources,
    warnings,
  };
}
