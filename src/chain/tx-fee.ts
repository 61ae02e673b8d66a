/**
 * What a per-transaction fee override may hold. devshardctl's admin bodies carry `fee_denom`,
 * `fee_amount` and `gas_limit` (uint64) for one create or settle (gateway.go
 * adminCreateEscrowRequest/adminSettleEscrowRequest → newGatewayRESTChainTxClient); the same ranges
 * hold here, and the denom must be one the Cosmos SDK can parse (types/coin.go reDnmString).
 */

/** The Cosmos SDK's denom rule: a letter, then 2 to 127 of letters, digits, `/ : . _ -`. */
export const COSMOS_DENOM_PATTERN = '^[a-zA-Z][a-zA-Z0-9/:._-]{2,127}$';

export const UINT64_MAX = (1n << 64n) - 1n;

export const isCosmosDenom = (denom: string): boolean => new RegExp(COSMOS_DENOM_PATTERN).test(denom);

/** 1 ≤ value ≤ 2^64−1: a fee amount or gas limit a tx can carry (0 is refused: omit the field instead). */
export const isPositiveUint64 = (value: bigint): boolean => value >= 1n && value <= UINT64_MAX;
