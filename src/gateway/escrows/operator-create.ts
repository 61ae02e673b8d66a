/**
 * POST /v1/admin/escrows as a use case: the checks an operator's create must pass before anything
 * is signed (the key is a usable secp256k1 key, the chain id is ours, a fee override is one the
 * chain takes: tx-options.ts), then the write-ahead create
 * (create.ts, which pre-checks the chain's rules). A refused or failed create is a refusal; a create
 * whose outcome is not known yet comes back as pending (reconciled by hash).
 */
import { isPrivateKeyHex, PRIVATE_KEY_RULE } from '../../config/private-key.js';
import type { KeySource } from '../../events/catalog.js';
import type { EventMetadata } from '../../events/envelope.js';
import { logWhere } from '../../events/log-where.js';
import type { GatewayContext } from '../context.js';
import type { ProtocolChoice } from '../../protocol/versions.js';
import { refuse } from '../errors.js';
import { chainRefusal } from './chain-errors.js';
import { createEscrow, type CreateEscrowOutcome } from './create.js';
import { operatorCreateKey, type OperatorKey } from './operator-key.js';
import { operatorTxFee, type OperatorTxOptions } from './tx-options.js';

export interface OperatorCreate {
  privateKeyHex: string;
  /** How the key was given (recorded; never the key): the request's body unless said otherwise. */
  keySource?: KeySource;
  amount: bigint;
  model: string;
  /** Defaults to this gateway's chain. */
  chainId?: string | undefined;
  /** This tx's fee and gas (devshardctl's fee_denom, fee_amount, gas_limit); default the configured ones. */
  fee?: Omit<OperatorTxOptions, 'chainId'>;
  register: boolean;
  /** The body's protocol_version / route_prefix / state_root_version (escrow-protocol.ts). */
  protocol?: ProtocolChoice;
  metadata: EventMetadata;
}

export type OperatorCreateOutcome = Extract<CreateEscrowOutcome, { ok: true }> | { ok: false; pending: true; intentId: string; txHash?: string | undefined };

/** An operator's create as the body gives it: the key as `privateKey` or `keyEnv` (operator-key.ts). */
export type OperatorCreateCommand = Omit<OperatorCreate, 'privateKeyHex' | 'keySource'> & OperatorKey;

/** The create's outcome and devshardctl's `storage_path`. */
export type OperatorCreateAnswer = OperatorCreateOutcome & { storagePath: string };

/** The key is `privateKey`, or env variable `keyEnv`, or DEVSHARD_PRIVATE_KEY (operator-key.ts). */
export async function operatorCreateEscrow(ctx: GatewayContext, { privateKey, keyEnv, ...cmd }: OperatorCreateCommand): Promise<OperatorCreateAnswer> {
  return {
    ...(await createEscrowForOperator(ctx, { ...cmd, ...(await operatorCreateKey(ctx, privateKey, keyEnv)) })),
    // devshardctl's per-escrow state store; ours is the one event log every escrow is kept in.
    storagePath: logWhere(ctx.config),
  };
}

export async function createEscrowForOperator(ctx: GatewayContext, cmd: OperatorCreate): Promise<OperatorCreateOutcome> {
  // A zero key or one at/above the curve order has the 64-hex shape and used to throw in key
  // derivation (a 500). The message never contains the key.
  if (!isPrivateKeyHex(cmd.privateKeyHex)) throw refuse.invalid(`Invalid value for 'private_key': ${PRIVATE_KEY_RULE}.`, 'private_key');
  const txFee = operatorTxFee(ctx, { chainId: cmd.chainId, ...cmd.fee });
  // The chain's own rules (allowlist, [min_amount, max_amount], balance + fee) are pre-checked in
  // create.ts before anything is signed (src/chain/prechecks.ts).
  const r = await createEscrow(ctx, {
    privateKeyHex: cmd.privateKeyHex,
    keySource: cmd.keySource ?? { kind: 'request' },
    amount: cmd.amount,
    model: cmd.model,
    role: 'regular',
    register: cmd.register,
    origin: 'admin',
    metadata: cmd.metadata,
    ...(cmd.protocol ? { protocol: cmd.protocol } : {}),
    ...(txFee ? { txFee } : {}),
  });
  if (r.ok) return r;
  if (r.pending) return { ok: false, pending: true, intentId: r.intentId, txHash: r.txHash };
  throw chainRefusal(r.error, 'Escrow creation');
}
