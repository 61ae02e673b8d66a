/**
 * Bodies of the operator (admin) routes as fastify JSON schemas. The lead wires them to routes;
 * shapes the spec leaves "not shown" are designed here and documented in docs/http.md.
 *
 * Amounts are integers in the smallest coin unit; since deposits can exceed 2^53 they are also
 * accepted as decimal strings. Use `parseAmount` to get a bigint.
 */
import { COSMOS_DENOM_PATTERN } from '../../chain/tx-fee.js';
import { ApiError } from '../api-error.js';

/** Positive integer amount, as a JSON number or a decimal string (for values above 2^53). */
export const amountSchema = {
  anyOf: [
    { type: 'integer', minimum: 1 },
    { type: 'string', pattern: '^[1-9][0-9]{0,39}$' },
  ],
} as const;

/** Numeric escrow id (uint64 on chain, so kept as a string in our records). */
export const escrowIdSchema = {
  anyOf: [
    { type: 'integer', minimum: 0 },
    { type: 'string', pattern: '^[0-9]{1,20}$' },
  ],
} as const;

/**
 * An environment variable name a body may give as `private_key_env`: upper-case letters, digits and
 * underscores, not starting with a digit (POSIX's portable names), at most 128 characters. Names
 * such as `__proto__` or `constructor` cannot match, and the lookup (keyring.ts `envValue`) reads
 * only the environment's own members anyway (issue 39; docs/faults.md, "Hostile env names").
 */
export const ENV_NAME_PATTERN = '^[A-Z_][A-Z0-9_]{0,127}$';

/**
 * A uint64 of devshardctl's bodies (`fee_amount`, `gas_limit`): a JSON number, or a decimal string
 * for values above 2^53 (JSON numbers lose precision there). The range 1..2^64−1 is checked by
 * `parseUint64` and the use case, so the answer names the rule.
 */
export const uint64Schema = {
  anyOf: [
    { type: 'integer', minimum: 0 },
    { type: 'string', pattern: '^[0-9]{1,20}$' },
  ],
} as const;

/**
 * devshardctl's transaction options (gateway.go adminCreateEscrowRequest, adminSettleEscrowRequest):
 * `chain_id` must be this gateway's chain; `fee_denom`, `fee_amount`, `gas_limit` replace the
 * configured DEVSHARD_TX_FEE_DENOM / DEVSHARD_TX_FEE_AMOUNT / DEVSHARD_TX_GAS_LIMIT for that one tx.
 */
const txOptionProperties = {
  // "" (and 0 below) mean "not given", as devshardctl's omitempty fields do.
  chain_id: { type: 'string', maxLength: 128 },
  fee_denom: { anyOf: [{ type: 'string', maxLength: 0 }, { type: 'string', pattern: COSMOS_DENOM_PATTERN }] },
  fee_amount: uint64Schema,
  gas_limit: uint64Schema,
} as const;

export interface TxOptionsBody {
  chain_id?: string;
  fee_denom?: string;
  fee_amount?: number | string;
  gas_limit?: number | string;
}

/** `{id}` path parameter of /devshard/{id}/... and /v1/admin/devshards/{id}/... */
export const escrowIdParamsSchema = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', pattern: '^[0-9]{1,20}$' } },
} as const;

/**
 * POST /v1/admin/escrows, devshardctl's body (gateway.go adminCreateEscrowRequest): chain_id
 * defaults to CHAIN_ID, `register` to true, the fee and gas of the create tx to the configured ones; the key is `private_key` or the env variable named by
 * `private_key_env` (DEVSHARD_PRIVATE_KEY when neither is given and it is set). `storage_path` is
 * accepted for devshardctl's scripts (every escrow is kept in our one event log). `protocol_version`
 * (v2, v3, v4, v4.1; "4.1" reads as "v4.1"), devshardctl's `route_prefix` (`/devshard/<version>`)
 * and `state_root_version` (the hosts' build stamp, default the version's name) choose the
 * escrow's protocol; unnamed, DEVSHARD_PROTOCOL_VERSION, else the newest the chain approves.
 */
export const createEscrowBodySchema = {
  type: 'object',
  required: ['amount', 'model_id'],
  additionalProperties: false,
  properties: {
    amount: amountSchema,
    model_id: { type: 'string', minLength: 1, maxLength: 256 },
    private_key: { type: 'string', pattern: '^[0-9a-fA-F]{64}$' },
    private_key_env: { type: 'string', pattern: ENV_NAME_PATTERN },
    ...txOptionProperties,
    register: { type: 'boolean' },
    storage_path: { type: 'string', maxLength: 4096 },
    protocol_version: { type: 'string', maxLength: 64 },
    route_prefix: { type: 'string', maxLength: 256 },
    state_root_version: { type: 'string', minLength: 1, maxLength: 128 },
  },
} as const;

export interface CreateEscrowBody extends TxOptionsBody {
  amount: number | string;
  model_id: string;
  private_key?: string;
  private_key_env?: string;
  register?: boolean;
  storage_path?: string;
  protocol_version?: string;
  route_prefix?: string;
  state_root_version?: string;
}

const rotationModelSchema = {
  type: 'object',
  required: ['model_id', 'temp_count', 'target_count', 'amount', 'private_key_env'],
  additionalProperties: false,
  properties: {
    model_id: { type: 'string', minLength: 1 },
    temp_count: { type: 'integer', minimum: 0, maximum: 100 },
    target_count: { type: 'integer', minimum: 0, maximum: 100 },
    amount: amountSchema,
    private_key_env: { type: 'string', pattern: ENV_NAME_PATTERN },
  },
} as const;

/**
 * POST /v1/admin/settings: a partial document, every member optional; objects are merged member by
 * member by the settings use case (arrays replace). Unknown members are refused (a typo must not
 * silently do nothing).
 */
export const settingsBodySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    default_request_max_tokens: { type: 'integer', minimum: 1 },
    request_max_tokens_cap: { type: 'integer', minimum: 1 },
    model_limits: {
      type: 'array',
      items: {
        type: 'object',
        required: ['model_id', 'access_mode'],
        additionalProperties: false,
        properties: {
          model_id: { type: 'string', minLength: 1 },
          // null removes the entry (the model is admin_only again, and no longer listed).
          access_mode: { type: ['string', 'null'], enum: ['admin_only', 'api_key', null] },
        },
      },
    },
    escrow_rotation: {
      type: 'object',
      additionalProperties: false,
      properties: {
        enabled: { type: 'boolean' },
        pre_poc_blocks: { type: 'integer', minimum: 0 },
        models: { type: 'array', items: rotationModelSchema },
      },
    },
    disabled: {
      type: 'object',
      additionalProperties: false,
      properties: {
        enabled: { type: 'boolean' },
        message: { type: 'string', maxLength: 2000 },
        // '' clears it; otherwise an absolute http(s) URL (it becomes the 308 Location).
        new_url: { type: 'string', maxLength: 2000, pattern: '^(https?://[^\\s]+)?$' },
      },
    },
  },
} as const;

export interface SettingsBody {
  default_request_max_tokens?: number;
  request_max_tokens_cap?: number;
  model_limits?: { model_id: string; access_mode: 'admin_only' | 'api_key' | null }[];
  escrow_rotation?: {
    enabled?: boolean;
    pre_poc_blocks?: number;
    models?: { model_id: string; temp_count: number; target_count: number; amount: number | string; private_key_env: string }[];
  };
  disabled?: { enabled?: boolean; message?: string; new_url?: string };
}

/**
 * POST /v1/admin/devshards/{id}/settle, devshardctl's body (gateway.go adminSettleEscrowRequest):
 * `private_key` (held in memory, never recorded) or `private_key_env`, DEVSHARD_PRIVATE_KEY when
 * neither; `chain_id`, `fee_denom`, `fee_amount`, `gas_limit` as for the create.
 */
export const settleBodySchema = {
  type: ['object', 'null'],
  additionalProperties: false,
  properties: {
    private_key: { type: 'string', pattern: '^[0-9a-fA-F]{64}$' },
    private_key_env: { type: 'string', pattern: ENV_NAME_PATTERN },
    ...txOptionProperties,
  },
} as const;

export interface SettleBody extends TxOptionsBody {
  private_key?: string;
  private_key_env?: string;
}

/**
 * POST /v1/admin/devshards: register an on-chain escrow for routing, or re-activate one. Ours
 * (`escrow_id`, `model_id`) or devshardctl's body (gateway.go adminDevshardRequest: `id`, `model`,
 * `private_key` or `private_key_env`, `storage_path`, `protocol_version`); one of `escrow_id`/`id` is required.
 */
export const registerBodySchema = {
  type: 'object',
  additionalProperties: false,
  anyOf: [{ required: ['escrow_id'] }, { required: ['id'] }],
  properties: {
    escrow_id: escrowIdSchema,
    id: escrowIdSchema,
    // Optional check: refuse when the chain says the escrow serves another model.
    model_id: { type: 'string', minLength: 1 },
    model: { type: 'string', minLength: 1 },
    // devshardctl's `private_key` (held in memory, never recorded) or `private_key_env`.
    private_key: { type: 'string', pattern: '^[0-9a-fA-F]{64}$' },
    private_key_env: { type: 'string', pattern: ENV_NAME_PATTERN },
    storage_path: { type: 'string', maxLength: 4096 },
    protocol_version: { type: 'string', maxLength: 64 },
    route_prefix: { type: 'string', maxLength: 256 },
    state_root_version: { type: 'string', minLength: 1, maxLength: 128 },
  },
} as const;

export interface RegisterBody {
  escrow_id?: string | number;
  id?: string | number;
  model_id?: string;
  model?: string;
  private_key?: string;
  private_key_env?: string;
  storage_path?: string;
  protocol_version?: string;
  route_prefix?: string;
  state_root_version?: string;
}

/** Decimal string or safe integer -> bigint; anything else is a 400 naming `param`. */
export function parseAmount(value: unknown, param = 'amount'): bigint {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value > 0) return BigInt(value);
  if (typeof value === 'string' && /^[1-9][0-9]{0,39}$/.test(value)) return BigInt(value);
  throw new ApiError(400, `Invalid value for '${param}': must be a positive integer (or a decimal string of one) in the smallest coin unit.`, { param, code: 'invalid_value' });
}

/**
 * A uint64 member (number or decimal string) -> bigint; undefined when absent. The range (1 to
 * 2^64−1) is the use case's rule; a JSON number above 2^53 is refused here, since its value was
 * already rounded when the body was parsed.
 */
export function parseUint64(value: unknown, param: string): bigint | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  if (typeof value === 'string' && /^[0-9]{1,20}$/.test(value)) return BigInt(value);
  throw new ApiError(
    400,
    `Invalid value for '${param}': must be an integer from 1 to 18446744073709551615 (uint64); send values above 9007199254740991 as a decimal string (a JSON number that large is rounded before it is read).`,
    { param, code: 'invalid_value' },
  );
}

/** The transaction options of a create or settle body, as the use case takes them. */
export function txOptionsOf(body: TxOptionsBody) {
  return {
    chainId: body.chain_id,
    feeDenom: body.fee_denom,
    feeAmount: parseUint64(body.fee_amount, 'fee_amount'),
    gasLimit: parseUint64(body.gas_limit, 'gas_limit'),
  };
}

/** Escrow id (number or numeric string) -> canonical decimal string. */
export function parseEscrowId(value: unknown, param = 'escrow_id'): string {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return String(value);
  if (typeof value === 'string' && /^[0-9]{1,20}$/.test(value)) return BigInt(value).toString();
  throw new ApiError(400, `Invalid value for '${param}': must be a numeric escrow id.`, { param, code: 'invalid_value' });
}
