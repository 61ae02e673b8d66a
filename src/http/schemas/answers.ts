/**
 * What the routes answer, as OpenAPI components: DOCUMENTATION ONLY. These schemas are placed in
 * /openapi.json (`components.schemas`) by src/http/openapi.ts and referenced from each operation's
 * `answers` (a documentation option of ours, read by the swagger transform). They are never a
 * fastify `schema.response`: fastify would then serialize the answer with fast-json-stringify, which
 * drops every property a schema does not list and coerces types, and our answers are supersets of
 * devshardctl's shapes with many more members than documented here.
 *
 * So each schema is partial on purpose: the main members with their JSON types, and
 * `additionalProperties: true` (more members are served; docs/http.md "devshardctl's shapes" lists them).
 */

const open = <P extends Record<string, unknown>>(properties: P, required: readonly (keyof P & string)[] = [], description?: string) => ({
  type: 'object',
  additionalProperties: true,
  ...(description ? { description } : {}),
  ...(required.length > 0 ? { required } : {}),
  properties,
});

const str = { type: 'string' } as const;
const int = { type: 'integer' } as const;
const bool = { type: 'boolean' } as const;
const nullableStr = { type: ['string', 'null'] } as const;
/** A coin amount in its smallest unit, as a decimal string (may exceed 2^53). */
const decimal = { type: 'string', pattern: '^[0-9]+$' } as const;
const array = (items: unknown) => ({ type: 'array', items }) as const;
/** A reference to a component (typed by `ref` below; untyped here, inside the components' own initializer). */
const r = (name: string): { $ref: string } => ({ $ref: `#/components/schemas/${name}` });

const usage = open({ prompt_tokens: int, completion_tokens: int, total_tokens: int }, ['prompt_tokens', 'completion_tokens', 'total_tokens']);
const toolCall = open({ id: str, type: str, function: open({ name: str, arguments: str }) });
const slot = open({ slot_id: int, host: str, url: str });
const limiter = open({ active_requests: int, input_tokens_in_flight: int, max_concurrent_requests: int, max_input_tokens_in_flight: int, rejected_total: int });
const capacity = open({ models: { type: 'object', additionalProperties: open({ active_devshards: int, routable_devshards: int, routable_devshard_ids: array(str), access_mode: str, routable: bool }) } });
const runtimeStatus = open(
  {
    id: str,
    escrow_id: str,
    model: str,
    active: bool,
    phase: str,
    nonce: int,
    balance: { type: 'number', description: "devshardctl's number; the exact amount is `balance_exact`" },
    balance_exact: decimal,
    active_requests: int,
    reserved_tokens: int,
    requests_blocked: bool,
    block_reason: str,
    routable: bool,
    protocol_version: str,
    route_prefix: str,
    state_root_version: str,
  },
  ['id', 'model', 'active', 'phase', 'nonce', 'active_requests'],
  "devshardctl's runtimeStatus with ours beside it",
);

export const ANSWER_SCHEMAS = {
  /** The one error body of every refusal (src/http/api-error.ts). */
  Error: {
    type: 'object',
    description: 'OpenAI-style error body (every error answer but the bodiless 404 of `/devshard//...`).',
    required: ['error'],
    properties: {
      error: {
        type: 'object',
        required: ['message', 'type', 'param', 'code'],
        properties: {
          message: str,
          type: { type: 'string', description: 'invalid_request_error, server_error, upstream_error, ...' },
          param: { ...nullableStr, description: 'the request member at fault, OpenAI-style (`messages[0].role`)' },
          code: { ...nullableStr, description: 'a stable machine-readable code (docs/http.md "Status codes")' },
        },
      },
    },
  },
  /** 308 while the kill switch is on (src/http/disabled-gate.ts). */
  Disabled: open({ status: { type: 'string', enum: ['disabled'] }, message: str, new_url: str }, ['status', 'message', 'new_url'], 'The gateway is disabled; `Location` is `new_url` (omitted when empty).'),
  ChatCompletion: open(
    {
      id: str,
      object: { type: 'string', enum: ['chat.completion'] },
      created: int,
      model: str,
      system_fingerprint: nullableStr,
      choices: array(
        open({
          index: int,
          message: open({ role: str, content: nullableStr, refusal: nullableStr, tool_calls: array(toolCall) }, ['role']),
          finish_reason: nullableStr,
          logprobs: { type: ['object', 'null'] },
        }, ['index', 'message']),
      ),
      usage,
    },
    ['id', 'object', 'created', 'model', 'choices'],
  ),
  ChatCompletionChunk: open(
    {
      id: str,
      object: { type: 'string', enum: ['chat.completion.chunk'] },
      created: int,
      model: str,
      system_fingerprint: nullableStr,
      choices: array(open({ index: int, delta: open({ role: str, content: nullableStr, refusal: nullableStr, tool_calls: array(toolCall) }), finish_reason: nullableStr }, ['index', 'delta'])),
      usage: { anyOf: [usage, { type: 'null' }] },
    },
    ['id', 'object', 'created', 'model', 'choices'],
    'One server-sent event `data:` frame of a streamed completion; the stream ends with `data: [DONE]`. An error after the headers were sent arrives as a last frame with the Error body.',
  ),
  ModelList: open({ object: { type: 'string', enum: ['list'] }, data: array(open({ id: str, object: { type: 'string', enum: ['model'] }, created: int, owned_by: str }, ['id', 'object', 'created', 'owned_by'])) }, ['object', 'data']),
  Status: open(
    {
      status: str,
      mode: str,
      instance: str,
      chain_id: str,
      runtimes: { type: 'integer', description: 'the number of per-model runtimes (the array is `model_runtimes`)' },
      model_runtimes: array(open({ model: str, mode: str, escrows: int, routable: int })),
      devshards: array(runtimeStatus),
      active_requests: int,
      limiter,
      capacity,
      escrow_id: { type: 'string', description: 'with exactly one devshard: proxy.go statusResponse at the top' },
      nonce: int,
      phase: str,
      balance: { type: 'number' },
      requests_blocked: bool,
      config: { type: 'object', additionalProperties: { type: 'number' } },
    },
    ['mode', 'runtimes', 'devshards', 'limiter', 'capacity'],
    "devshardctl's pooled status (gateway.go handlePooledStatus), plus its single-devshard fields when exactly one devshard is configured.",
  ),
  DevshardView: open(
    {
      escrow_id: str,
      model_id: str,
      state: str,
      role: str,
      routable: bool,
      expired: bool,
      creator: str,
      epoch_index: int,
      amount: decimal,
      spent: decimal,
      balance: decimal,
      reserved: decimal,
      usable_balance: decimal,
      nonce: int,
      in_flight: int,
      settled: bool,
      slots: array(slot),
      protocol_version: str,
      route_prefix: str,
      state_root_version: str,
      last_error: { type: ['object', 'string', 'null'] },
    },
    ['escrow_id', 'model_id', 'state', 'nonce', 'settled'],
    'One devshard (escrow) as the admin API shows it.',
  ),
  DevshardList: open(
    {
      object: { type: 'string', enum: ['list'] },
      data: array(r('DevshardView')),
      settings: r('Settings'),
      devshards: array(
        open({ id: str, private_key_env: nullableStr, private_key_source: { type: 'string', enum: ['env', 'request', 'not_held'] }, model: str, storage_path: str, protocol_version: str, active: bool, rotation_role: str, created_at: str, updated_at: str, runtime: runtimeStatus }, ['id', 'model', 'active']),
      ),
      limiter,
      capacity,
    },
    ['object', 'data', 'devshards'],
    "devshardctl's admin state (`settings`, `devshards`, `limiter`, `capacity`) beside our views (`object`, `data`). Never a private key.",
  ),
  /** The devshard view plus devshardctl's {id, active, model, storage_path} (register, re-activate). */
  DevshardRegistered: {
    allOf: [r('DevshardView'), open({ id: str, active: bool, model: str, storage_path: str }, ['id', 'active', 'model', 'storage_path'])],
  },
  DevshardImported: {
    description: "Our import: the devshard view. devshardctl's import body (`storage_path`): its answer with the `adopted` summary beside the view.",
    anyOf: [
      r('DevshardView'),
      open({ id: str, active: bool, model: str, storage_path: str, perf_path: str, accounting_records_imported: int, accounting_attempts_imported: int, adopted: { type: 'object', additionalProperties: true } }, ['id', 'active', 'model', 'storage_path']),
    ],
  },
  EscrowCreated: open(
    {
      escrow_id: { type: 'integer', description: "devshardctl's number (the string is `id`)" },
      id: str,
      tx_hash: str,
      creator: str,
      registered: bool,
      model: str,
      storage_path: str,
      height: int,
      epoch_index: int,
      model_id: str,
      amount: decimal,
      state: { type: 'string', enum: ['active', 'created'] },
      slots: array(slot),
    },
    ['escrow_id', 'id', 'tx_hash', 'creator', 'registered', 'model'],
  ),
  EscrowCreatePending: open(
    { status: { type: 'string', enum: ['pending'] }, intent_id: str, tx_hash: nullableStr, escrow_id: { type: 'null' }, registered: { type: 'boolean', enum: [false] }, message: str },
    ['status', 'intent_id', 'tx_hash', 'escrow_id', 'registered', 'message'],
    'The create tx was sent but not yet included: do not resend it (a second deposit would be locked); the gateway records the escrow when it lands.',
  ),
  SettlementDocument: open(
    {
      escrow_id: str,
      version: str,
      state_root: str,
      nonce: int,
      fees: int,
      rest_hash: str,
      host_stats: array(open({ slot_id: int, missed: int, invalid: int, cost: int, required_validations: int, completed_validations: int })),
      signatures: array(open({ slot_id: int, signature: str }, ['slot_id', 'signature'])),
    },
    ['escrow_id', 'state_root', 'nonce', 'signatures'],
    "The settlement file: the hosts' signatures over the final state, what the settle tx carries.",
  ),
  SettleAnswer: open(
    {
      status: str,
      id: str,
      escrow_id: { type: 'integer', description: "devshardctl's number (the string is `id`)" },
      active: { type: 'boolean', enum: [false] },
      settled: bool,
      tx_hash: nullableStr,
      settler: nullableStr,
      height: int,
      deposit: decimal,
      refund: decimal,
      total_payout: decimal,
      fees: decimal,
    },
    ['status', 'id', 'escrow_id', 'active'],
    '200 once settled on chain; 202 while it waits for requests in flight or for the tx to be included.',
  ),
  DevshardRemoved: open({ id: str, deleted: { type: 'boolean', enum: [true] }, escrow_id: str, removed: { type: 'boolean', enum: [true] } }, ['id', 'deleted']),
  Timeline: open({ escrow_id: str, total: int, entries: array(open({ position: int, time: str, event: str, actor: { type: ['object', 'string', 'null'] }, state: str, accepted: bool })) }, ['escrow_id']),
  ExportedEscrow: open(
    {
      escrow: r('DevshardView'),
      events: array(open({ position: int, stream_version: int, type: str, schema_version: int, data: { type: 'object' }, metadata: { type: 'object' }, time: str, prev_hash: str, hash: str }, ['position', 'type', 'data', 'hash'])),
      devshard_session: open({ diffs: array({ type: 'object' }), host_txs: array({ type: 'object' }) }),
      exported_at: str,
      source: str,
    },
    ['escrow', 'events'],
    'What POST /v1/admin/devshards/import takes back, unchanged.',
  ),
  Settings: open(
    {
      default_request_max_tokens: int,
      request_max_tokens_cap: int,
      model_limits: array(open({ model_id: str, access_mode: { type: 'string', enum: ['admin_only', 'api_key'] } })),
      disabled: open({ enabled: bool, message: str, new_url: str }),
      escrow_rotation: open({ enabled: bool, pre_poc_blocks: int, models: array(open({ model_id: str, temp_count: int, target_count: int, amount: { type: ['string', 'integer'] }, private_key_env: str })) }),
    },
    ['default_request_max_tokens', 'request_max_tokens_cap', 'model_limits', 'disabled', 'escrow_rotation'],
    'The effective settings.',
  ),
  RotationDebug: open(
    {
      enabled: bool,
      chain: open({ block_height: int, epoch_index: int, next_boundary_height: int, blocks_until_boundary: int, poc_active: bool, epoch_switch_block_height: int, blocks_to_epoch_switch: int }),
      settings: { type: 'object', additionalProperties: true },
      history: array({ type: 'object' }),
      latest: { type: 'array', items: { type: 'object' }, description: "devshardctl's GatewayRotationStatus list, newest first" },
      latest_by_model: { type: 'object', additionalProperties: { type: 'object' } },
    },
    ['enabled', 'chain', 'latest'],
  ),
} as const;

export type AnswerSchemaName = keyof typeof ANSWER_SCHEMAS;

/** A reference to one of these components, as /openapi.json spells it. */
export const ref = (name: AnswerSchemaName): { $ref: string } => r(name);
