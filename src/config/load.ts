/**
 * loadConfig: environment (+ optional env file) -> a typed, validated GatewayConfig.
 * Precedence: process environment > env file > `fallbacks` (caller's defaults, e.g. serve's
 * DEVSHARDS_JSON='[]' for the quick start) > the table's defaults. An empty value counts as unset.
 * All problems are reported at once; messages name the variable and never echo a secret.
 */
import { isAbsolute, resolve } from 'node:path';
import { isPrivateKeyHex, PRIVATE_KEY_RULE } from './private-key.js';
import { readEnvFile } from './env-file.js';
import { storageSettings, type StorageSettings } from './storage.js';
import { ConfigError, type ConfigIssue } from './errors.js';
import { SECRET_VARIABLES, VARIABLES } from './variables.js';
import { parseProtocolVersion, SUPPORTED_VERSION_NAMES, versionOfRoute } from '../protocol/versions.js';

/** One initial escrow of pool mode (from DEVSHARDS_JSON). */
export interface InitialEscrow {
  /** Decimal string (uint64 on chain). */
  escrowId: string;
  modelId?: string;
}

export type GatewayMode = { kind: 'pool'; initialEscrows: InitialEscrow[] } | { kind: 'single'; escrowId: string };

export interface GatewayConfig {
  mode: GatewayMode;
  /** DEVSHARD_MODEL. */
  model: string;
  chain: {
    /** NODE_RPC; undefined = start the embedded devnet. */
    rpc: string | undefined;
    chainId: string;
    nodeBase: string | undefined;
    chainApi: string | undefined;
    chainRest: string | undefined;
    /** DEVSHARD_TX_QUERY_REST: a second REST address where txs are looked up by hash. */
    txQueryRest: string | undefined;
    txGasLimit: number;
    /** DEVSHARD_TX_FEE_AMOUNT: the fixed fee of every tx (smallest unit). */
    txFeeAmount: bigint;
    /** DEVSHARD_TX_FEE_DENOM. */
    txFeeDenom: string;
  };
  /** Where the event log lives (storage.ts). */
  storage: StorageSettings;
  keys: {
    /** DEVSHARD_PRIVATE_KEY (64 hex, no 0x); secret. */
    creatorPrivateKey: string | undefined;
    /** DEVSHARD_API_KEYS split on commas, trimmed, empties dropped; secret. */
    apiKeys: string[];
    /** DEVSHARD_ADMIN_API_KEY; secret. */
    adminApiKey: string | undefined;
    /** DEVSHARD_LOG_HMAC_KEY: keys the event log's anchor (src/events/log-anchor.ts); secret. */
    logHmacKey: string | undefined;
  };
  server: {
    host: string;
    port: number;
    /** Absolute path (DEVSHARD_STORAGE_DIR resolved against cwd). */
    storageDir: string;
    /** DEVSHARD_IMPORT_DIR resolved against cwd: where devshardctl stores may be imported from; undefined = none. */
    importDir: string | undefined;
    instanceName: string;
    shutdownTimeoutMs: number;
    logLevel: string;
    /** GATEWAY_STORAGE_LOW_BYTES: free bytes under which /v1/status says storage.low. */
    storageLowBytes: number;
    /** The HTTP server's connection limits (src/http/app.ts HttpServerLimits). */
    maxConnections: number;
    headersTimeoutMs: number;
    requestReceiveTimeoutMs: number;
    maxUnsentBytes: number;
    slowClientTimeoutMs: number;
    /** GATEWAY_MAX_BODY_BYTES: the request body limit (createHttpApp's bodyLimit). */
    maxBodyBytes: number;
  };
  limits: {
    maxConcurrentRequests: number;
    /** 0 = no limit. */
    maxInputTokensInFlight: number;
    defaultMaxTokens: number;
    maxTokensCap: number;
    stallTimeoutMs: number;
    /** Whole-answer deadline of a non-stream chat (GATEWAY_REQUEST_TIMEOUT_MS). */
    requestTimeoutMs: number;
    /** How long finalize waits for an escrow's requests in flight to end (GATEWAY_FINALIZE_DRAIN_MS). */
    finalizeDrainMs: number;
  };
  behaviour: {
    rotationIntervalMs: number;
    balanceCheckIntervalMs: number;
    /** GATEWAY_RECONCILE_INTERVAL_MS. */
    reconcileIntervalMs: number;
    /** DEVSHARD_PRUNE_WARN_BLOCKS: warn (once per escrow) this many blocks before the chain prunes an unsettled escrow. */
    pruneWarnBlocks: number;
    /** DEVSHARD_REQUIRE_HEIGHT_SEED: v5 chat waits on the session's height seed, 503 while it is missed. */
    requireHeightSeed: boolean;
    /** GATEWAY_RECORD_BEFORE_LAST_BYTE: an answer's outcome is durable before its last byte leaves. */
    recordBeforeLastByte: boolean;
    /** GATEWAY_HEARTBEAT_IDLE_MS: a v5 escrow quiet this long gets an idle heartbeat span; 0 = never. */
    heartbeatIdleMs: number;
  };
  /**
   * Variables of the reference configuration that are accepted (and validated) but have no effect
   * in shardgate: the spec gives their names and reference values, not what they change
   * (src/config/variables.ts says why for each).
   */
  compatibility: {
    /**
     * DEVSHARD_POC_REQUEST_MODE (ctl/poc_mode.go): `off` blocks chat with 503 while the chain is in
     * PoC (or a blocking confirmation PoC); `relaxed` keeps serving. `strict` (older docs) reads as `off`.
     */
    pocRequestMode: 'relaxed' | 'off';
    /** DEVSHARD_CAPACITY_AWARE_LIMITS. */
    capacityAwareLimits: boolean;
    /** DEVSHARD_PUBLIC_API (default NODE_BASE). */
    publicApi: string | undefined;
  };
  /** DEVSHARD_GATEWAY_DISABLED*: applied on the first start only (before the gateway database exists). */
  disabledBootstrap: { enabled: boolean; message: string | undefined; newUrl: string | undefined };
  network: {
    upstreamUrl: string | undefined;
    upstreamKey: string | undefined;
    /**
     * The protocol an escrow speaks when its create / register / import names none (versions.ts
     * `chooseProtocol`): DEVSHARD_PROTOCOL_VERSION, DEVSHARD_ROUTE_PREFIX (an explicit override of
     * every escrow's route), DEVSHARD_STATE_ROOT_VERSION. Unset: the newest version we speak that the
     * chain approves, its own route, its name as the tag.
     */
    protocol: { version?: string; routePrefix?: string; stateRootVersion?: string };
  };
  /**
   * The merged environment (file + process), for the devnet's own resolver
   * (resolveDevnetConfig({ env })) and for reading the variable named by `private_key_env`.
   * Holds secrets: never log it.
   */
  env: Readonly<Record<string, string>>;
  /** Where each known variable came from. */
  sources: Readonly<Record<string, 'env' | 'file' | 'fallback' | 'default'>>;
  /** Non-fatal remarks (e.g. DEVSHARD_ESCROW_ID ignored in pool mode). */
  warnings: string[];
}

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

/**
 * DEVSHARDS_JSON accepted shape: a JSON array whose items are escrow ids (non-negative safe
 * integers or numeric strings) or objects `{"id"|"escrow_id": <id>, "model_id"?: string}`.
 * Duplicates are refused.
 */
export function parseMode(json: string | undefined, escrowId: string | undefined, issues: ConfigIssue[], warnings: string[]): GatewayMode {
  if (json === undefined) {
    if (escrowId === undefined) {
      issues.push({
        variable: 'DEVSHARD_ESCROW_ID',
        message: "no escrow configured: set DEVSHARDS_JSON='[]' for pool mode (escrows are then created or registered through the admin API), or DEVSHARD_ESCROW_ID=<id> for single-escrow mode",
      });
      return { kind: 'single', escrowId: '' };
    }
    if (!/^\d{1,20}$/.test(escrowId)) {
      issues.push({ variable: 'DEVSHARD_ESCROW_ID', message: `DEVSHARD_ESCROW_ID must be a numeric escrow id (got ${JSON.stringify(escrowId.slice(0, 40))})` });
      return { kind: 'single', escrowId: '' };
    }
    return { kind: 'single', escrowId: BigInt(escrowId).toString() };
  }
  const bad = (why: string): GatewayMode => {
    issues.push({ variable: 'DEVSHARDS_JSON', message: `DEVSHARDS_JSON ${why}; expected a JSON array like [] or [12, "13", {"id": 14, "model_id": "..."}]` });
    return { kind: 'pool', initialEscrows: [] };
  };
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return bad('is not valid JSON');
  }
  if (!Array.isArray(parsed)) return bad('is not an array');
  const initialEscrows: InitialEscrow[] = [];
  const seen = new Set<string>();
  for (const [i, item] of parsed.entries()) {
    let id: unknown = item;
    let modelId: unknown;
    if (item !== null && typeof item === 'object' && !Array.isArray(item)) {
      const o = item as Record<string, unknown>;
      id = o.id ?? o.escrow_id;
      modelId = o.model_id;
      if (modelId !== undefined && (typeof modelId !== 'string' || modelId === '')) return bad(`item ${i}: model_id must be a non-empty string`);
    }
    let canonical: string;
    if (typeof id === 'number' && Number.isSafeInteger(id) && id >= 0) canonical = String(id);
    else if (typeof id === 'string' && /^\d{1,20}$/.test(id)) canonical = BigInt(id).toString();
    else return bad(`item ${i}: not an escrow id`);
    if (seen.has(canonical)) return bad(`item ${i}: escrow ${canonical} listed twice`);
    seen.add(canonical);
    initialEscrows.push(modelId === undefined ? { escrowId: canonical } : { escrowId: canonical, modelId: modelId as string });
  }
  if (escrowId !== undefined) warnings.push('DEVSHARD_ESCROW_ID is ignored in pool mode (DEVSHARDS_JSON is set); list the escrow in DEVSHARDS_JSON instead.');
  return { kind: 'pool', initialEscrows };
}
