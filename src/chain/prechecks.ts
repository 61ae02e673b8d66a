/**
 * Rules the chain enforces that the gateway checks **before** it signs a tx, so no fee is spent on a
 * tx the chain must refuse. Each refusal names the rule (the chain's own text where it has one) and
 * the remedy. Sources (gonka 8a35022): k/params.go IsAllowedEscrowCreator (an empty allowlist is
 * permissive), k/msg_server_create_devshard_escrow.go (amount range); k/devshard_settlement.go
 * `validateDevshardSettlementVersionApproved` (zpoken/gonka@ef1a5efd, chain v0.2.16: the approved
 * versions' store; an empty list accepts any version). The per-epoch limit is not exposed as a count
 * by any route, so it is left to the chain's text (`epoch %d already has %d escrows (max %d)`).
 */
import { DEVSHARD_TEXT } from './devshard-errors.js';
import { ChainError, type EscrowParams } from './port.js';

const refuse = (kind: ConstructorParameters<typeof ChainError>[0], message: string) => new ChainError(kind, message, { precheck: true });

export function createRefusal(
  p: EscrowParams,
  r: { creator: string; amount: bigint; balance: bigint; fee?: { amount: bigint; denom: string }; denom: string },
): ChainError | undefined {
  if (p.allowedCreatorAddresses.length > 0 && !p.allowedCreatorAddresses.includes(r.creator)) {
    return refuse('not_allowlisted', `${r.creator} is not on the chain's devshard_escrow_params.allowed_creator_addresses, so the chain refuses its escrows. Use an allowlisted creator key, or have governance add this address.`);
  }
  if (r.amount < p.minAmount || r.amount > p.maxAmount) {
    return refuse('amount_out_of_range', `${DEVSHARD_TEXT.amountOutOfRange(r.amount, p.minAmount, p.maxAmount)} (devshard_escrow_params min_amount/max_amount). Choose an amount in that range.`);
  }
  const fee = r.fee && r.fee.denom === r.denom ? r.fee.amount : 0n;
  if (r.balance < r.amount + fee) {
    return refuse('insufficient_funds', `${r.creator} holds ${r.balance}${r.denom}; the deposit ${r.amount} plus the transaction fee ${fee} needs ${r.amount + fee}${r.denom}. Fund the account or lower the amount.`);
  }
  return undefined;
}

export function settleRefusal(p: EscrowParams, r: { settler: string; version: string }): ChainError | undefined {
  if (p.allowedCreatorAddresses.length > 0 && !p.allowedCreatorAddresses.includes(r.settler)) {
    return refuse('not_allowlisted', `${r.settler} is not on devshard_escrow_params.allowed_creator_addresses, which the chain also requires of the settler. Have governance add this address back; until then the escrow cannot be settled.`);
  }
  return versionRefusal(p.approvedVersions, r.version);
}

/**
 * The keeper's approved-versions rule, before any tx is signed: a settlement whose version tag is
 * not listed is refused (with the keeper's text); an empty list accepts any version. At create, an
 * escrow opened in an unlisted version could never be settled (and the chain pays its whole deposit
 * to the hosts when it prunes it), so it is refused then too.
 */
export function versionRefusal(approved: readonly string[], version: string): ChainError | undefined {
  if (approved.length === 0 || approved.includes(version)) return undefined;
  return refuse(
    'version_not_approved',
    `${DEVSHARD_TEXT.versionNotApproved(version)} (listed: ${approved.join(', ')}), so the chain would refuse its settlement. ` +
      `Use one of the listed versions for a new escrow, or wait until governance approves ${JSON.stringify(version)} (an escrow already open in it settles once it is, within its settle window). ` +
      'Refused before signing: no fee was spent.',
  );
}

/**
 * The fee of a tx that carries no deposit (settle): the signer must hold it in the fee's denom, or
 * the chain's ante handler refuses the tx (x/auth DeductFees: insufficient funds).
 */
export function feeRefusal(r: { payer: string; balance: bigint; fee: { amount: bigint; denom: string } }): ChainError | undefined {
  if (r.balance >= r.fee.amount) return undefined;
  return refuse(
    'insufficient_funds',
    `${r.payer} holds ${r.balance}${r.fee.denom}; the transaction fee is ${r.fee.amount}${r.fee.denom}. Fund the account, or send a fee_amount it can pay.`,
  );
}
