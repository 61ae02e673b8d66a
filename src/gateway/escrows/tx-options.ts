/**
 * The transaction options of devshardctl's admin bodies (gateway.go adminCreateEscrowRequest,
 * adminSettleEscrowRequest): `chain_id`, `fee_denom`, `fee_amount`, `gas_limit`. devshardctl signs
 * with them for that one tx (newGatewayRESTChainTxClient: each given one replaces
 * DEVSHARD_CHAIN_ID / DEVSHARD_TX_FEE_DENOM / DEVSHARD_TX_FEE_AMOUNT / DEVSHARD_TX_GAS_LIMIT).
 * Here the fee and gas go into the tx's AuthInfo the same way; the chain id is checked, not used:
 * this gateway talks to one chain, and a tx signed for another would only be refused by it.
 */
import { DENOM } from '../../chain/keys.js';
import type { TxFeeOverride } from '../../chain/port.js';
import { isCosmosDenom, isPositiveUint64 } from '../../chain/tx-fee.js';
import type { GatewayContext } from '../context.js';
import { clip, refuse } from '../errors.js';

export interface OperatorTxOptions {
  chainId?: string | undefined;
  feeDenom?: string | undefined;
  feeAmount?: bigint | undefined;
  gasLimit?: bigint | undefined;
}

/** The denoms this gateway's chain takes fees in: ngonka (the devnet's ante handler and gonka's), and the configured fee denom. */
export function acceptedFeeDenoms(ctx: GatewayContext): string[] {
  const configured = ctx.chain.txFee?.().denom;
  return configured && configured !== DENOM ? [DENOM, configured] : [DENOM];
}

/**
 * Checks the options before anything is read from the chain or signed, and gives the fee override
 * for the tx (undefined when none is given). Every refusal is a 400 naming the rule and the remedy.
 */
export function operatorTxFee(ctx: GatewayContext, given: OperatorTxOptions): TxFeeOverride | undefined {
  // As devshardctl's omitempty fields: "" and 0 mean "not given" (the configured value), so scripts
  // that template every field keep working.
  const o: OperatorTxOptions = {
    chainId: given.chainId === '' ? undefined : given.chainId,
    feeDenom: given.feeDenom === '' ? undefined : given.feeDenom,
    feeAmount: given.feeAmount === 0n ? undefined : given.feeAmount,
    gasLimit: given.gasLimit === 0n ? undefined : given.gasLimit,
  };
  const ours = ctx.config.chain.chainId;
  if (o.chainId !== undefined && o.chainId !== ours) {
    throw refuse.invalid(
      `chain_id '${clip(o.chainId, 128)}' is not this gateway's chain ('${ours}'): a transaction signed for another chain is refused by this one. Send chain_id '${ours}', or leave it out.`,
      'chain_id',
      'wrong_chain_id',
    );
  }
  if (o.feeDenom !== undefined) {
    if (!isCosmosDenom(o.feeDenom)) {
      throw refuse.invalid(
        `fee_denom '${clip(o.feeDenom, 128)}' is not a Cosmos denom (a letter, then 2 to 127 letters, digits or / : . _ -). Send '${DENOM}', or leave it out for the configured fee denom.`,
        'fee_denom',
        'invalid_fee_denom',
      );
    }
    const accepted = acceptedFeeDenoms(ctx);
    if (!accepted.includes(o.feeDenom)) {
      throw refuse.invalid(
        `fee_denom '${o.feeDenom}' is not a denom this chain takes fees in (${accepted.join(', ')}); the node would refuse the transaction. Send '${accepted[0]}', or leave it out.`,
        'fee_denom',
        'fee_denom_not_accepted',
      );
    }
  }
  for (const [param, value] of [
    ['fee_amount', o.feeAmount],
    ['gas_limit', o.gasLimit],
  ] as const) {
    if (value !== undefined && !isPositiveUint64(value)) {
      throw refuse.invalid(`${param} must be an integer from 1 to 18446744073709551615 (uint64); leave it out for the configured value.`, param, `invalid_${param}`);
    }
  }
  if (o.feeDenom === undefined && o.feeAmount === undefined && o.gasLimit === undefined) return undefined;
  return {
    ...(o.feeDenom !== undefined ? { denom: o.feeDenom } : {}),
    ...(o.feeAmount !== undefined ? { amount: o.feeAmount } : {}),
    ...(o.gasLimit !== undefined ? { gasLimit: o.gasLimit } : {}),
  };
}
