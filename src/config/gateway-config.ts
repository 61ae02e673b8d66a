/** The configuration the gateway runs with, as loadConfig (load.ts) makes it from the environment. */
import type { StorageSettings } from './storage.js';

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
