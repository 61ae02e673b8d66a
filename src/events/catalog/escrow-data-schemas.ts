/**
 * JSON schemas of the data of every `escrow-<id>` stream event, mirroring the types in escrow.ts
 * (keyed by EscrowStreamEventType, so a new event type without a schema does not compile). They
 * check data that did not come from this gateway's own commands: the events of an imported export.
 *
 * Every member the type requires is required, with its type; amounts are decimal strings, counters
 * non-negative integers. Extra members are tolerated: the fold never reads them, and the exported
 * hashes cover them.
 */
import type { EscrowStreamEventType } from './escrow.js';

/** Decimal string of a non-negative amount in the smallest coin unit (catalog/common.ts `Amount`). */
export const amountDataSchema = { type: 'string', pattern: '^(0|[1-9][0-9]{0,39})$' } as const;

const count = { type: 'integer', minimum: 0 } as const;
const text = { type: 'string' } as const;
const role = { type: 'string', enum: ['regular', 'temporary'] } as const;
const origin = { type: 'string', enum: ['admin', 'rotation', 'depletion'] } as const;
const replacementReason = { type: 'string', enum: ['depleted', 'routing_stop', 'exhausted'] } as const;
/** A drained settle's attempt number (1 = the first): it schedules the escrow's retries. */
const attempt = { type: 'integer', minimum: 1 } as const;

/** An object schema requiring every member but the `optional` ones. */
function shape(properties: Record<string, object>, optional: readonly string[] = []) {
  return { type: 'object', required: Object.keys(properties).filter((k) => !optional.includes(k)), properties } as const;
}

const slots = { type: 'array', items: shape({ slotId: count, host: text, url: text }) } as const;
const protocol = shape({ version: text, route: text, tag: text });
const usage = shape({ promptTokens: count, completionTokens: count, totalTokens: count });
const keySource = { type: 'object', required: ['kind'], properties: { kind: { type: 'string', enum: ['env', 'request'] }, name: text } } as const;
const chainError = shape({ kind: text, message: text, code: { type: 'integer' }, codespace: text, rawLog: text, txHash: text }, ['code', 'codespace', 'rawLog', 'txHash']);
const settlement = shape({
  escrowId: text,
  nonce: count,
  stateRoot: text,
  restHash: text,
  hostStats: { type: 'array', items: shape({ slotId: count, missed: count, invalid: count, cost: amountDataSchema, requests: count }) },
  signatures: { type: 'array', items: shape({ slotId: count, signature: text }) },
  fees: amountDataSchema,
  version: count,
  stateRootVersion: text,
}, ['stateRootVersion']);

/** The data of one request's start or end (alone, or as an entry of InferencesRecorded). */
const REQUEST_DATA = {
  InferenceStarted: shape({ requestId: text, nonce: count, clientKeyId: { type: ['string', 'null'] }, reservedCost: amountDataSchema, inputTokens: count, maxTokens: count }),
  InferenceFinished: shape({ requestId: text, nonce: count, usage, cost: amountDataSchema }),
  InferenceFailed: shape({ requestId: text, nonce: count, reason: text, usage, cost: amountDataSchema }),
} as const;

export const ESCROW_STREAM_DATA_SCHEMAS: { readonly [K in EscrowStreamEventType]: object } = {
  EscrowCreated: shape(
    { escrowId: text, intentId: text, txHash: text, height: count, epoch: count, creator: text, amount: amountDataSchema, model: text, role, slots, protocol },
    ['intentId', 'protocol'],
  ),
  EscrowRegistered: shape({ escrowId: text, model: text }),
  EscrowImported: shape(
    {
      escrowId: text,
      model: text,
      creator: text,
      amount: amountDataSchema,
      epoch: count,
      role,
      nonce: count,
      spent: amountDataSchema,
      slots,
      active: { const: false },
      hostStats: { type: 'array', items: shape({ slotId: count, cost: amountDataSchema, requests: count }) },
      provenance: shape({ source: text, exportedAt: text, lastPosition: count, lastHash: text }, ['source', 'exportedAt']),
      adopted: shape({
        from: { const: 'devshardctl' },
        storagePath: text,
        diffs: count,
        lastNonce: count,
        stateRoot: text,
        balance: amountDataSchema,
        fees: amountDataSchema,
        protocolVersion: text,
        sessionStatus: text,
        openInferences: count,
      }),
      protocol,
    },
    ['hostStats', 'provenance', 'adopted', 'protocol'],
  ),
  EscrowActivated: shape({ escrowId: text }),
  NoncesReserved: shape({ upTo: count }),
  NoncesSkipped: shape({ from: count, upTo: count, reason: text }),
  NoncesReleased: shape({ upTo: count }),
  UsageRecovered: shape({ slotId: count, cost: amountDataSchema, reason: text, inferenceId: count }, ['inferenceId']),
  ...REQUEST_DATA,
  InferencesRecorded: shape({
    entries: {
      type: 'array',
      minItems: 1,
      items: {
        ...shape({ data: { type: 'object' }, type: { type: 'string', enum: Object.keys(REQUEST_DATA) } }),
        // `then` per type (not oneOf), so an error names the member of the entry's own type.
        allOf: (Object.keys(REQUEST_DATA) as (keyof typeof REQUEST_DATA)[]).map((type) => ({
          if: { required: ['type'], properties: { type: { const: type } } },
          then: { properties: { data: REQUEST_DATA[type] } },
        })),
      },
    },
  }),
  EscrowDepleted: shape({ balance: amountDataSchema, threshold: amountDataSchema }),
  EscrowRoutingStopped: shape({ nonce: count, routingStop: count }),
  EscrowFinalized: shape({ settlement }),
  EscrowSettleRequested: shape(
    { txHash: text, keySource, txBytes: text, origin, attempt, height: count, retriedBy: { type: 'string', enum: ['rotation', 'depletion'] }, reason: replacementReason },
    ['txBytes', 'attempt', 'height', 'retriedBy', 'reason'],
  ),
  EscrowSettleDeferred: shape(
    { inFlight: count, origin, keySource, txFee: shape({ denom: text, amount: amountDataSchema, gasLimit: amountDataSchema }, ['denom', 'amount', 'gasLimit']) },
    ['keySource', 'txFee'],
  ),
  EscrowSettled: shape({ txHash: text, height: count, refund: amountDataSchema, totalPayout: amountDataSchema, fees: amountDataSchema }, ['totalPayout', 'fees']),
  EscrowSettleFailed: shape(
    { reason: text, error: chainError, txHash: text, attempt, height: count, retryAtHeight: count, windowClosed: { type: 'boolean' } },
    ['error', 'txHash', 'attempt', 'height', 'retryAtHeight', 'windowClosed'],
  ),
  EscrowDeactivated: shape({ reason: text }, ['reason']),
  EscrowRemoved: shape({}),
};

/** The event types of an escrow stream, in catalog order. */
export const ESCROW_STREAM_EVENT_TYPES = Object.keys(ESCROW_STREAM_DATA_SCHEMAS) as EscrowStreamEventType[];
