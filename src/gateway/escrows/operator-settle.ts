/**
 * The operator's settle (POST /v1/admin/devshards/{id}/settle), as devshardctl takes it: the
 * creator key from the body or an env variable, and a fee override of the settle tx.
 */
import type { KeySource } from '../../events/catalog.js';
import type { EventMetadata } from '../../events/envelope.js';
import type { GatewayContext } from '../context.js';
import { escrowOr404 } from './decide.js';
import { DEFAULT_KEY_ENV, holdRequestKey, oneKeyOf, type OperatorKey } from './operator-key.js';
import { settleEscrow, type SettleAnswer } from './settle.js';
import { operatorTxFee, type OperatorTxOptions } from './tx-options.js';

/** devshardctl's fields of a settle answer (gateway.go handleAdminSettleDevshard). */
interface DevshardctlSettleFields {
  id: string;
  /** devshardctl's escrow id, a number. */
  escrow_id: number;
  active: false;
  /** null while deferred (no tx yet). */
  tx_hash: string | null;
  /** The escrow's creator, who signs the settle. */
  settler: string | null;
}

/** A settle answer (settle.ts SettleAnswer), each of its kinds, with devshardctl's fields beside ours. */
type WithDevshardctlFields<A> = A extends unknown ? Omit<A, 'escrow_id' | 'tx_hash'> & DevshardctlSettleFields : never;
export type OperatorSettleAnswer = WithDevshardctlFields<SettleAnswer>;

/**
 * The key is `key.privateKey` (held in memory, never recorded), or env variable `key.keyEnv`, or
 * DEVSHARD_PRIVATE_KEY; `tx`: devshardctl's chain_id (checked) and fee/gas override of the settle tx.
 */
export async function operatorSettle(ctx: GatewayContext, id: string, key: OperatorKey, metadata: EventMetadata, tx: OperatorTxOptions): Promise<OperatorSettleAnswer> {
  oneKeyOf(key.privateKey, key.keyEnv);
  const txFee = operatorTxFee(ctx, tx);
  let keySource: KeySource = { kind: 'env', name: key.keyEnv ?? DEFAULT_KEY_ENV };
  if (key.privateKey !== undefined) {
    const s = escrowOr404(ctx, id);
    // A settled one answers its settlement again; no key is needed (or held) for that.
    if (!s.context.settled) await holdRequestKey(ctx, key.privateKey, id, s.context.creator, 'wrong_settler');
    keySource = { kind: 'request' };
  }
  return operatorSettleAnswer(ctx, id, await settleEscrow(ctx, id, { keySource, origin: 'admin', metadata, ...(txFee ? { txFee } : {}) }));
}

/**
 * A settle answer as the admin route gives it: devshardctl's fields (gateway.go
 * handleAdminSettleDevshard: `id`, `escrow_id` a number, `active` false, `tx_hash`, `settler`)
 * beside ours (`status`, `settled`, ...). The escrow stops taking new chat once settle is asked.
 */
export function operatorSettleAnswer(ctx: GatewayContext, escrowId: string, answer: SettleAnswer): OperatorSettleAnswer {
  const creator = ctx.engine.escrow(escrowId)?.context.creator ?? null;
  return { ...answer, id: escrowId, escrow_id: Number(escrowId), active: false as const, tx_hash: 'tx_hash' in answer ? answer.tx_hash : null, settler: creator };
}
