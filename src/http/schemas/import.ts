/**
 * POST /v1/admin/devshards/import takes exactly what GET /v1/admin/devshards/{id}/export answers on
 * the other gateway (src/gateway/escrows/transfer.ts): the escrow's view (imported inactive, so
 * `active` is false or absent), every event of its stream as stored there, its devshard session
 * (diffs and pending host txs) and the export's provenance. Each event's data is checked against
 * the catalog's schema for its type, so a bad member is a 400 naming it (`events[3].data.cost`)
 * before anything is folded.
 */
import { amountDataSchema, ESCROW_STREAM_DATA_SCHEMAS, ESCROW_STREAM_EVENT_TYPES } from '../../events/catalog/escrow-data-schemas.js';
import { SCHEMA_VERSIONS } from '../../events/catalog.js';
import { ENV_NAME_PATTERN, escrowIdSchema } from './admin.js';

/**
 * An export holds the escrow's whole stream, about 1.3 KB per request served (its start and end,
 * with metadata and hashes), and its session's diffs, under 1 KB per nonce (a start, the previous
 * request's confirm and finish, root and signature): some 45 MB at the routing stop (19,800
 * nonces). Other routes keep the 1 MiB default.
 */
export const IMPORT_BODY_LIMIT = 64 * 1024 * 1024;

const nullable = (type: string) => ({ type: [type, 'null'] }) as const;
const hex64 = { type: 'string', pattern: '^[0-9a-f]{64}$' } as const;

/** The devshard view (lifecycle.ts devshardView) plus `active: false`. */
const exportedEscrowSchema = {
  type: 'object',
  required: ['escrow_id'],
  additionalProperties: false,
  properties: {
    escrow_id: escrowIdSchema,
    model_id: nullable('string'),
    state: { type: 'string' },
    role: { type: 'string', enum: ['regular', 'temporary'] },
    routable: { type: 'boolean' },
    expired: { type: 'boolean' },
    // A settled escrow's view carries the chain's numbers; such an export is refused further on (settle_under_way).
    chain_settlement: { type: ['object', 'null'] },
    creator: nullable('string'),
    epoch_index: nullable('integer'),
    amount: amountDataSchema,
    // Optional cross-checks: when given they must equal what the events fold to.
    spent: amountDataSchema,
    balance: amountDataSchema,
    reserved: amountDataSchema,
    usable_balance: amountDataSchema,
    nonce: { type: 'integer', minimum: 0 },
    in_flight: { type: 'integer', minimum: 0 },
    settled: { type: 'boolean' },
    slots: { type: 'array', items: { type: 'object' } },
    last_error: nullable('string'),
    // A drained settle's retry at the source; an escrow whose settle is under way is refused (409).
    settle_retry: {
      type: ['object', 'null'],
      additionalProperties: false,
      properties: { failed_attempts: { type: 'integer', minimum: 1 }, retry_at_height: { type: 'integer', minimum: 0 } },
    },
    active: { type: 'boolean', const: false },
    // The escrow's protocol as the source shows it; the import takes it from the events (events[0].data.protocol).
    protocol_version: { type: 'string', maxLength: 64 },
    route_prefix: { type: 'string', maxLength: 256 },
    state_root_version: { type: 'string', maxLength: 128 },
  },
} as const;

/** One stored event as exported; `then` picks the data schema and schema version of its type. */
const exportedEventSchema = {
  type: 'object',
  required: ['position', 'stream_version', 'type', 'schema_version', 'data', 'metadata', 'time', 'prev_hash', 'hash'],
  additionalProperties: false,
  properties: {
    position: { type: 'integer', minimum: 1 },
    stream_version: { type: 'integer', minimum: 0 },
    type: { type: 'string', enum: ESCROW_STREAM_EVENT_TYPES },
    schema_version: { type: 'integer', minimum: 1 },
    data: { type: 'object' },
    metadata: { type: 'object' },
    time: { type: 'string', minLength: 1, maxLength: 64 },
    // "" before position 1 of the source's log.
    prev_hash: { type: 'string', pattern: '^([0-9a-f]{64})?$' },
    hash: hex64,
  },
  allOf: ESCROW_STREAM_EVENT_TYPES.map((type) => ({
    if: { required: ['type'], properties: { type: { const: type } } },
    then: { properties: { schema_version: { const: SCHEMA_VERSIONS[type] }, data: ESCROW_STREAM_DATA_SCHEMAS[type] } },
  })),
} as const;

const base64 = { type: 'string', maxLength: 1024 * 1024, pattern: '^[A-Za-z0-9+/]*={0,2}$' } as const;
const decimal = { type: 'string', pattern: '^[1-9][0-9]{0,19}$' } as const;

/** DevshardDiffSent data as stored (src/events/catalog/devshard.ts); replay checks what it means. */
const exportedDiffSchema = {
  type: 'object',
  required: ['escrowId', 'nonce', 'txs', 'postStateRoot', 'userSig', 'warmKeyBindings'],
  additionalProperties: false,
  properties: {
    escrowId: { type: 'string' },
    nonce: decimal,
    txs: base64,
    postStateRoot: base64,
    userSig: base64,
    warmKeyBindings: {
      type: 'array',
      items: { type: 'object', required: ['slot', 'warm'], additionalProperties: false, properties: { slot: { type: 'integer', minimum: 0 }, warm: { type: 'string', minLength: 1, maxLength: 256 } } },
    },
  },
} as const;

/** DevshardHostTxsReceived data as stored: a host's URL and the txs (proto bytes, base64). */
const exportedHostTxsSchema = {
  type: 'object',
  required: ['escrowId', 'host', 'txs'],
  additionalProperties: false,
  properties: { escrowId: { type: 'string' }, host: { type: 'string', maxLength: 4096 }, txs: { type: 'array', items: base64 } },
} as const;

/**
 * The escrow's devshard session at the source: every diff sent (nonce order) and the host txs no
 * diff carried yet. Plain data, not hashed log rows: the import replays the diffs against the
 * chain's facts (user signatures, roots), which proves more than a hash anyone can recompute.
 */
const exportedSessionSchema = {
  type: 'object',
  required: ['diffs'],
  additionalProperties: false,
  properties: {
    diffs: { type: 'array', items: exportedDiffSchema },
    host_txs: { type: 'array', items: exportedHostTxsSchema },
  },
} as const;

/**
 * devshardctl's import body (gateway.go adminImportDevshardRequest): the id, the `storage_path` of
 * its escrow state store, the creator key (`private_key_env` or `private_key`), and optionally the
 * model, the `protocol_version` (with devshardctl's `route_prefix` and our `state_root_version`:
 * escrow-protocol.ts), `active` (default false) and `perf_path` (accepted; its
 * accounting records are not imported).
 */
export const devshardctlImportBodySchema = {
  type: 'object',
  required: ['id', 'storage_path'],
  additionalProperties: false,
  properties: {
    id: escrowIdSchema,
    storage_path: { type: 'string', minLength: 1, maxLength: 4096 },
    private_key_env: { type: 'string', pattern: ENV_NAME_PATTERN },
    private_key: { type: 'string', pattern: '^[0-9a-fA-F]{64}$' },
    model: { type: 'string', minLength: 1, maxLength: 256 },
    protocol_version: { type: 'string', minLength: 1, maxLength: 64 },
    route_prefix: { type: 'string', maxLength: 256 },
    state_root_version: { type: 'string', minLength: 1, maxLength: 128 },
    active: { type: 'boolean' },
    perf_path: { type: 'string', maxLength: 4096 },
  },
} as const;

export const exportImportBodySchema = {
  type: 'object',
  required: ['escrow', 'events'],
  additionalProperties: false,
  properties: {
    escrow: exportedEscrowSchema,
    events: { type: 'array', minItems: 1, items: exportedEventSchema },
    devshard_session: exportedSessionSchema,
    exported_at: { type: 'string', format: 'date-time' },
    source: { type: 'string', minLength: 1, maxLength: 256 },
  },
} as const;

/** Either body: a `storage_path` makes it devshardctl's (migration), else it is our export. */
export const importBodySchema = {
  if: { type: 'object', required: ['storage_path'] },
  then: devshardctlImportBodySchema,
  else: exportImportBodySchema,
} as const;
