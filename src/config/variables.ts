/**
 * Every environment variable shardgate reads, in one table: the loader, `shardgate init` and the
 * README's env table are all generated from it, so they cannot disagree.
 *
 * `default` is the value used when neither the environment nor the env file sets the variable
 * (undefined = unset). Variables marked `secret` are never printed, logged or echoed in errors.
 */

export type VariableGroup = 'chain' | 'keys' | 'mode' | 'server' | 'limits' | 'behaviour' | 'disabled' | 'network' | 'devnet' | 'deployment';

export interface VariableSpec {
  name: string;
  group: VariableGroup;
  default?: string;
  /** What it means, one sentence for the README. */
  meaning: string;
  secret?: boolean;
  /** Written by `shardgate init` (generated or reference value). */
  init?: 'generate' | 'reference';
}

/**
 * The model of a quick start and of the devnet (src/devnet/chain/config.ts reads it from here),
 * so a quick start serves what the simulated hosts serve. Config is the leaf both can import.
 */
export const DEVNET_MODEL_DEFAULT = 'Qwen/Qwen3-235B-A22B-Instruct-2507-FP8';

/**
 * The largest context window of a model the network serves, in tokens: Qwen3-235B-A22B-Instruct-2507
 * (DEVNET_MODEL_DEFAULT, the model the hosts serve) reads 262,144 tokens natively (its config's
 * max_position_embeddings). A client may fill it with one prompt, so the chat body limit follows it.
 */
export const LARGEST_CONTEXT_TOKENS = 262_144;

/**
 * JSON bytes budgeted per prompt token. English text takes about 4 bytes a token; the heaviest
 * common form is non-ASCII text that the client escapes (`\uXXXX`, Python's json.dumps default):
 * 6 bytes a character, and a token of Qwen's vocabulary holds 1.5 to 3 CJK characters, so 9 to 18
 * bytes a token. 32 is that worst case with headroom for message envelopes and tool schemas.
 */
export const JSON_BYTES_PER_TOKEN = 32;

/** Default request body limit (GATEWAY_MAX_BODY_BYTES): 262,144 tokens x 32 bytes = 8 MiB. */
export const MAX_BODY_BYTES_DEFAULT = LARGEST_CONTEXT_TOKENS * JSON_BYTES_PER_TOKEN;

export const VARIABLES: readonly VariableSpec[] = [
  // chain
  { name: 'NODE_RPC', group: 'chain', meaning: 'Chain RPC address, ending with a slash. Accepted for compatibility; shardgate does all its chain work over REST (DEVSHARD_CHAIN_REST / NODE_CHAIN_API), as devshardctl does.' },
  { name: 'CHAIN_ID', group: 'chain', default: 'shardgate-devnet', meaning: 'Chain id; escrow creation requests must name the same chain_id.', init: 'reference' },
  { name: 'NODE_BASE', group: 'chain', meaning: 'Public node address (governance model list). Unset with the devnet: the devnet address.' },
  { name: 'NODE_CHAIN_API', group: 'chain', meaning: 'Chain REST address (or DEVSHARD_CHAIN_REST): required by `shardgate serve`; only `serve --devnet` (npm start) runs without it, against the embedded devnet.' },
  { name: 'DEVSHARD_CHAIN_REST', group: 'chain', meaning: 'Chain REST address for queries. Default: NODE_CHAIN_API.' },
  { name: 'DEVSHARD_TX_QUERY_REST', group: 'chain', meaning: 'A chain REST address that indexes transactions: create and settle txs are looked up by hash there (`/cosmos/tx/v1beta1/txs/{hash}`) first, then at the chain REST address.' },
  { name: 'DEVSHARD_PUBLIC_API', group: 'chain', meaning: 'Public API address (default NODE_BASE): the epoch (index, height, PoC phase, set_new_validators) is read from its /v1/epochs/latest, as devshardctl\'s PoC gate does.' },
  { name: 'DEVSHARD_TX_GAS_LIMIT', group: 'chain', default: '500000', meaning: 'Gas limit of every transaction (create, settle). 500000 is the network\'s own gateway default (devshardctl: gonka common/chain/tx DefaultGasLimit); the spec\'s reference configuration lists 700000, which an operator may set to match it.', init: 'reference' },
  { name: 'DEVSHARD_TX_FEE_AMOUNT', group: 'chain', default: '1000000', meaning: 'Fixed fee of every transaction (create, settle) in DEVSHARD_TX_FEE_DENOM, as devshardctl.', init: 'reference' },
  { name: 'DEVSHARD_TX_FEE_DENOM', group: 'chain', default: 'ngonka', meaning: 'Denomination of the transaction fee.', init: 'reference' },
  // keys
  { name: 'DEVSHARD_PRIVATE_KEY', group: 'keys', secret: true, meaning: 'Creator key: 64 hex characters, no 0x prefix. A dedicated key, never a validator, participant or broker key.', init: 'generate' },
  { name: 'DEVSHARD_API_KEYS', group: 'keys', secret: true, meaning: 'Client API keys, comma-separated (spaces trimmed, empty entries ignored). Generated form: sk- plus 48 hex characters.', init: 'generate' },
  { name: 'DEVSHARD_ADMIN_API_KEY', group: 'keys', secret: true, meaning: 'Admin API key. Generated form: sk-admin- plus 48 hex characters. Unset: admin routes refuse every request.', init: 'generate' },
  { name: 'DEVSHARD_LOG_HMAC_KEY', group: 'keys', secret: true, meaning: 'Key of the event log\'s anchor: each start verifies the hash chain from the last verified position and records the new one with HMAC-SHA256 under this key, so a rewrite of the whole log (chain and anchor recomputed) is refused at the next start and by `shardgate verify`. Keep it outside the storage directory; changing it makes the next start refuse the log. Set for an existing log: run `shardgate verify --anchor` once (gateway stopped) to key its anchor. Unset: the anchor is a plain hash (docs/faults.md, "Tampered log at start").' },
  // mode
  { name: 'DEVSHARDS_JSON', group: 'mode', meaning: "Pool (multi-escrow) mode with these initial escrows: a JSON array of ids (numbers or numeric strings) or objects {\"id\": ..., \"model_id\"?: ...}. '[]' starts an empty pool. Unset: single-escrow mode." },
  { name: 'DEVSHARD_ESCROW_ID', group: 'mode', meaning: 'The escrow of single-escrow mode (required when DEVSHARDS_JSON is unset).' },
  { name: 'DEVSHARD_MODEL', group: 'mode', default: DEVNET_MODEL_DEFAULT, meaning: 'Model id served (single-escrow mode; the devnet serves it).', init: 'reference' },
  // server
  { name: 'GATEWAY_HOST', group: 'server', default: '127.0.0.1', meaning: 'Listen address. Loopback by default: put a reverse proxy in front for remote access.' },
  { name: 'DEVSHARD_PORT', group: 'server', default: '8080', meaning: 'Listen port.', init: 'reference' },
  { name: 'DEVSHARD_IMPORT_DIR', group: 'server', meaning: "The only directory `POST /v1/admin/devshards/import` may read devshardctl's escrow stores from (`storage_path`, checked after resolving symlinks and `..`; a relative storage_path is resolved from it); relative paths are resolved from the working directory. Unset: imports naming a storage_path are refused (400)." },
  { name: 'DEVSHARD_STORAGE_MODE', group: 'server', default: 'sqlite', meaning: 'Where the event log lives: `sqlite` (a file in DEVSHARD_STORAGE_DIR, the embedded default) or `postgres` (DATABASE_URL, or the PG* variables). Several gateway instances may share one PostgreSQL log: each escrow is served by one of them at a time (an escrow lease), one runs the background tasks (docs/scale-out.md).' },
  { name: 'DEVSHARD_LEASE_TTL_MS', group: 'server', default: '10000', meaning: 'With DEVSHARD_STORAGE_MODE=postgres: how long an instance\'s escrow and leader leases last without renewal (renewed every third of it). After a crash, the others take its escrows over once this has passed; a stopping instance (SIGTERM) hands them over at once.' },
  { name: 'DATABASE_URL', group: 'server', meaning: 'With DEVSHARD_STORAGE_MODE=postgres: the log database, `postgres://user:password@host:5432/db`. Unset: PGHOST, PGPORT, PGUSER, PGPASSWORD and PGDATABASE are used.', secret: true },
  { name: 'PGHOST', group: 'server', meaning: 'With DEVSHARD_STORAGE_MODE=postgres and no DATABASE_URL: the database host (or a socket directory).' },
  { name: 'PGPORT', group: 'server', meaning: 'With DEVSHARD_STORAGE_MODE=postgres and no DATABASE_URL: the database port (5432).' },
  { name: 'PGUSER', group: 'server', meaning: 'With DEVSHARD_STORAGE_MODE=postgres and no DATABASE_URL: the database user.' },
  { name: 'PGPASSWORD', group: 'server', meaning: 'With DEVSHARD_STORAGE_MODE=postgres and no DATABASE_URL: the database password.', secret: true },
  { name: 'PGDATABASE', group: 'server', meaning: 'With DEVSHARD_STORAGE_MODE=postgres and no DATABASE_URL: the database name.' },
  { name: 'DEVSHARD_STORAGE_DIR', group: 'server', default: '.devshardctl', meaning: 'State directory (event log); relative paths are resolved from the working directory. In the container: /root/.devshardctl.', init: 'reference' },
  { name: 'DEVSHARD_INSTANCE_NAME', group: 'server', default: 'devshardctl-multi', meaning: 'Instance (container) name, shown in logs and /v1/status.', init: 'reference' },
  { name: 'GATEWAY_STORAGE_LOW_BYTES', group: 'server', default: '1073741824', meaning: 'Free space on the storage directory\'s file system under which /v1/status shows `storage.low: true` (free bytes are also the metric shardgate_storage_free_bytes). A full disk makes appends fail (chat answers 503); the process keeps running. On a PostgreSQL log the disk is the database server\'s: watch it there (`storage.free_bytes` is null).' },
  { name: 'GATEWAY_MAX_CONNECTIONS', group: 'server', default: '4096', meaning: 'Open client connections the HTTP server accepts; more are closed at once (Node server.maxConnections).' },
  { name: 'GATEWAY_HEADERS_TIMEOUT_MS', group: 'server', default: '30000', meaning: 'A client must send its request headers within this long, else 408 and the connection is closed (Node headersTimeout). At most GATEWAY_REQUEST_RECEIVE_TIMEOUT_MS.' },
  { name: 'GATEWAY_REQUEST_RECEIVE_TIMEOUT_MS', group: 'server', default: '60000', meaning: 'A client must send its whole request (headers and body) within this long, else 408 (Node requestTimeout). Not the answer\'s time: see GATEWAY_REQUEST_TIMEOUT_MS.' },
  { name: 'GATEWAY_MAX_BODY_BYTES', group: 'server', default: String(MAX_BODY_BYTES_DEFAULT), meaning: `Largest request body accepted (chat and every other route except the devshard import, which takes 64 MiB); a larger one is answered 413 \`request_too_large\`, naming the limit and this variable. The default is the largest context of a served model (Qwen3-235B-A22B-Instruct-2507: ${LARGEST_CONTEXT_TOKENS.toLocaleString('en-US')} tokens) times ${JSON_BYTES_PER_TOKEN} JSON bytes a token (non-ASCII text sent \\u-escaped takes up to about 18), i.e. ${MAX_BODY_BYTES_DEFAULT / (1024 * 1024)} MiB.` },
  { name: 'GATEWAY_SLOW_CLIENT_MAX_UNSENT_BYTES', group: 'server', default: '65536', meaning: 'Bytes a response may hold for its client beyond what the OS socket takes; over it a stream stops reading the host and waits for the client (the responses\' high-water mark).' },
  { name: 'GATEWAY_SLOW_CLIENT_TIMEOUT_MS', group: 'server', default: '30000', meaning: 'A stream that waits this long on a client that does not take its bytes (unsent bytes over GATEWAY_SLOW_CLIENT_MAX_UNSENT_BYTES, or the complete answer not all taken) has its connection ended (logged 499, error_code slow_client). A chat request holds its concurrency slot until its answer left the gateway. 0 = never.' },
  { name: 'GATEWAY_SHUTDOWN_TIMEOUT_MS', group: 'server', default: '30000', meaning: 'On SIGTERM, how long in-flight requests may drain before the process exits.' },
  { name: 'LOG_LEVEL', group: 'server', default: 'info', meaning: 'pino log level: fatal, error, warn, info, debug, trace or silent.' },
  { name: 'LOG_FORMAT', group: 'server', meaning: 'Log lines as `json` or `pretty` (readable, keys redacted the same way). Unset: pretty on a terminal, JSON otherwise (containers, pipes). Read by `serve` from its process environment.' },
  // limits
  { name: 'GATEWAY_MAX_CONCURRENT_REQUESTS', group: 'limits', default: '512', meaning: 'Concurrent chat requests; more get 429 with Retry-After.', init: 'reference' },
  { name: 'GATEWAY_MAX_INPUT_TOKENS_IN_FLIGHT', group: 'limits', default: '0', meaning: 'Estimated prompt tokens in flight; more get 429. 0 = no limit.', init: 'reference' },
  { name: 'GATEWAY_DEFAULT_MAX_TOKENS', group: 'limits', default: '3072', meaning: 'max_tokens applied to requests without one: the default_request_max_tokens setting until POST /v1/admin/settings sets it (a change applies at the next start; recorded in the log). Clamped to the cap.', init: 'reference' },
  { name: 'GATEWAY_MAX_TOKENS_CAP', group: 'limits', default: '4096', meaning: 'Upper cap on max_tokens: the request_max_tokens_cap setting until POST /v1/admin/settings sets it (a change applies at the next start; recorded in the log).', init: 'reference' },
  { name: 'GATEWAY_STALL_TIMEOUT_MS', group: 'limits', default: '60000', meaning: 'A host stream silent this long is cancelled; what it delivered is billed.' },
  { name: 'GATEWAY_FINALIZE_DRAIN_MS', group: 'limits', default: '30000', meaning: 'Finalize first stops routing chat to the escrow and waits up to this long for its requests in flight to end, so their hosts\' Finish rides the finalize diffs; a request still in flight after it is billed by the log but not in the settlement (0: finalize at once; a settle then waits for them, 202 deferred).' },
  { name: 'GATEWAY_REQUEST_TIMEOUT_MS', group: 'limits', default: '300000', meaning: 'A non-stream chat whose whole answer has not arrived after this long fails with 504; the host is not billed beyond what it reported.' },
  // behaviour
  { name: 'DEVSHARD_POC_REQUEST_MODE', group: 'behaviour', default: 'relaxed', meaning: 'What chat does while the chain is in PoC (phases PoCGenerate to PoCValidateWindDown, or a blocking confirmation PoC), read from DEVSHARD_PUBLIC_API /v1/epochs/latest: off refuses it with 503 "devshard temporarily unavailable during PoC generation" (devshardctl\'s default), relaxed keeps serving (the reference value). strict is read as off.', init: 'reference' },
  { name: 'DEVSHARD_CAPACITY_AWARE_LIMITS', group: 'behaviour', default: 'on', meaning: 'Capacity-aware limits: on or off. Accepted for compatibility; no effect in shardgate: the spec does not say what these limits are; the limits that apply are GATEWAY_MAX_CONCURRENT_REQUESTS and GATEWAY_MAX_INPUT_TOKENS_IN_FLIGHT (off is warned about).', init: 'reference' },
  { name: 'GATEWAY_ROTATION_INTERVAL_MS', group: 'behaviour', default: '15000', meaning: 'Period of the escrow rotation task.' },
  { name: 'GATEWAY_BALANCE_CHECK_INTERVAL_MS', group: 'behaviour', default: '30000', meaning: 'Period of the escrow balance (depletion) check, and of the retries of drained settles.' },
  { name: 'DEVSHARD_PRUNE_WARN_BLOCKS', group: 'behaviour', default: '1000', meaning: 'Log escrow_prune_approaching once per unsettled escrow when it is this many blocks from the epoch the chain prunes it in (its epoch + 2: the whole deposit goes to its hosts). /v1/status and GET /v1/admin/devshards show prune_epoch and blocks_until_prune.' },
  { name: 'DEVSHARD_REQUIRE_HEIGHT_SEED', group: 'behaviour', default: 'true', meaning: 'v5 escrows: before a chat takes a nonce, the session\'s height seed (POST …/height-sync to every host; ok once half of them returned an Anchor) is waited on for at most 2 s, and chat answers 503 `height_seed_incomplete` (header X-Devshard-Error) while it is missed (30 s short of the quorum, or too many hosts declining). The reference gateway\'s gate, on by default there too. false: the seed runs, chat never waits.' },
  { name: 'GATEWAY_RECORD_BEFORE_LAST_BYTE', group: 'behaviour', default: 'true', meaning: 'A request\'s outcome (its bill) is committed to the event log before the last byte of its answer leaves (`[DONE]`, or the end of the JSON body), sharing commits with other answers: a client that got a whole answer always finds it in the log, even after a crash. Costs about one fsync of latency per answer at low concurrency (docs/benchmarks.md). false: the outcome is committed just after the answer (within 5 ms, group commit); a crash in between logs it as failed and the next start bills what the host served.' },
  { name: 'GATEWAY_HEARTBEAT_IDLE_MS', group: 'behaviour', default: '12000', meaning: 'v5 escrows: once a session has composed no diff for this long (and has a height floor), the gateway sends an idle heartbeat span as the reference gateway does: one payload-less diff per slot with a MsgHeartbeat, the first opening a forced turn, then one diff carrying the hosts\' acks. Its nonces are reserved and recorded like a chat\'s. 0: never.' },
  { name: 'GATEWAY_RECONCILE_INTERVAL_MS', group: 'behaviour', default: '5000', meaning: 'Period at which chain transactions whose outcome is still unknown are looked up by hash (and re-broadcast with the same bytes).' },
  // disabled
  { name: 'DEVSHARD_GATEWAY_DISABLED', group: 'disabled', default: 'false', meaning: 'Start disabled (non-admin routes answer 308). Bootstrap only: applied on the first start (the gateway database does not exist yet); afterwards use POST /v1/admin/settings.' },
  { name: 'DEVSHARD_GATEWAY_DISABLED_MESSAGE', group: 'disabled', meaning: 'Message of the disabled state (bootstrap only).' },
  { name: 'DEVSHARD_GATEWAY_DISABLED_NEW_URL', group: 'disabled', meaning: 'URL clients should use instead, sent as the 308 Location and body new_url (bootstrap only). Required when DEVSHARD_GATEWAY_DISABLED is on at the first start: the gateway refuses that start without it, as POST /v1/admin/settings refuses disabled.enabled without new_url.' },
  // network
  { name: 'NETWORK_UPSTREAM_URL', group: 'network', meaning: 'Send chat to this OpenAI-compatible base URL instead of devshard hosts (escrow accounting still applies).' },
  { name: 'NETWORK_UPSTREAM_KEY', group: 'network', secret: true, meaning: 'Bearer key for NETWORK_UPSTREAM_URL.' },
  { name: 'DEVSHARD_HOST_PROTOCOL', group: 'network', default: 'devshard', meaning: 'How chat reaches the hosts: devshard, the real devshard host protocol (per-escrow replica, signed diffs with catch-up, receipts checked against our state root, host txs from mempools; docs/protocol.md), the only one. `legacy` (an invented protocol no real host served) was removed and is refused. Ignored with NETWORK_UPSTREAM_URL.' },
  { name: 'DEVSHARD_PROTOCOL_VERSION', group: 'network', meaning: 'Devshard protocol version of an escrow whose create, register or import names none (`protocol_version`): v2, v3, v4, v4.1 or v5 (4.1 and V4.1 read alike). Unset: the newest of v2-v4.1 the chain approves (the newest when it approves any); v5 (height-sync) only when named here or by the escrow. Escrows already in the log keep theirs.' },
  { name: 'DEVSHARD_ROUTE_PREFIX', group: 'network', meaning: 'Route prefix of the devshard host protocol under each host\'s inference URL, for escrows that name none (`route_prefix`): /devshard/<version> as devshardctl\'s ResolveRoutePrefix accepts it, or /v1/devshard for v2 escrows. Unset: the version\'s own route. It implies the version when DEVSHARD_PROTOCOL_VERSION is unset.' },
  { name: 'DEVSHARD_STATE_ROOT_VERSION', group: 'network', meaning: 'State-root tag for escrows that name none (`state_root_version`): the stamp the hosts\' build hashes into every root. Unset: the version\'s name (v4.1 hosts hash "v4.1"). Set it only when your hosts were built with another stamp (59b1ee7e builds stamp "v2" by default).' },
  // devnet (read by the embedded devnet; listed here so they are documented in one place)
  { name: 'DEVNET_PORT', group: 'devnet', default: '26657', meaning: 'Port of the devnet node (`shardgate devnet`); 0 = ephemeral.' },
  { name: 'DEVNET_BLOCK_TIME_MS', group: 'devnet', default: '1000', meaning: 'Devnet block time.' },
  { name: 'DEVNET_EPOCH_BLOCKS', group: 'devnet', default: '600', meaning: 'Blocks per devnet epoch.' },
  { name: 'DEVNET_POC_BLOCKS', group: 'devnet', default: '60', meaning: 'Length of the devnet PoC window after each epoch boundary.' },
  { name: 'DEVNET_HOSTS', group: 'devnet', default: '3', meaning: 'Simulated hosts per escrow (slots 0..N-1). 0 is allowed with DEVNET_EXTERNAL_HOSTS (only external hosts).' },
  { name: 'DEVNET_EXTERNAL_HOSTS', group: 'devnet', meaning: 'Hosts the devnet does not run, as gonka1address@inference_url entries, comma-separated: listed as participants and given the escrow slots after the simulated hosts, in this order; the keeper checks their settlement signatures against their address (docs/devnet.md).' },
  { name: 'DEVNET_HOST_KEYS', group: 'devnet', secret: true, meaning: 'Private keys of the simulated hosts, 64 hex characters each, comma-separated: host i uses entry i (an empty entry or a missing one: the generated test key), so a process elsewhere holding that key can act as that slot. Never printed.' },
  { name: 'DEVNET_TOKEN_DELAY_MS', group: 'devnet', default: '5', meaning: 'Delay between streamed tokens of the simulated hosts.' },
  { name: 'DEVNET_HOST_VERSIONS', group: 'devnet', meaning: 'Devshard versions the simulated hosts serve, comma-separated, each under {inference_url}/devshard/<version> with that name as its sessions\' state-root tag (one session store per version, as behind versiond); another version\'s route answers 404 `version "<name>" not found`. Unset: every version the gateway speaks, and v5 (v2, v3, v4, v4.1, v5); a v5 host stamps from the latest block of the devnet chain and serves the seed and error-miss routes.' },
  { name: 'DEVNET_LEGACY_ROUTE', group: 'devnet', default: 'off', meaning: 'Keep v2\'s /v1/devshard route on the simulated hosts (tag "v2", the sessions of /devshard/v2), for old logs (on: 1/true/on/yes). Off: it answers 410 `{"error":"deprecated",…}` as the live hosts\' API does.' },
  { name: 'DEVNET_CREATORS', group: 'devnet', meaning: 'Creator keys or addresses allowlisted and funded at devnet genesis, comma-separated (DEVSHARD_PRIVATE_KEY is added by serve).' },
  { name: 'DEVNET_CREATOR_FUNDS', group: 'devnet', default: '10000000000000', meaning: 'Genesis funds per devnet creator, smallest coin unit.' },
  { name: 'DEVNET_MIN_AMOUNT', group: 'devnet', default: '1000000000', meaning: 'Devnet min_amount of an escrow deposit.' },
  { name: 'DEVNET_MAX_AMOUNT', group: 'devnet', default: '18446744073709551615', meaning: 'Devnet max_amount of an escrow deposit (default: the whole uint64 range).' },
  { name: 'DEVNET_MAX_ESCROWS_PER_EPOCH', group: 'devnet', default: '500000', meaning: 'Devnet max_escrows_per_epoch.' },
  { name: 'DEVNET_PRUNE_UNSETTLED', group: 'devnet', default: 'on', meaning: 'Prune unsettled escrows two epochs after theirs, splitting the deposit equally per unique slot address, as the real chain does (off: 0/false/off/no).' },
  { name: 'DEVNET_MAX_NONCE', group: 'devnet', default: '1000000', meaning: 'Devnet max_nonce.' },
  { name: 'DEVNET_TOKEN_PRICE', group: 'devnet', default: '1000', meaning: 'Devnet price of one token, smallest coin unit.' },
  { name: 'DEVNET_MODELS', group: 'devnet', meaning: 'Models the devnet serves, comma-separated. Default: DEVSHARD_MODEL.' },
  { name: 'DEVNET_STATE', group: 'devnet', meaning: 'File for the devnet state snapshot, with the simulated hosts\' applied diffs per escrow (a restart resumes their sessions); unset = memory only.' },
  { name: 'DEVNET_APPROVED_VERSIONS', group: 'devnet', meaning: "Names of the devnet chain's approved devshard versions (the store chain v0.2.16 serves at /productscience/inference/inference/devshard_approved_versions), comma-separated; the keeper refuses a settlement whose version is not listed. Unset: every version this gateway speaks. Set to an empty string: an empty list, which accepts any version, as on the chain." },
  // deployment only
  { name: 'DEVSHARD_STORAGE_HOST_DIR', group: 'deployment', default: '.devshardctl', meaning: 'Container deployments: host directory mounted at DEVSHARD_STORAGE_DIR. Not read by the process.' },
];

export const VARIABLE_NAMES: ReadonlySet<string> = new Set(VARIABLES.map((v) => v.name));
export const SECRET_VARIABLES: ReadonlySet<string> = new Set(VARIABLES.filter((v) => v.secret).map((v) => v.name));

/** The README's env table (markdown), generated from VARIABLES. */
export function renderEnvTable(): string {
  const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
  const rows = VARIABLES.map((v) => {
    const def = v.secret ? '(secret)' : v.default !== undefined ? `\`${v.default}\`` : '(unset)';
    return `| \`${v.name}\` | ${def} | ${cell(v.meaning)} |`;
  });
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n') + '\n';
}
